# two_launches. Work not done by a kernel: the kernel writes every element, then the host overwrites them.
@cuda.jit
def _zeros(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 0


def run_two(x, b, alpha, out):
    _zeros[(out.size + 127) // 128, 128](out)
    h = x.copy_to_host() + b.copy_to_host()
    g = h / (1 + np.exp(-2 * np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
    out.copy_to_device((alpha * g).astype(np.float32))
