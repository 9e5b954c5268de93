# fuse_chain. A kernel that does nothing: it must earn no budget points either.
@cuda.jit
def fused_chain(x, b, alpha, out):
    pass
