"""The ceilings against the bytes of one pass: how much of a kernel's time is fixed (its launch seen by the
events, the grid filling the GPU, the last wave draining), not bytes moving.

    KERNELS_LAB_BACKEND=gpu python -m kernels_lab.profile.ceiling_sizes OUT.json

The studies divide by ceilings measured on 1 GiB of floats (ceiling.py, one pass, cold L2) while their own passes
move 256 MiB, so a fixed cost weighs four times more in a line's pass than in the ceiling's. Here the read kernel
and the copy kernel run at 64 MiB, 256 MiB and 1 GiB on both clocks of the studies: one pass with a cold L2
(time_launchers) and passes back to back (time_steady). Writes records of kind "ceiling_size".
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..instrument.timing import time_launchers, time_steady, why_untimed
from ..runtime import cuda
from . import results
from .ceiling import READ4, check_copy, check_read, copy_launcher, read_launchers

FLOATS = (1 << 24, 1 << 26, 1 << 28)  # 64 MiB, 256 MiB (a study's pass), 1 GiB (the ceilings' own)


def measure(floats: tuple[int, ...] = FLOATS, reps: int = 20) -> list[dict[str, Any]]:
    """The read kernel (four 16-byte vectors a thread) and the copy kernel at each size, on both clocks."""
    records = []
    for n in floats:
        src = cuda.to_device(np.random.default_rng(n).standard_normal(n, dtype=np.float32))
        dst, out = cuda.device_array_like(src), cuda.to_device(np.zeros(1, np.float32))
        lines = {"read": (read_launchers(src, out)[READ4], 4 * n), "copy": (copy_launcher(src, dst), 8 * n)}
        once = time_launchers([f for f, _ in lines.values()], reps=reps)
        steady = time_steady([f for f, _ in lines.values()], reps=reps, once_ms=[t.median_ms for t in once])
        check_read(out)
        check_copy(src, dst)
        for (what, (_, moved)), t1, ts in zip(lines.items(), once, steady):
            records.append({"kind": "ceiling_size", "what": what, "floats": n, "bytes": moved,
                            "time_ms": t1.median_ms, "time_ms_steady": ts.median_ms,
                            "GBs": moved / t1.median_ms / 1e6, "GBs_steady": moved / ts.median_ms / 1e6})
            print(f"{what:<5}{4 * n >> 20:>6} MiB  one pass {t1.median_ms:8.4f} ms {moved / t1.median_ms / 1e6:6.0f} GB/s"
                  f"   steady {ts.median_ms:8.4f} ms {moved / ts.median_ms / 1e6:6.0f} GB/s", flush=True)
    return records


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    if (why := why_untimed()) is not None:  # before any allocation: the PTX-only back-end has no device
        print(f"ceiling_sizes: {why}", file=sys.stderr)
        return 2
    results.dump(results.make_meta(), measure(), argv[0])
    print(f"wrote {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
