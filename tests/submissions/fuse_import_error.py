import numba_cuda_helpers_that_do_not_exist  # noqa: F401


@cuda.jit
def fused_chain(x, b, alpha, out):
    pass
