import math


@cuda.jit
def _add_gelu(x, b, g):
    i = cuda.grid(1)
    if i < g.size:
        h = x[i] + b[i]
        u = np.float32(math.sqrt(2.0 / math.pi)) * (h + np.float32(0.044715) * h * h * h)
        g[i] = h / (np.float32(1) + math.exp(np.float32(-2) * u))


@cuda.jit
def _scale(g, alpha, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = alpha * g[i]


def run_two(x, b, alpha, out):
    g = cuda.device_array_like(out)
    grid = (out.size + 127) // 128
    _add_gelu[grid, 128](x, b, g)
    _scale[grid, 128](g, alpha, out)
