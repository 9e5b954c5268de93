"""What the demos share: the size they run at, their opening lines, the copy ceiling they narrate
against, the results table they print, and, on a machine without a GPU, the committed H200 run they
show after their own small run (its numbers and figures, named as such)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..backend import BACKEND
from ..core import Size, Workload, get_workload
from ..errors import UsageError
from . import Demo, DemoRequest


def chosen_size(workload: Workload, request: DemoRequest) -> Size:
    """--size / --n, else the back-end's default; on the simulator a size that would run for many
    minutes is refused, saying what to do instead."""
    size = workload.chosen_size(request.size, request.n)
    if request.sized and (problem := BACKEND.size_problem(size.elements, size)) is not None:
        raise UsageError(problem)
    return size


FIGURES = Path(__file__).resolve().parents[2] / "figures"  # a source checkout's committed figures and results


def heading(text: str) -> None:
    """A part of a demo's output: what ran where, so a number is never taken for another machine's."""
    print(f"\n== {text} ==")


def opening(size: Size | None = None, note: str | None = None) -> None:
    """The back-end, why the size is what it is, and what the simulator cannot tell."""
    print(f"backend: {BACKEND.describe()}")
    if note:
        print(note)
    if not BACKEND.can_time:
        at = f" at a small size ({size})" if size is not None else ""
        heading(f"Run here, on numba's CUDA simulator{at}: correctness, launches and bytes "
                f"(timings are not available there)")


def committed_results(name: str) -> Path | None:
    """figures/data/NAME of a source checkout (measured on a GPU), or None when not there."""
    path = FIGURES / "data" / name
    return path if path.exists() else None


def show_committed(name: str, numbers: Callable[[dict[str, Any]], str], out_dir: Path | None = None,
                   stem: str = "") -> list[Path]:
    """On a machine without a GPU: the committed GPU run's numbers (`numbers(results)`) and figures, under a
    heading that names the results file and the day it was measured. A demo that draws nothing of its own
    here gets the committed figures copied into out_dir (as STEM_WHAT.png); the others name them."""
    path = committed_results(name)
    if path is None:
        print(f"\n(no committed GPU results figures/data/{name} in this installation: they come with a source "
              f"checkout; run this demo on a GPU to measure)")
        return []
    from ..profile import results
    doc = results.load(path)
    meta = doc["meta"]
    heading(f"Measured on {meta['device']} on {meta['date'][:10]}, not here: figures/data/{name} (committed)")
    print(numbers(doc))
    figures = sorted(FIGURES.glob(f"{path.stem}_*.png"))
    if out_dir is None:
        print("its figures: " + ", ".join(f"figures/{png.name}" for png in figures))
        return figures
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    made = [Path(shutil.copyfile(png, Path(out_dir) / f"{stem}_{png.name[len(path.stem) + 1:]}")) for png in figures]
    for png, copy in zip(figures, made):
        print(f"wrote {copy} (the committed figure figures/{png.name})")
    return made


def write_measured(request: DemoRequest, records: list[dict[str, Any]],
                   figures: Mapping[str, Callable[[list[dict[str, Any]], dict[str, Any], Path], Path]]) -> None:
    """A fixed-configuration demo's GPU run, written: its results file, then its figures (suffix -> draw(records,
    meta, path)): the first at the request's figure, each other beside it as STEM_SUFFIX.png; all named."""
    from ..profile import results
    meta = results.make_meta(request.command_line, None)
    results.dump(meta, records, request.json)
    _, *others = figures
    paths = [request.figure] + [request.figure.with_name(f"{request.figure.stem}_{suffix}.png") for suffix in others]
    made = [draw(records, meta, path) for draw, path in zip(figures.values(), paths)]
    print(f"wrote {request.json}, " + ", ".join(map(str, made)))


CHECK_ELEMENTS = 1 << 20  # a size every variant checks against float64 in about a second on a GPU


