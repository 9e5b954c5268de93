hog = np.ones(10 * 2**30 // 8)  # 10 GB


@cuda.jit
def fused_chain(x, b, alpha, out):
    pass
