# cluster_combine, right: a cluster barrier, every rank's pair by DSMEM folded with the online rule, a barrier after.
import math

from kernels_lab.clusters import cluster_size, cluster_sync, dsmem_load


@cuda.jit(device=True)
def cluster_combine(pair_m, pair_d):
    cluster_sync()  # every block's pair is written
    m = dsmem_load(pair_m, 0, 0)
    s = dsmem_load(pair_d, 0, 0)
    for r in range(1, cluster_size()):
        m2 = dsmem_load(pair_m, 0, r)
        s2 = dsmem_load(pair_d, 0, r)
        big = max(m, m2)
        s = s * math.exp(m - big) + s2 * math.exp(m2 - big)
        m = big
    cluster_sync()  # nobody overwrites or leaves while another block still reads its pair
    return m, s
