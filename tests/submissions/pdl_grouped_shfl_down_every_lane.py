# group_switches, wrong: a grouped kernel whose absmax is a shfl_down_sync reduction, which leaves the total in
# lane 0 only, and never combines the warps: every lane quantizes with the scale of its own partial max.
# Its PDL switches are right (it waits before it reads, never triggers): the run is what is wrong.
from kernels_lab.intrinsics import grid_dependency_wait

ALL = 0xFFFFFFFF


@cuda.jit
def grouped(data, offsets, q, scales):
    t, tid = cuda.blockIdx.x, cuda.threadIdx.x
    grid_dependency_wait()
    lo, hi = offsets[t], offsets[t + 1]
    m = np.float32(0)
    for i in range(lo + tid, hi, cuda.blockDim.x):
        m = max(m, abs(data[i]))
    k = 16
    while k > 0:
        m = max(m, cuda.shfl_down_sync(ALL, m, k))
        k //= 2
    absmax = m  # lane 0 holds its warp's max; every other lane a part of it (and no warp the block's)
    scale = absmax / np.float32(127) if absmax > 0 else np.float32(1)
    for i in range(lo + tid, hi, cuda.blockDim.x):
        q[i] = np.int8(max(-127, min(127, round(data[i] / scale))))
    if tid == 0:
        scales[t] = scale


def group_switches(g):
    return grouped
