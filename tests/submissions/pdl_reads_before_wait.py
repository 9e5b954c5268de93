# group_switches answered with one grouped kernel that reads its tensor (the absmax pass) BEFORE it waits:
# launched with the PDL attribute it may start while the earlier kernel still writes `data`, and the wait
# that follows comes too late for the values already read. It waits and does not trigger: only WHERE the
# wait stands is wrong.
from kernels_lab.intrinsics import grid_dependency_wait


@cuda.jit
def grouped(data, offsets, q, scales):
    absmax_sh = cuda.shared.array(1, np.float32)
    t, tid = cuda.blockIdx.x, cuda.threadIdx.x
    if tid == 0:
        absmax_sh[0] = 0
    cuda.syncthreads()
    m = np.float32(0)
    for i in range(offsets[t] + tid, offsets[t + 1], cuda.blockDim.x):
        m = max(m, abs(data[i]))
    grid_dependency_wait()  # too late: data was read above
    cuda.atomic.max(absmax_sh, 0, m)
    cuda.syncthreads()
    absmax = absmax_sh[0]
    scale = absmax / np.float32(127) if absmax > 0 else np.float32(1)
    for i in range(offsets[t] + tid, offsets[t + 1], cuda.blockDim.x):
        q[i] = np.int8(max(-127, min(127, round(data[i] / scale))))
    if tid == 0:
        scales[t] = scale


def group_switches(g):
    return grouped
