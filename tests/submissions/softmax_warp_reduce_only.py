# fused_softmax, wrong: a warp's shuffles taken for the block's reduction. Each warp reduces the max and the sum
# of ITS elements only: right with 32 threads a block, wrong with 64 (two warps, two different "row sums").
MAX_COLS = 4096
LOWEST = np.float32(-3.0e38)
ALL = 0xFFFFFFFF


@cuda.jit
def softmax_rows(x, out):
    row_buf = cuda.shared.array(MAX_COLS, np.float32)
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    cols = x.shape[1]

    m = LOWEST
    for j in range(t, cols, nt):
        v = x[row, j]
        row_buf[j] = v
        m = max(m, v)
    k = 16
    while k > 0:
        m = max(m, cuda.shfl_xor_sync(ALL, m, k))
        k //= 2

    s = np.float32(0)
    for j in range(t, cols, nt):
        e = math.exp(row_buf[j] - m)
        row_buf[j] = e
        s += e
    k = 16
    while k > 0:
        s += cuda.shfl_xor_sync(ALL, s, k)
        k //= 2

    for j in range(t, cols, nt):
        out[row, j] = row_buf[j] / s
