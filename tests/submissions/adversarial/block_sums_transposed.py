# block_sums. A deterministic bug: block and thread swapped in the index (every schedule agrees). Not a race.
@cuda.jit
def block_sums(x, out):
    tile = cuda.shared.array(64, dtype=np.float32)
    t = cuda.threadIdx.x
    i = t * cuda.gridDim.x + cuda.blockIdx.x
    tile[t] = x[i] if i < x.size else np.float32(0)
    cuda.syncthreads()
    step = 32
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = tile[0]
