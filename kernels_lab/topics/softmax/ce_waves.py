"""How many waves of blocks each cross-entropy variant launches at the study's sizes, on sm_90 (H100, H200: 132
SMs), from the compiled kernels with no GPU (instrument/ptxas.py). Lesson 04 reads the committed file beside the
measured shares of the read ceiling:

    KERNELS_LAB_BACKEND=ptx python -m kernels_lab.topics.softmax.ce_waves figures/data/compiled/cross_entropy_waves_sm90.json

A wave is every SM holding as many blocks as its registers, threads and shared memory allow; a launch of
1.01 waves leaves its last blocks running alone on a few SMs while the rest wait for nothing (the tail).
The cluster variant is left out: its blocks are placed a cluster at a time.
"""

from __future__ import annotations

import sys
from typing import Any

from ...instrument import ptxas
from .cross_entropy import ce_kernel, shape_for
from .cross_entropy_study import VOCAB

SMS = 132  # the H100 SXM's and the H200's


def _signature() -> tuple:
    """ce(x, labels, loss, part, count, cols, slice_vectors), as cross_entropy.bind launches it."""
    from numba import types
    f32, i32 = types.Array(types.float32, 1, "C"), types.Array(types.int32, 1, "C")
    return (f32, i32, f32, f32, i32, types.int64, types.int64)


def table() -> list[dict[str, Any]]:
    rows = []
    for size in VOCAB:
        for variant, split in (("fused", False), ("split", True)):
            shape = shape_for(size.cols, split)
            kernel = ce_kernel(shape)
            row = ptxas.kernel_row(size, variant, kernel.py_func, shape.threads,
                                   ptxas.usage(kernel, _signature(), shape.threads))
            blocks = size.rows * shape.slices
            rows.append({**row, "slices": shape.slices, "blocks": blocks, "waves": blocks / (SMS * row["blocks_per_sm"])})
    return rows


def _line(r: dict[str, Any]) -> str:
    return (f"{r['size']['rows']:>6} x {r['size']['cols']:<7} {r['variant']:<6} {r['blocks']:>6} blocks of "
            f"{r['threads']} threads, {r['registers']} registers, {r['blocks_per_sm']} blocks/SM "
            f"({r['limited_by']}): {r['waves']:.2f} waves")


def main(out: str) -> None:
    ptxas.write_table(out, "kernels_lab.topics.softmax.ce_waves", table, _line, sms=SMS)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
