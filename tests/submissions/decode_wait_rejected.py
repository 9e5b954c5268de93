# decode_protocol, wrong only for a GPU: wait converts a string (int("0")), which the simulator runs as Python and
# numba's compiler rejects. Only wait's compiled check is lost, with the compiler's informative line; its probes
# run on the simulator, the lesson's wait stands in for it in the megakernel, and the signal beside it is judged
# on its own.
from kernels_lab.intrinsics import add_release_gpu, load_acquire_gpu, nanosleep


@cuda.jit(device=True)
def signal(counters, layer):
    add_release_gpu(counters, layer, 1)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    spins = int("0")
    while spins <= spin_limit:
        if load_acquire_gpu(counters, layer) >= tiles:
            return True
        nanosleep(32)
        spins += 1
    return False
