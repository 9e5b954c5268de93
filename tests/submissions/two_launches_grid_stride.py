import math


@cuda.jit
def add_gelu(x, b, g):
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, g.size, stride):
        h = x[i] + b[i]
        u = np.float32(math.sqrt(2.0 / math.pi)) * (h + np.float32(0.044715) * h * h * h)
        g[i] = np.float32(0.5) * h * (np.float32(1) + math.tanh(u))


@cuda.jit
def scale(g, alpha, out):
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, stride):
        out[i] = alpha * g[i]


def run_two(x, b, alpha, out):
    # a fixed grid whatever n is: each thread strides through the arrays
    g = cuda.device_array(out.shape, dtype=np.float32)
    add_gelu[4, 64](x, b, g)
    scale[4, 64](g, alpha, out)
