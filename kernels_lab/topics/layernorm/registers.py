"""Registers per thread and resident blocks per SM of every layernorm kernel on sm_90 (H100, H200), from the
compiled kernels, with no GPU (instrument/ptxas.py: numba's compiler, then `ptxas -arch=sm_90 -v`; at the long
rows also staged.py's v6 and v7, whose stages' shared memory counts, and at every width onchip.py's v10 and v11,
whose weights' does). Lesson 08 reads the committed file beside
the measured fractions of the copy ceiling:

    KERNELS_LAB_BACKEND=ptx python -m kernels_lab.topics.layernorm.registers figures/data/compiled/layernorm_registers_sm90.json
"""

from __future__ import annotations

import sys
from typing import Any

from ...instrument import ptxas
from ...instrument.ptxas import THREADS_PER_SM, blocks_per_sm
from ..softmax.staged import stage_bytes, staged_layout
from .cluster import REGISTERED, RESIDENT_THREADS, cluster_kernel, layout
from .onchip import RESIDENT_THREADS as ONCHIP_RESIDENT
from .onchip import layernorm_onchip_kernel, onchip_layout, weight_bytes
from .staged import layernorm_staged_kernel
from .study import LONG, SHAPES
from .workload import fused_kernel, fused_shape, stream_shape, unfused_kernels


def _signature(kernel: Any) -> tuple:
    """The argument types the kernel is launched with (workload.bind_*): flat float32 arrays, int64s, a float32."""
    from numba import types
    arr = types.Array(types.float32, 1, "C")
    by_name = {"x": arr, "rmean": arr, "rrstd": arr, "gamma": arr, "beta": arr, "out": arr,
               "rows": types.int64, "cols": types.int64, "slice_vectors": types.int64, "eps": types.float32}
    names = kernel.py_func.__code__.co_varnames[:kernel.py_func.__code__.co_argcount]
    return tuple(by_name[n] for n in names)


def usage(kernel: Any, block: int) -> dict[str, Any]:
    """ptxas's count for a layernorm kernel, launched with its variant's arguments."""
    return ptxas.usage(kernel, _signature(kernel), block)


def kernels_at(cols: int, staged: bool = False) -> list[tuple[str, Any, int, float, int]]:
    """(variant: kernel, the kernel, its block, rows a block works on at once, dynamic shared bytes a block) for
    every kernel the variants launch at this width (a cluster's blocks share a row: 1 / blocks of the cluster);
    `staged`: staged.py's v6 and v7 too."""
    stream = stream_shape(cols)
    found = [(f"unfused: {k.py_func.__name__.split('_', 1)[1].rsplit('_', 2)[0]}", k, stream.block, 1.0, 0)
             for k in unfused_kernels(stream)]
    shape = fused_shape(cols)
    if shape is not None:
        found += [("fused", fused_kernel(shape), shape.block, shape.rows_per_block, 0),
                  ("persistent", fused_kernel(shape, hold=True), shape.block, shape.rows_per_block, 0)]
    for name, version in (("cluster", REGISTERED), ("cluster v1", 1), ("cluster v2", 2), ("cluster v3", 3),
                          ("cluster v4", 4), ("cluster v5", 5), ("cluster v8", 8)):
        held = layout(cols, version)
        if held is not None:
            found.append((name, cluster_kernel(held, version), held.threads, 1 / held.slices, 0))
    if (held := onchip_layout(cols)) is not None:  # v10, v11: gamma and beta in dynamic shared memory
        found += [(f"cluster v{v}", layernorm_onchip_kernel(held, resident), held.threads, 1 / held.slices,
                   weight_bytes(held)) for v, resident in ((10, ONCHIP_RESIDENT), (11, RESIDENT_THREADS))]
    if staged and (shape := staged_layout(cols)) is not None:
        found += [(f"cluster v{7 if once else 6}", layernorm_staged_kernel(shape, 2, once), shape.threads,
                   1 / shape.slices, stage_bytes(shape)) for once in (False, True)]  # once: the stage read once
    return found


def table() -> list[dict[str, Any]]:
    rows = []
    for size in SHAPES + LONG:
        for variant, kernel, block, rows_per_block, dynamic in kernels_at(size.cols, staged=size in LONG):
            row = ptxas.kernel_row(size, variant, kernel.py_func, block, usage(kernel, block), dynamic)
            resident = row["blocks_per_sm"]
            rows.append({**row, "rows_per_sm": resident * rows_per_block, "threads_per_sm": resident * block,
                         "occupancy": resident * block / THREADS_PER_SM})
    return rows


def _line(r: dict[str, Any]) -> str:
    return (f"{r['size']['rows']:>6} x {r['size']['cols']:<5} {r['variant']:<16} {r['threads']:>5} threads "
            f"{r['registers']:>4} registers  {r['blocks_per_sm']:>2} blocks/SM ({r['limited_by']}), "
            f"occupancy {r['occupancy']:.0%}")


def main(out: str) -> None:
    ptxas.write_table(out, "kernels_lab.topics.layernorm.registers", table, _line)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
