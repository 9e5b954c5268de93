# group_switches, correct, a grouped kernel written another way: block t quantizes tensor t, its absmax reduced by
# warp shuffles, then across the block's warps through shared memory (no atomics). It waits before it reads
# (launched with the PDL attribute, as the first member) and never triggers (as the last).
from kernels_lab.intrinsics import grid_dependency_wait

ALL = 0xFFFFFFFF


@cuda.jit
def grouped(data, offsets, q, scales):
    warp_max = cuda.shared.array(32, np.float32)
    t, tid = cuda.blockIdx.x, cuda.threadIdx.x
    grid_dependency_wait()  # before the first read of any array
    lo, hi = offsets[t], offsets[t + 1]
    m = np.float32(0)
    for i in range(lo + tid, hi, cuda.blockDim.x):
        m = max(m, abs(data[i]))
    k = 16
    while k > 0:
        m = max(m, cuda.shfl_xor_sync(ALL, m, k))
        k //= 2
    if tid % 32 == 0:
        warp_max[tid // 32] = m
    cuda.syncthreads()
    absmax = warp_max[0]
    for w in range(1, cuda.blockDim.x // 32):
        absmax = max(absmax, warp_max[w])
    scale = absmax / np.float32(127) if absmax > 0 else np.float32(1)
    for i in range(lo + tid, hi, cuda.blockDim.x):
        q[i] = np.int8(max(-127, min(127, round(data[i] / scale))))
    if tid == 0:
        scales[t] = scale


def group_switches(g):
    return grouped
