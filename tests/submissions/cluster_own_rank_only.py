# cluster_combine, wrong: each block reads its own pair only (rank = cluster_rank() every time).
from kernels_lab.clusters import cluster_rank, cluster_sync, dsmem_load


@cuda.jit(device=True)
def cluster_combine(pair_m, pair_d):
    cluster_sync()
    me = cluster_rank()
    m = dsmem_load(pair_m, 0, me)
    s = dsmem_load(pair_d, 0, me)
    cluster_sync()
    return m, s
