MAX_THREADS = 1024
LOWEST = np.float32(-3.0e38)


@cuda.jit
def softmax_rows(x, out):
    part = cuda.shared.array(MAX_THREADS, np.float32)
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    cols = x.shape[1]

    m = LOWEST
    for j in range(t, cols, nt):        # read 1 of x
        m = max(m, x[row, j])
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
    for j in range(t, cols, nt):        # read 2 of x
        s += math.exp(x[row, j] - m)
    part[t] = s
    cuda.syncthreads()
    step = nt // 2
    while step > 0:
        if t < step:
            part[t] += part[t + step]
        cuda.syncthreads()
        step //= 2
    s = part[0]

    for j in range(t, cols, nt):        # read 3 of x
        out[row, j] = math.exp(x[row, j] - m) / s
