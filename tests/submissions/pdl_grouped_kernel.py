# Lesson 06's graded exercise answered with one grouped kernel instead of G launches with switches:
# block t quantizes tensor t. Every launch carries the PDL attribute, so the kernel waits before it
# reads (the first member's rule) and never triggers (the last member's rule).
from kernels_lab.intrinsics import grid_dependency_wait


@cuda.jit
def grouped(data, offsets, q, scales):
    absmax_sh = cuda.shared.array(1, np.float32)
    t, tid = cuda.blockIdx.x, cuda.threadIdx.x
    grid_dependency_wait()  # the earlier kernel's writes are visible from here on
    if tid == 0:
        absmax_sh[0] = 0
    cuda.syncthreads()
    m = np.float32(0)
    for i in range(offsets[t] + tid, offsets[t + 1], cuda.blockDim.x):
        m = max(m, abs(data[i]))
    cuda.atomic.max(absmax_sh, 0, m)
    cuda.syncthreads()
    absmax = absmax_sh[0]
    scale = absmax / np.float32(127) if absmax > 0 else np.float32(1)
    for i in range(offsets[t] + tid, offsets[t + 1], cuda.blockDim.x):
        q[i] = np.int8(max(-127, min(127, round(data[i] / scale))))
    if tid == 0:
        scales[t] = scale


def group_switches(g):
    return grouped  # one kernel for the whole group: no boundaries inside it, nothing to order
