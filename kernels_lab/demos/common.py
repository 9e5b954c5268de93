"""What the workload demos share: the size they run at, their opening lines, the copy ceiling they
narrate against, and the results table they print."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Sequence

from ..core import Size, Workload
from ..runtime import ON_GPU, device_facts, simulator_size_problem


def chosen_size(workload: Workload, args: argparse.Namespace) -> Size:
    """--size / --n, else the back-end's default; on the simulator a size that would run for many
    minutes is refused, saying what to do instead."""
    size = workload.chosen_size(args.size, args.n)
    if (args.size or args.n is not None) and (problem := simulator_size_problem(size)) is not None:
        raise ValueError(problem)
    return size


def opening(size: Size, note: str | None = None) -> None:
    """The back-end, why the size is what it is, and what the simulator cannot tell."""
    print(f"backend: {device_facts().describe()}")
    if note:
        print(note)
    if not ON_GPU:
        print(f"On the CUDA simulator: a small size ({size}); timings are not available there, launches and "
              f"bytes are.")


def copy_ceiling(elements: int) -> float | None:
    """On a GPU: the copy ceiling measured now (the yardstick of every GB/s the demo quotes), printed
    with its candidates; None on the simulator."""
    if not ON_GPU:
        return None
    from ..profile.ceiling import measure_copy_ceiling
    c = measure_copy_ceiling(n=min(elements, 1 << 28))
    print(f"copy ceiling: {c.GBs:.0f} GB/s ({c.best}; " + ", ".join(f"{k} {v:.0f}" for k, v in c.candidates.items())
          + ")")
    return c.GBs


@dataclass(frozen=True)
class Column:
    header: str
    key: str             # the record's field
    width: int
    fmt: str = "{:,}"
    missing: str = "-"   # what a field that is None shows ("n/a": not measurable on this back-end)
    left: bool = False

    def cell(self, record: dict[str, Any]) -> str:
        value = record.get(self.key)
        text = self.missing if value is None else self.fmt.format(value)
        return f"{text:<{self.width}}" if self.left else f"{text:>{self.width}}"


def workload_columns(variant_width: int, bytes_width: int) -> list[Column]:
    """Every workload demo's first columns: who, which pattern, how many launches, how many bytes."""
    return [Column("variant", "variant", variant_width, "{}", left=True),
            Column("pattern", "pattern", 12, "{}", left=True),
            Column("launches", "launches", 9, "{}"),
            Column("bytes (model)", "bytes_model", bytes_width),
            Column("bytes (traced)", "bytes_traced", 16)]


def results_table(records: Sequence[dict[str, Any]], columns: Sequence[Column]) -> str:
    head = "".join(f"{c.header:<{c.width}}" if c.left else f"{c.header:>{c.width}}" for c in columns)
    return "\n".join([head, "-" * len(head)] + ["".join(c.cell(r) for c in columns) for r in records])


# the elementwise and softmax demos' table: who, bytes, and what a GPU measured
TIMED_COLUMNS = workload_columns(13, 15) + [Column("time ms", "time_ms", 10, "{:.3f}", "n/a"),
                                            Column("GB/s", "GBs", 8, "{:.0f}", "n/a"),
                                            Column("host us/launch", "host_us_per_launch", 16, "{:.1f}", "n/a")]
