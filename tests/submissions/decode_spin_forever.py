# decode_protocol, wrong: wait reads the counter once and, short of the count, spins on that one value forever:
# what a plain load hoisted out of the loop compiles to, written out. It never gives up and never sees the count
# come. On the simulator the grader abandons the probe and says so; on a GPU nothing can stop the kernel, and
# the grader's time limit ends that run.
from kernels_lab.intrinsics import add_release_gpu


@cuda.jit(device=True)
def signal(counters, layer):
    add_release_gpu(counters, layer, 1)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    seen = counters[layer]
    spins = 0
    while seen < tiles:
        spins += 1
    return True
