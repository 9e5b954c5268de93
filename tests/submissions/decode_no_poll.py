# decode_protocol, wrong: wait returns True without reading the counter. Where every layer ends before the next
# begins (the simulator's table) the output is right by luck; on a GPU the blocks read x_l before it is written.
from kernels_lab.intrinsics import add_release_gpu


@cuda.jit(device=True)
def signal(counters, layer):
    add_release_gpu(counters, layer, 1)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    return True
