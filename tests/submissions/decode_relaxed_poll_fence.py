# decode_protocol, right with a relaxed poll: an atomic read (cuda.atomic.add of 0, a relaxed atom: re-read every
# time) orders nothing by itself, so a gpu-scope fence follows the poll that saw the count; the count is a
# release add.
from kernels_lab.intrinsics import add_release_gpu


@cuda.jit(device=True)
def signal(counters, layer):
    add_release_gpu(counters, layer, 1)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    spins = 0
    while spins <= spin_limit:
        if cuda.atomic.add(counters, layer, 0) >= tiles:
            cuda.threadfence()  # the block's reads of x_l come after the poll that saw the count
            return True
        spins += 1
    return False
