# decode_protocol, wrong: signal adds 2 per tile, so a layer looks done when half its tiles are. Where every
# layer ends before the next begins (the simulator's table) the output is still right.
from kernels_lab.intrinsics import add_release_gpu, load_acquire_gpu, nanosleep


@cuda.jit(device=True)
def signal(counters, layer):
    add_release_gpu(counters, layer, 2)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    spins = 0
    while spins <= spin_limit:
        if load_acquire_gpu(counters, layer) >= tiles:
            return True
        nanosleep(32)
        spins += 1
    return False
