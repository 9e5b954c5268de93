# block_sums. A deterministic bug: the last block reads past the end of x (no guard). Not a race.
@cuda.jit
def block_sums(x, out):
    tile = cuda.shared.array(64, dtype=np.float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * 64 + t
    tile[t] = x[i]
    cuda.syncthreads()
    step = 32
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = tile[0]
