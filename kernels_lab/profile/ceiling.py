"""The copy ceiling: the best device-to-device copy bandwidth, measured in the same run; and the read ceiling,
for the problems that only read (cross-entropy: x in, a float per row out).

Copy: bytes counted are read + written. Two candidates, the best one wins:
  - the driver's memcpy (numba's DeviceNDArray.copy_to_device);
  - a copy kernel with 16-byte accesses, one vector a thread, as the fused kernels load and store.
A ceiling far below ~4.1 TB/s on an H200 means neither copy was a good one.
Read: bytes counted are read only; a kernel that sums 16-byte vectors and writes nothing (its one store hides
behind a comparison no sum meets, so the compiler keeps the loads): one vector a thread, or four.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

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


@cuda.jit
def read_kernel(src, never, out):
    """One 16-byte vector a thread, summed; out[0] is written only if the sum is `never` (it is not)."""
    v = cuda.grid(1)
    if v < src.size >> 2:
        a0, a1, a2, a3 = load4(src, v)
        s = (a0 + a1) + (a2 + a3)
        if s == never:
            out[0] = s


@cuda.jit
def read4_kernel(src, never, out):
    """Four vectors a thread, a grid apart (64 bytes in flight a thread), summed; out as read_kernel's."""
    t, stride = cuda.grid(1), cuda.gridsize(1)
    s = np.float32(0)
    for k in range(4):
        v = t + k * stride
        if v < src.size >> 2:
            a0, a1, a2, a3 = load4(src, v)
            s += (a0 + a1) + (a2 + a3)
    if s == never:
        out[0] = s


@dataclass(frozen=True)
class Ceiling:
    GBs: float
    best: str
    candidates: dict[str, float]  # name -> GB/s


NEVER = np.float32(np.finfo(np.float32).max)  # a sum no input reaches: the read kernels' one store never runs
READ4 = "read kernel (four 16-byte vectors a thread)"


def copy_launcher(src, dst) -> Callable[[], None]:
    """The copy kernel over all of src into dst, one 16-byte vector a thread (the n % 4 tail: one thread)."""
    grid = (src.size // 4 + 1 + BLOCK - 1) // BLOCK
    return lambda: copy_kernel[grid, BLOCK](src, dst)


def read_launchers(src, out) -> dict[str, Callable[[], None]]:
    """The two read kernels over all of src (a multiple of 4 floats), by name; out[0] stays 0 (check_read)."""
    one, four = (src.size // 4 + BLOCK - 1) // BLOCK, (src.size // 16 + BLOCK - 1) // BLOCK
    return {"read kernel (one 16-byte vector a thread)": lambda: read_kernel[one, BLOCK](src, NEVER, out),
            READ4: lambda: read4_kernel[four, BLOCK](src, NEVER, out)}


def check_copy(src, dst) -> None:
    if not np.array_equal(dst.copy_to_host(), src.copy_to_host()):
        raise RuntimeError(f"copy ceiling: the copy of {src.size} floats is wrong")


def check_read(out) -> None:
    if out.copy_to_host()[0] != 0:
        raise RuntimeError("read ceiling: a sum met the impossible value; the kernel is wrong")


def measure_copy_ceiling(n: int = 1 << 28, reps: int = 20) -> Ceiling:
    src = cuda.to_device(np.random.default_rng(0).standard_normal(n, dtype=np.float32))
    dst = cuda.device_array_like(src)
    candidates = {
        "driver memcpy": lambda: dst.copy_to_device(src),
        "copy kernel (16-byte accesses)": copy_launcher(src, dst),
    }
    timings = time_launchers(list(candidates.values()), reps=reps)
    check_copy(src, dst)
    gbs = {name: 2 * 4 * n / (t.median_ms * 1e-3) / 1e9 for name, t in zip(candidates, timings)}
    best = max(gbs, key=gbs.get)
    return Ceiling(gbs[best], best, gbs)


def measure_read_ceiling(n: int = 1 << 28, reps: int = 20) -> Ceiling:
    """The best rate at which a kernel reads n floats (n a multiple of 4), bytes read only."""
    if n % 4:
        raise ValueError(f"the read ceiling reads whole 16-byte vectors: n = {n} is not a multiple of 4")
    src = cuda.to_device(np.random.default_rng(0).standard_normal(n, dtype=np.float32))
    out = cuda.to_device(np.zeros(1, np.float32))
    candidates = read_launchers(src, out)
    timings = time_launchers(list(candidates.values()), reps=reps)
    check_read(out)
    gbs = {name: 4 * n / (t.median_ms * 1e-3) / 1e9 for name, t in zip(candidates, timings)}
    best = max(gbs, key=gbs.get)
    return Ceiling(gbs[best], best, gbs)
