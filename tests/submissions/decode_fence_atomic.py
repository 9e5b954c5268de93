# decode_protocol, right in another style than the lesson's: a gpu-scope fence (cuda.threadfence, membar.gl)
# before a plain atomic add is the release; the poll is an acquire load with a nanosleep between polls.
from kernels_lab.intrinsics import load_acquire_gpu, nanosleep


@cuda.jit(device=True)
def signal(counters, layer):
    cuda.threadfence()  # this block's stores of the tile are visible GPU-wide before the count
    cuda.atomic.add(counters, layer, 1)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    for _ in range(spin_limit + 1):
        if load_acquire_gpu(counters, layer) >= tiles:
            return True
        nanosleep(64)
    return False