def check_size(workload: Workload, size: Size) -> Size:
    """`size` with its first axis cut (to an odd count) until it holds about CHECK_ELEMENTS elements;
    the other axes, which choose the kernels' layouts, stay as they are."""
    first = next(iter(size))
    rest = size.elements // size[first]
    cut = max(1, CHECK_ELEMENTS // max(rest, 1)) | 1
    return size if cut >= size[first] else workload.size(**{**dict(size), first: cut})


def checked_then_timed(workload: Workload, size: Size, reps: int) -> list[dict[str, Any]]:
    """The demo's records. On a GPU every variant is first checked against float64 at check_size (the float64
    reference of 2^28 elements and the checks at full size take most of a minute; the timing a second),
    then timed at `size`. On the simulator: one run at `size`, checked and traced."""
    from ..profile.measure import measure_workload
    small = check_size(workload, size) if BACKEND.can_time else size
    if small == size:
        return measure_workload(workload, size, reps=reps)
    measure_workload(workload, small, reps=1)
    print(f"every variant checked against float64 at {small} (fresh random inputs, poisoned outputs); "
          f"timed below at {size}")
    return measure_workload(workload, size, reps=reps, verify=False)


def copy_ceiling(elements: int) -> float | None:
    """On a GPU: the copy ceiling measured now (the yardstick of every GB/s the demo quotes), printed
    with its candidates; None on the simulator."""
    if not BACKEND.can_time:
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
def useful_rates(records: Sequence[dict[str, Any]], useful_bytes: int, ceiling: float | None) -> list[str]:
    """Each timed record's GB/s of useful traffic (useful_bytes of it: what every variant and anchor is counted on)
    and its share of the copy ceiling; untimed (the simulator), the sentence that says what was checked instead."""
    if not all(r.get("time_ms") for r in records):
        return ["The simulator cannot time kernels; the bytes above were traced element by element and match the plan."]
    lines = []
    for r in records:
        useful = useful_bytes / (r["time_ms"] * 1e-3) / 1e9
        share = f" = {useful / ceiling:.0%} of the {ceiling:.0f} GB/s copy ceiling" if ceiling else ""
        lines.append(f"  {r['variant']:<13} {useful:6.0f} GB/s of useful traffic (one read + one write){share}")
    return lines


def default_rows(rows: int) -> Callable[[Workload, DemoRequest], tuple[Size, None]]:
    """A row-wise workload demo's choose_size: --size / --n as given, else `rows` rows of the default width."""
    def choose_size(workload: Workload, request: DemoRequest) -> tuple[Size, None]:
        size = chosen_size(workload, request)
        return (size if request.sized else size.replace(rows=rows)), None
    return choose_size


def shapes_table(records: Sequence[dict[str, Any]], names: Sequence[str], cell: Callable[[dict[str, Any]], str],
                 width: int) -> list[str]:
    """A header, then a line per (rows, cols) shape of the records with a column per variant in `names`: cell(its
    record), or - where the variant did not run that shape."""
    lines = [f"  {'rows x cols':<14}" + "".join(f"{n:>{width}}" for n in names)]
    for rows, cols in dict.fromkeys((r["size"]["rows"], r["size"]["cols"]) for r in records):
        at = {r["variant"]: r for r in records if (r["size"]["rows"], r["size"]["cols"]) == (rows, cols)}
        lines.append(f"  {f'{rows} x {cols}':<14}" + "".join(f"{cell(at[n]) if n in at else '-':>{width}}" for n in names))
    return lines


TIMED_COLUMNS = workload_columns(13, 15) + [Column("time ms", "time_ms", 10, "{:.3f}", "n/a"),
                                            Column("GB/s", "GBs", 8, "{:.0f}", "n/a"),
                                            Column("host us/launch", "host_us_per_launch", 16, "{:.1f}", "n/a")]


# -- a workload's demo: one runner, the topic supplies the narration ---------------------------------

@dataclass(frozen=True)
class DemoRun:
    """What a workload demo's narration is told besides its records."""
    size: Size | None                 # None: the committed GPU run, narrated where there is no GPU
    refused: dict[str, str]           # variant -> why it does not run at `size`
    ceiling: float | None             # GB/s, the copy ceiling measured in this run (None: not measured)


def workload_demo(name: str, about: str, order: int, *, narrate: Callable[[list[dict[str, Any]], DemoRun], str],
                  columns: Sequence[Column], committed: str, committed_numbers: Callable[[dict[str, Any]], str],
                  choose_size: Callable[[Workload, DemoRequest], tuple[Size, str | None]] | None = None,
                  derive: Callable[[dict[str, Any]], dict[str, Any]] | None = None, check_first: bool = True,
                  with_ceiling: bool = False, quiet: Sequence[str] = ()) -> Demo:
    """`kernels-lab demo NAME` for the registered workload NAME: the size (choose_size, else --size / --n or the
    back-end's default), the copy ceiling (with_ceiling), every variant checked then timed (check_first: checked
    at a smaller size first on a GPU; else measured at `size` directly), each record extended by derive, the table
    of `columns`, the topic's narration, the results file and the figure; and where there is no GPU, the committed
    GPU run (committed_numbers(its results)). `quiet`: warnings the narration already explains."""
    def run(request: DemoRequest) -> int:
        import warnings

        from ..profile import plots, results
        from ..profile.measure import measure_workload
        workload = get_workload(name)
        size, note = choose_size(workload, request) if choose_size else (chosen_size(workload, request), None)
        opening(size, note)
        ceiling = copy_ceiling(size.elements) if with_ceiling else None
        refused = {v.name: why for v in workload.variants.values() if (why := v.why_not(size)) is not None}
        with warnings.catch_warnings():
            for message in quiet:
                warnings.filterwarnings("ignore", message)
            records = (checked_then_timed(workload, size, request.reps) if check_first
                       else measure_workload(workload, size, reps=request.reps))
        records = [{**r, **derive(r)} for r in records] if derive else records
        print(results_table(records, columns))
        print()
        print(narrate(records, DemoRun(size, refused, ceiling)))
        meta = results.make_meta(request.command_line, ceiling_GBs=ceiling)
        json_path = results.dump(meta, records, request.json)
        print(f"\nwrote {json_path} and {plots.variant_bars(records, meta, request.figure)}")
        if not BACKEND.can_time:
            show_committed(committed, committed_numbers)
        return 0
    return Demo(name, about, run, order)
