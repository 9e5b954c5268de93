# decode_protocol, right in another style: a release add; wait polls with an acquire load and backs off
# exponentially between polls (nanosleep from 32 ns, doubling up to 1 us), counting its polls down.
from kernels_lab.intrinsics import add_release_gpu, load_acquire_gpu, nanosleep


@cuda.jit(device=True)
def signal(counters, layer):
    add_release_gpu(counters, layer, 1)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    pause = 32
    left = spin_limit + 1
    while left > 0:
        if load_acquire_gpu(counters, layer) >= tiles:
            return True
        nanosleep(pause)
        pause = min(pause * 2, 1024)
        left -= 1
    return False
