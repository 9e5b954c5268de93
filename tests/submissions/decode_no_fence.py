# decode_protocol, wrong: signal counts with a plain atomic add and no fence before it (numba's atomics are
# relaxed). Another block may see the count before this block's stores of x_{l+1}, and read stale values. The
# simulator's memory is coherent, so every run is right there: only the PTX shows it.
from kernels_lab.intrinsics import load_acquire_gpu, nanosleep


@cuda.jit(device=True)
def signal(counters, layer):
    cuda.atomic.add(counters, layer, 1)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    spins = 0
    while spins <= spin_limit:
        if load_acquire_gpu(counters, layer) >= tiles:
            return True
        nanosleep(32)
        spins += 1
    return False
