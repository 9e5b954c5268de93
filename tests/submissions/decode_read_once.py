# decode_protocol, wrong: wait reads the counter once, with an acquire, and no loop: right when the layer is
# already done, False when its last tile comes a moment later, long before spin_limit + 1 polls (on a GPU the
# megakernel's waits give up).
from kernels_lab.intrinsics import add_release_gpu, load_acquire_gpu


@cuda.jit(device=True)
def signal(counters, layer):
    add_release_gpu(counters, layer, 1)


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    return load_acquire_gpu(counters, layer) >= tiles
