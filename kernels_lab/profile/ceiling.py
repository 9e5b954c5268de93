"""The copy ceiling: the best device-to-device copy bandwidth, measured in the same run.

Bytes counted are read + written. Two candidates, the best one wins:
  - the driver's memcpy (numba's DeviceNDArray.copy_to_device);
  - a copy kernel with 16-byte accesses, one vector a thread, as the fused kernels load and store.
A ceiling far below ~4.1 TB/s on an H200 means neither copy was a good one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..instrument.timing import time_launchers
from ..intrinsics import load4, store4
from ..runtime import cuda

BLOCK = 256


@cuda.jit
def copy_kernel(src, dst):
    v = cuda.grid(1)
    if v < dst.size >> 2:
        a0, a1, a2, a3 = load4(src, v)
        store4(dst, v, a0, a1, a2, a3)
    elif v == dst.size >> 2:  # the last n % 4 floats, one thread
        for i in range(v * 4, dst.size):
            dst[i] = src[i]


@dataclass(frozen=True)
class Ceiling:
    GBs: float
    best: str
    candidates: dict[str, float]  # name -> GB/s


def measure_copy_ceiling(n: int = 1 << 28, reps: int = 20) -> Ceiling:
    src = cuda.to_device(np.random.default_rng(0).standard_normal(n, dtype=np.float32))
    dst = cuda.device_array_like(src)
    grid = (n // 4 + 1 + BLOCK - 1) // BLOCK
    candidates = {
        "driver memcpy": lambda: dst.copy_to_device(src),
        "copy kernel (16-byte accesses)": lambda: copy_kernel[grid, BLOCK](src, dst),
    }
    timings = time_launchers(list(candidates.values()), reps=reps)
    if not np.array_equal(dst.copy_to_host(), src.copy_to_host()):
        raise RuntimeError("copy ceiling: the copy is wrong")
    gbs = {name: 2 * 4 * n / (t.median_ms * 1e-3) / 1e9 for name, t in zip(candidates, timings)}
    best = max(gbs, key=gbs.get)
    return Ceiling(gbs[best], best, gbs)
