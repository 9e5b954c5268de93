"""Every number the README quotes, computed from the committed results files (figures/data/).

Each topic's numbers.py holds the functions that read its results files: rows(data) for the
README's measured table and BLOCKS for its captions; `blocks()` gathers them with the harness's own
(the measured table, the demos' times), `readme_blocks()` renders them, and `render_readme()` rewrites
the text between the README's markers

    <!-- numbers:begin NAME -->  ...  <!-- numbers:end NAME -->

`benchmarks/render_figures.py` runs it with the figures; tests/test_readme_numbers.py fails
when the README says anything else. A number in the README outside those markers is a bug.
"""

from __future__ import annotations

import functools
import re
import textwrap
from pathlib import Path
from typing import Any, Callable

from . import results

DATA = Path(__file__).resolve().parents[2] / "figures" / "data"


@functools.lru_cache(maxsize=None)
def load(name: str, data: Path = DATA) -> dict[str, Any]:
    return results.load(Path(data) / name)


def records(name: str, data: Path, kind: str | None = None) -> list[dict[str, Any]]:
    return [r for r in load(name, data)["records"] if r.get("kind") == kind]


def gpu(name: str, data: Path = DATA) -> str:
    """The GPU a results file was measured on, as its meta names it, short: "H100 80GB HBM3" -> "H100"."""
    device = load(name, data)["meta"].get("device", "")
    return re.sub(r"^NVIDIA\s+", "", device).split()[0] if device else "an unnamed GPU"


def best_by_width(name: str, group: str, widths: tuple[int, ...], data: Path = DATA,
                  named: Callable[[dict[str, Any]], dict[str, Any]] = lambda doc: doc) -> str:
    """A row-width study's fastest registered line at each of `widths` (its sizes' second axis) in `group`: "LINE
    SPEEDUPx, SHARE" each (against the study's anchor; share of its ceiling), joined by " / "; `named`: the
    topic's renaming of an older run's lines to today's names."""
    from .study import best_registered
    found = [r for r in named(load(name, data))["records"] if r.get("kind") == "study"]
    best = {size[1]: r for size, r in best_registered(found, group).items()}
    return " / ".join(f"{best[c]['line']} {best[c]['vs_anchor']:.2f}x, {best[c]['of_ceiling']:.2f}" for c in widths)


def pow2(n: int) -> str:
    k = int(n).bit_length() - 1
    return f"2^{k}" if n == 1 << k else f"{n:,}"


def kilo(x: float) -> str:
    return f"{x / 1000:.1f}k"


# -- the README's blocks -------------------------------------------------------------------------

def measured_table(data: Path = DATA) -> str:
    """The README's measured table: the rows each topic's numbers.py gives (rows(data)), in the topics' order."""
    from .. import topics
    rows = [row for module in topics.modules("numbers") if hasattr(module, "rows") for row in module.rows(data)]
    return "\n".join(["| what | figure |", "| --- | --- |", *(f"| {a} | {b} |" for a, b in rows)])


def demo_times_caption(data: Path = DATA) -> str:
    """How long the demos take on the GPU, start to exit (benchmarks/demo_times.py), the slowest run of each."""
    doc = load("demo_times_h200.json", data)
    slowest: dict[str, float] = {}
    for r in doc["records"]:
        slowest[r["demo"]] = max(slowest.get(r["demo"], 0.0), r["wall_s"])
    name = max(slowest, key=slowest.get)
    return (f"On the {doc['meta']['device'].split(' (')[0]} ({doc['meta']['date'][:10]}) every demo ran in "
            f"{min(slowest.values()):.1f} to {slowest[name]:.1f} s from the command line, compiles included "
            f"(slowest: `{name}`; figures/demo_times_h200_seconds.png).")


def blocks() -> dict[str, Callable[[Path], str]]:
    """Every numbers block by name: the harness's own and each topic's (numbers.py's BLOCKS)."""
    from .. import topics
    found: dict[str, Callable[[Path], str]] = {"measured-table": measured_table, "demo-times": demo_times_caption}
    for module in topics.modules("numbers"):
        for name, make in getattr(module, "BLOCKS", {}).items():
            if name in found:
                raise ValueError(f"numbers block {name!r} made twice ({module.__name__})")
            found[name] = make
    return found
_BLOCK = re.compile(r"(<!-- numbers:begin (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- numbers:end (?P=name) -->)",
                    re.DOTALL)


def readme_blocks(data: Path = DATA) -> dict[str, str]:
    """Each block's text; captions wrapped to the README's line length (a table cannot be)."""
    out = {}
    for name, make in blocks().items():
        text = make(data)
        out[name] = text if text.startswith("|") else textwrap.fill(text, width=104, break_on_hyphens=False,
                                                                    break_long_words=False)
    return out


def render_readme(text: str, data: Path = DATA) -> str:
    """`text` with every numbers block rewritten from the results files; every block must be there."""
    blocks = readme_blocks(data)
    found = {m.group("name") for m in _BLOCK.finditer(text)}
    unknown, missing = found - set(blocks), set(blocks) - found
    if unknown or missing:
        raise ValueError(f"README numbers blocks: unknown {sorted(unknown)}, missing {sorted(missing)}")
    return _BLOCK.sub(lambda m: m.group(1) + blocks[m.group("name")] + "\n" + m.group(4), text)


def readme_path() -> Path:
    return DATA.parents[1] / "README.md"
