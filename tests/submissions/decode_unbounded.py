# decode_protocol, wrong: wait ignores spin_limit and polls until the count comes. Right whenever the count
# does come; where it never does (a table that leaves a tile out, a block that never runs) it hangs the GPU
# instead of reporting the error.
from kernels_lab.intrinsics import add_release_gpu, load_acquire_gpu, nanosleep


@cuda.jit(device=True)
def signal(counters, layer):
    add_release_gpu(counters, layer, 1)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    while load_acquire_gpu(counters, layer) < tiles:
        nanosleep(32)
    return True
