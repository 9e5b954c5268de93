"""Instructor demos: `kernels-lab demo NAME`. Each measures, draws its figure, and narrates.

Every module of this package that defines DEMO is a demo: a new one is a new file, nothing
else to edit. They are listed in the order of their ORDER (the lessons' order), then by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Demo:
    name: str
    about: str
    run: Callable[..., int]  # (args: argparse.Namespace) -> exit code
    order: int = 99          # where it stands in `demo --list` (the lessons' order)


def demos() -> dict[str, Demo]:
    import importlib
    import pkgutil
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if isinstance(getattr(module, "DEMO", None), Demo):
            found.append(module.DEMO)
    found.sort(key=lambda d: (d.order, d.name))
    return {d.name: d for d in found}


def committed_results(name: str):
    """figures/data/NAME of a source checkout (measured on a GPU), or None when not there."""
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "figures" / "data" / name
    return path if path.exists() else None


def show_committed(name: str, out_dir, stem: str) -> list:
    """On the simulator: draw the committed GPU figures instead, and say so."""
    from ..profile import plots, results
    path = committed_results(name)
    if path is None:
        print(f"(no committed GPU results {name} here: run on a GPU to measure)")
        return []
    doc = results.load(path)
    print(f"Timings come from the committed GPU run {path.name}: {doc['meta']['device']}, {doc['meta']['date'][:10]}.")
    return plots.render(doc, out_dir, stem)
