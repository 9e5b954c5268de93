# decode_protocol, wrong: wait polls the counter of the layer before (counters[layer - 1]), which is done long
# before this one; the block reads x_l before its tiles are counted.
from kernels_lab.intrinsics import add_release_gpu, load_acquire_gpu, nanosleep


@cuda.jit(device=True)
def signal(counters, layer):
    add_release_gpu(counters, layer, 1)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    spins = 0
    while spins <= spin_limit:
        if load_acquire_gpu(counters, layer - 1) >= tiles:
            return True
        nanosleep(32)
        spins += 1
    return False
