"""What a decode kernel holds on an SM, read from the compiled kernel: registers and local memory per thread,
blocks an SM can keep resident, and the weight bytes each SM has asked of memory at once.

The last is the bytes-in-flight model behind the megakernel's hidden-4096 deficit: by Little's law a stream
reaches the copy ceiling only while ceiling x latency bytes are in flight, and a block of these kernels has
its tile's loads in flight only between issuing them and using them (load -> wait -> compute -> count, then
the next tile); the double-buffered megakernel keeps a second tile in flight through the rest.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ...backend import BACKEND
from ...core import Size
from . import kernels as dk
from . import workload as decode

F32 = 4


@dataclass(frozen=True)
class Residency:
    """One kernel of one variant at one size, on this device."""

    threads: int
    regs_per_thread: int
    local_bytes_per_thread: int  # > 0: w[] did not stay in registers
    resident_per_sm: int         # blocks an SM can hold at once (registers, shared memory, threads)
    blocks_per_sm: float         # blocks this launch puts on an SM (at most resident_per_sm)
    tile_bytes: int              # weights of one tile
    tiles_in_registers: int      # per block: 1, or 2 (double-buffered)
    tiles_prefetched: int        # per block, asked of L2 beyond those

    @property
    def in_flight_per_sm(self) -> float:
        """Weight bytes an SM has asked for at most at once: register tiles and L2 prefetches of its blocks."""
        return self.blocks_per_sm * self.tile_bytes * (self.tiles_in_registers + self.tiles_prefetched)

    def record(self) -> dict[str, Any]:
        return {**asdict(self), "in_flight_per_sm": self.in_flight_per_sm}


def residency(kernel, geo: dk.Geometry, grid: int, tiles_in_registers: int, tiles_prefetched: int) -> Residency:
    """`kernel` (one @cuda.jit kernel that has run: its one compiled overload is read) launched with `grid`
    blocks of geo.threads."""
    if len(kernel.overloads) != 1:
        raise ValueError(f"residency: {kernel.py_func.__name__} has {len(kernel.overloads)} compiled overloads; "
                         f"run it once (and with one argument signature) first")
    (signature, compiled), = kernel.overloads.items()
    sms = BACKEND.facts().sm_count
    resident = BACKEND.persistent_grid(kernel, signature, geo.threads) // sms
    return Residency(geo.threads, int(compiled.regs_per_thread), int(compiled.local_mem_per_thread), resident,
                     min(float(resident), grid / sms), F32 * geo.rows * geo.hidden, tiles_in_registers,
                     tiles_prefetched)


def of_variant(name: str, launch: Any, size: Size) -> Residency | None:
    """The residency of a decode variant's (main) kernel after `launch` (its bound launch) has run, or None
    for a variant these kernels do not make (a torch anchor)."""
    if isinstance(launch, decode.MegakernelLaunch):
        return residency(launch.kernel, launch.geo, launch.table.shape[0], *launch.tiles_held)
    geo = dk.geometry(size.hidden, size.batch)
    k = dk.kernels(geo)
    if name == "persistent":  # the next tile asked of L2 while this one computes
        return residency(k.persistent, geo, decode.persistent_blocks(geo), 1, 1)
    kernel = {"unfused": k.matvec, "fused": k.layer, "graph": k.layer,
              "graph_pdl": k.layer_pdl if BACKEND.runs_griddepcontrol else k.layer}.get(name)
    return None if kernel is None else residency(kernel, geo, geo.tiles, 1, 0)


def of_mega(mega: decode.Mega, size: Size) -> Residency:
    """The residency of a megakernel of kind and shape `mega` at `size`, once a launch of it there has run."""
    geo = mega.geometry(size.hidden, size.batch)
    held = (2, mega.prefetch) if mega.double_buffered else (1, 1)
    return residency(mega.kernel(geo), geo, mega.blocks(geo, size.layers), *held)
