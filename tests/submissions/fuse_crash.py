import ctypes

ctypes.string_at(0)  # segmentation fault at import


@cuda.jit
def fused_chain(x, b, alpha, out):
    pass
