import math


@cuda.jit
def persistent_chain(x, b, alpha, out):
    # each block takes one contiguous chunk of the array; its threads stride through the chunk
    n = out.size
    chunk = (n + cuda.gridDim.x - 1) // cuda.gridDim.x
    start = cuda.blockIdx.x * chunk
    stop = min(start + chunk, n)
    i = start + cuda.threadIdx.x
    while i < stop:
        h = x[i] + b[i]
        u = np.float32(0.7978845608028654) * (h + np.float32(0.044715) * h * h * h)
        out[i] = alpha * h / (np.float32(1) + math.exp(np.float32(-2) * u))
        i += cuda.blockDim.x
