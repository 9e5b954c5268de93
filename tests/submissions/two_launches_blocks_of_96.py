import math

THREADS = 96  # not a power of two: the last block's guard matters


@cuda.jit
def first_stage(x, b, g):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= g.shape[0]:
        return
    h = x[i] + b[i]
    c = np.float32(0.7978845608028654)  # sqrt(2 / pi)
    g[i] = h / (np.float32(1.0) + math.exp(np.float32(-2.0) * c * (h + np.float32(0.044715) * h ** 3)))


@cuda.jit
def second_stage(g, alpha, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < out.shape[0]:
        out[i] = g[i] * alpha


def run_two(x, b, alpha, out):
    n = out.shape[0]
    g = cuda.device_array_like(x)
    blocks = math.ceil(n / THREADS)
    first_stage[blocks, THREADS](x, b, g)
    second_stage[blocks, THREADS](g, alpha, out)
