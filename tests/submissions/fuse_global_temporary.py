import math


@cuda.jit
def fused_chain(x, b, alpha, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + b[i]          # the temporary goes through global memory
        h = out[i]
        u = np.float32(math.sqrt(2.0 / math.pi)) * (h + np.float32(0.044715) * h * h * h)
        out[i] = alpha * (h / (np.float32(1) + math.exp(np.float32(-2) * u)))
