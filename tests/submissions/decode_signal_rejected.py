# decode_protocol, wrong only for a GPU: signal converts a string (int("1")), which the simulator runs as Python and
# numba's compiler rejects. Only signal's compiled check is lost, with the compiler's informative line; the
# wait beside it is right and judged on its own.
from kernels_lab.intrinsics import load_acquire_gpu, nanosleep


@cuda.jit(device=True)
def signal(counters, layer):
    cuda.threadfence()
    cuda.atomic.add(counters, layer, int("1"))


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    spins = 0
    while spins <= spin_limit:
        if load_acquire_gpu(counters, layer) >= tiles:
            return True
        nanosleep(32)
        spins += 1
    return False
