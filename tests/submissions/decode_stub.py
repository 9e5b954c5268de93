# decode_protocol, the lesson's stub untouched: signal counts nothing, wait never returns True. It holds below the
# count and gives up, trivially: those checks earn nothing until wait returns at the count. 0 points.
from kernels_lab.intrinsics import add_release_gpu, load_acquire_gpu, nanosleep


@cuda.jit(device=True)
def signal(counters, layer):
    # YOUR CODE: add 1 to counters[layer], after this block's stores are visible GPU-wide (a release add)
    pass


@cuda.jit(device=True)
def wait(counters, layer, tiles, spin_limit):
    # YOUR CODE: poll counters[layer] with an acquire load until it reaches tiles (return True); nanosleep
    # between polls; return False after spin_limit + 1 polls
    return False
