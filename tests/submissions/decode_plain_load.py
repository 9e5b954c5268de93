# decode_protocol, wrong: wait polls counters[layer] with an ordinary load. Nothing between two polls writes
# memory, so the compiler may hoist the load out of the loop (it does: the spin becomes one read), and nothing
# orders the block's reads of x_l after it. Right on the simulator, whose memory is coherent.
from kernels_lab.intrinsics import add_release_gpu


@cuda.jit(device=True)
def signal(counters, layer):
    add_release_gpu(counters, layer, 1)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    spins = 0
    while spins <= spin_limit:
        if counters[layer] >= tiles:
            return True
        spins += 1
    return False
