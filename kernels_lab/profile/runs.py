"""What `kernels-lab profile` and a fixed `kernels-lab bench` run: a workload's sweep (with Nsight Compute's
DRAM bytes merged in), or one of the fixed GPU measurements that are not a workload's variants
(the launch ladder, the consumer, the PDL study); a topic's study is study.py's. The CLI parses and
prints; this module measures and writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..core import Size, Workload
from ..backend import BACKEND
from . import results


@dataclass(frozen=True)
class Bench:
    about: str
    measure: Callable[[], list[dict[str, Any]]]


def benches() -> dict[str, Bench]:
    """`kernels-lab bench NAME`: fixed configurations on a GPU, not a workload's variants (so not `profile`);
    each is a topic's bench.py BENCH."""
    from .. import topics
    return topics.benches()


def run_bench(name: str, json_path: str | Path, command: str) -> list[dict[str, Any]]:
    records = benches()[name].measure()
    results.dump(results.make_meta(command, None), records, json_path)
    return records


def ncu_missing() -> str | None:
    """Why `profile --ncu` cannot run here (no ncu on PATH), known before the sweep; else None."""
    import shutil
    if shutil.which("ncu") is None:
        return "ncu (Nsight Compute) is not on PATH: install it (or add it to PATH), or drop --ncu"
    return None


def profile_workload(workload: Workload, sizes: Sequence[Size], *, json_path: str | Path, reps: int,
                     warm: bool, with_ncu: bool, command: str,
                     say: Callable[[str], None] = print) -> tuple[list[dict[str, Any]], str | None]:
    """Sweep `sizes`; with_ncu: then measure DRAM bytes at the largest size under Nsight Compute and
    merge them into that size's records. Returns (records, the ncu problem if it could not run)."""
    from .sweep import sweep
    ceiling = None
    if BACKEND.can_time:
        from .ceiling import measure_copy_ceiling
        ceiling = measure_copy_ceiling().GBs
        say(f"copy ceiling: {ceiling:.0f} GB/s")
    else:
        say("simulator: launches and traced bytes only, no timings")
    records = sweep(workload, sizes, json_path=json_path, ceiling_GBs=ceiling, reps=reps, flush=not warm,
                    command=command)
    problem = attach_ncu(workload, records, json_path, say) if with_ncu else None
    return records, problem


def attach_ncu(workload: Workload, records: list[dict[str, Any]], json_path: str | Path,
               say: Callable[[str], None] = print) -> str | None:
    """Nsight Compute's DRAM bytes for the largest size's records, rewritten into the results file
    (the sweep's own meta kept). Returns None, or why ncu could not measure."""
    from ..instrument import ncu
    largest = max(records, key=lambda r: r["n"])
    size = workload.size(**largest["size"])
    variants = list(dict.fromkeys(r["variant"] for r in records))
    try:
        measured = ncu.measure(workload.name, size, variants)
    except ncu.NcuError as e:
        return f"ncu: {e}; measured DRAM bytes are left out"
    for r in records:
        if r.get("size") == dict(size):
            kernels = measured[r["variant"]]
            r["bytes_dram_read"] = int(sum(k.dram_read for k in kernels))
            r["bytes_dram_write"] = int(sum(k.dram_write for k in kernels))
            r["ncu_time_ms"] = sum(k.time_s for k in kernels) * 1e3
            r["ncu_vs_model"] = (r["bytes_dram_read"] + r["bytes_dram_write"]) / r["bytes_model"] - 1
            say(f"  ncu {r['variant']:<12} DRAM {r['bytes_dram_read'] + r['bytes_dram_write']:>14,} B "
                f"({r['ncu_vs_model']:+.1%} vs model)")
    results.dump(results.load(json_path)["meta"], records, json_path)
    return None
