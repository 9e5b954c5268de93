"""The copy ceiling: the best device-to-device copy bandwidth, measured in the same run.

Bytes counted are read + written. Two candidates, the best one wins:
  - the driver's memcpy (numba's DeviceNDArray.copy_to_device);
  - a tuned copy kernel: the same 16-byte-access skeleton the fused kernels use.
A ceiling far below ~4.1 TB/s on an H200 means neither copy was a good one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..workloads.elementwise import BLOCK, vector_map
from ..runtime import cuda
from ..instrument.timing import time_launchers


@cuda.jit(device=True, inline=True)
def identity(a, unused, alpha):
    return a


copy_kernel = vector_map(identity, 1, grid_stride=False)


@dataclass(frozen=True)
class Ceiling:
    GBs: float
    best: str
    candidates: dict[str, float]  # name -> GB/s


def measure_copy_ceiling(n: int = 1 << 28, reps: int = 20) -> Ceiling:
    src = cuda.to_device(np.random.default_rng(0).standard_normal(n, dtype=np.float32))
    dst = cuda.device_array_like(src)
    grid = (-(-n // 4) + BLOCK - 1) // BLOCK
    alpha = np.float32(1)
    candidates = {
        "driver memcpy": lambda: dst.copy_to_device(src),
        "copy kernel (16-byte accesses)": lambda: copy_kernel[grid, BLOCK](src, src, alpha, dst),
    }
    timings = time_launchers(list(candidates.values()), reps=reps)
    if not np.array_equal(dst.copy_to_host(), src.copy_to_host()):
        raise RuntimeError("copy ceiling: the copy is wrong")
    gbs = {name: 2 * 4 * n / (t.median_ms * 1e-3) / 1e9 for name, t in zip(candidates, timings)}
    best = max(gbs, key=gbs.get)
    return Ceiling(gbs[best], best, gbs)
