# cluster_combine, wrong: the rank loop starts at 1 from the empty pair (rank 0's pair is never read).
import math

from kernels_lab.clusters import cluster_size, cluster_sync, dsmem_load
from kernels_lab.reduce import LOWEST


@cuda.jit(device=True)
def cluster_combine(pair_m, pair_d):
    cluster_sync()
    m, s = LOWEST, np.float32(0)
    for r in range(1, cluster_size()):
        m2 = dsmem_load(pair_m, 0, r)
        s2 = dsmem_load(pair_d, 0, r)
        big = max(m, m2)
        s = s * math.exp(m - big) + s2 * math.exp(m2 - big)
        m = big
    cluster_sync()
    return m, s
