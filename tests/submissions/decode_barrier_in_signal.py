# decode_protocol, wrong: signal calls cuda.syncthreads(), but only thread 0 of the block calls signal: the
# barrier waits for threads that never come to it (a GPU deadlocks, or the barrier meets the block's next one
# and the threads run out of step). The release add itself is right.
from kernels_lab.intrinsics import add_release_gpu, load_acquire_gpu, nanosleep


@cuda.jit(device=True)
def signal(counters, layer):
    cuda.syncthreads()  # "make the block's stores land first": the megakernel's own barrier already does
    add_release_gpu(counters, layer, 1)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    spins = 0
    while spins <= spin_limit:
        if load_acquire_gpu(counters, layer) >= tiles:
            return True
        nanosleep(32)
        spins += 1
    return False
