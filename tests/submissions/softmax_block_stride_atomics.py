# fused_softmax, correct, another style: a block-stride loop over rows (right for any grid, here one block per
# row), the row staged in shared memory, and the block's max and sum as shared-memory atomics instead of a tree.
MAX_COLS = 4096
LOWEST = np.float32(-3.0e38)


@cuda.jit
def softmax_rows(x, out):
    row_buf = cuda.shared.array(MAX_COLS, np.float32)
    stats = cuda.shared.array(2, np.float32)   # the row's max, the sum of its exps
    t, nt = cuda.threadIdx.x, cuda.blockDim.x
    rows, cols = x.shape
    for row in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        if t == 0:
            stats[0] = LOWEST
            stats[1] = 0
        cuda.syncthreads()
        m = LOWEST
        for j in range(t, cols, nt):
            v = x[row, j]
            row_buf[j] = v
            m = max(m, v)
        cuda.atomic.max(stats, 0, m)
        cuda.syncthreads()
        m = stats[0]
        s = np.float32(0)
        for j in range(t, cols, nt):
            e = math.exp(row_buf[j] - m)
            row_buf[j] = e
            s += e
        cuda.atomic.add(stats, 1, s)
        cuda.syncthreads()
        s = stats[1]
        for j in range(t, cols, nt):
            out[row, j] = row_buf[j] / s
        cuda.syncthreads()  # every thread has read stats before the next row resets them
