# cluster_combine, right in another style: arrive / wait split, the ranks read starting from the block's own
# (rank + i) % k, the maximum first over all ranks, then the rescaled sums in a second pass.
import math

from kernels_lab.clusters import cluster_arrive, cluster_rank, cluster_size, cluster_wait, dsmem_load


@cuda.jit(device=True)
def cluster_combine(pair_m, pair_d):
    cluster_arrive()
    cluster_wait()
    k = cluster_size()
    me = cluster_rank()
    big = dsmem_load(pair_m, 0, me)
    for i in range(1, k):
        big = max(big, dsmem_load(pair_m, 0, (me + i) % k))
    total = 0.0
    for i in range(k):
        r = (me + i) % k
        total += dsmem_load(pair_d, 0, r) * math.exp(dsmem_load(pair_m, 0, r) - big)
    cluster_arrive()
    cluster_wait()
    return big, total
