# fuse_chain. Correct, with a plain (not inline) device function: must compile without a GPU driver.
SQ = np.float32(math.sqrt(2.0 / math.pi))
C = np.float32(0.044715)


@cuda.jit(device=True)
def gelu(h):
    u = SQ * (h + C * h * h * h)
    return h / (np.float32(1) + math.exp(np.float32(-2) * u))


@cuda.jit
def fused_chain(x, b, alpha, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = alpha * gelu(x[i] + b[i])
