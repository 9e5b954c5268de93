# decode_protocol, wrong: the poll is a relaxed atomic read (cuda.atomic.add of 0) and the gpu-scope fence sits on
# the not-yet path only: the poll that sees the count returns True with no fence after it, so nothing orders the
# block's reads of x_l after that read. Right on the simulator (coherent memory): only the PTX's paths show it.
from kernels_lab.intrinsics import add_release_gpu


@cuda.jit(device=True)
def signal(counters, layer):
    add_release_gpu(counters, layer, 1)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    spins = 0
    while spins <= spin_limit:
        if cuda.atomic.add(counters, layer, 0) >= tiles:
            return True
        cuda.threadfence()  # on the path that polls again, not on the one that returns
        spins += 1
    return False
