# fused_softmax: tiles each row by the block's width and drops the last partial tile: the last cols % blockDim.x
# columns of EVERY row are never written (holes in the middle of the output, not one tail)
MAX_COLS = 4096
MAX_THREADS = 1024
LOWEST = np.float32(-3.0e38)


@cuda.jit
def softmax_rows(x, out):
    row_buf = cuda.shared.array(MAX_COLS, np.float32)
    part = cuda.shared.array(MAX_THREADS, np.float32)
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    cols = x.shape[1]
    full = (cols // nt) * nt  # whole tiles only

    m = LOWEST
    for j in range(t, cols, nt):
        v = x[row, j]
        row_buf[j] = v
        m = max(m, v)
    part[t] = m
    cuda.syncthreads()
    step = nt // 2
    while step > 0:
        if t < step:
            part[t] = max(part[t], part[t + step])
        cuda.syncthreads()
        step //= 2
    m = part[0]
    cuda.syncthreads()

    s = np.float32(0)
    for j in range(t, cols, nt):
        e = math.exp(row_buf[j] - m)
        row_buf[j] = e
        s += e
    part[t] = s
    cuda.syncthreads()
    step = nt // 2
    while step > 0:
        if t < step:
            part[t] += part[t + step]
        cuda.syncthreads()
        step //= 2
    s = part[0]

    for j in range(t, full, nt):
        out[row, j] = row_buf[j] / s
