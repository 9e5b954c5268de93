# decode_protocol, wrong: wait takes tiles - 1 counted tiles for the whole layer, so the block reads a row of
# x_l that the last tile has not written yet.
from kernels_lab.intrinsics import add_release_gpu, load_acquire_gpu, nanosleep


@cuda.jit(device=True)
def signal(counters, layer):
    add_release_gpu(counters, layer, 1)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    spins = 0
    while spins <= spin_limit:
        if load_acquire_gpu(counters, layer) >= tiles - 1:
            return True
        nanosleep(32)
        spins += 1
    return False
