# fused_softmax, wrong: the running max starts at 0, not at -inf (the lowest float). Right while a row has a
# positive element; on a row near -100 the "max" stays 0, every exp(x - 0) underflows to 0 and the row is 0 / 0.
MAX_COLS = 4096
MAX_THREADS = 1024


@cuda.jit
def softmax_rows(x, out):
    row_buf = cuda.shared.array(MAX_COLS, np.float32)
    part = cuda.shared.array(MAX_THREADS, np.float32)
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    cols = x.shape[1]

    m = np.float32(0)
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

    for j in range(t, cols, nt):
        out[row, j] = row_buf[j] / s
