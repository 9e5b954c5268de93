# decode_protocol, wrong: wait wants more than every tile (> tiles), a count that never comes: every wait of the
# megakernel gives up, and the host reports the error instead of an output.
from kernels_lab.intrinsics import add_release_gpu, load_acquire_gpu, nanosleep


@cuda.jit(device=True)
def signal(counters, layer):
    add_release_gpu(counters, layer, 1)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    spins = 0
    while spins <= spin_limit:
        if load_acquire_gpu(counters, layer) > tiles:
            return True
        nanosleep(32)
        spins += 1
    return False
