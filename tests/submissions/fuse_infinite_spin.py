@cuda.jit
def fused_chain(x, b, alpha, out):
    i = 0
    while i >= 0:   # never ends
        i = (i + 1) % 7
