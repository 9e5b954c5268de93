"""The topics: one folder each, everything about one problem in one place (README, "Add a topic").

    topics/NAME/__init__.py   what the topic is, and ORDER: where it stands (its lesson's number)
    topics/NAME/workload.py   the workload: reference, variants, plans, exercises; importing it registers it
    topics/NAME/figures.py    FIGURES = {record kind: draw(doc, out, stem) -> [PNG paths]}: what it draws
    topics/NAME/study.py      STUDY: what its published numbers come from (profile/study.py), `kernels-lab bench NAME`
    topics/NAME/bench.py      BENCH: a fixed measurement that is not a workload's variants, `kernels-lab bench NAME`
    topics/NAME/numbers.py    what the README quotes: rows(data) for the measured table, BLOCKS by name
    topics/NAME/demo.py       DEMO: `kernels-lab demo NAME` (kernels_lab/demos/ holds what demos share)

Every package here is a topic: a new one is a new folder, nothing else to edit. Generic code names
no topic; it asks this module (the registry loads every workload.py, `plot` and render_figures.py draw
with every FIGURES, the README's numbers come from every numbers.py, `demo` and `bench` list theirs,
profile.study.studies() finds every STUDY).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Callable


def modules(part: str) -> list[ModuleType]:
    """Every topic's module `part` (workload, figures, demo), imported, in the topics' ORDER."""
    packages = [importlib.import_module(f"{__name__}.{t.name}") for t in pkgutil.iter_modules(__path__) if t.ispkg]
    packages.sort(key=lambda p: (p.ORDER, p.__name__))
    return [importlib.import_module(f"{p.__name__}.{part}") for p in packages
            if any(m.name == part for m in pkgutil.iter_modules(p.__path__))]


def order_of(module: str) -> float:
    """The ORDER of the topic a module belongs to (kernels_lab.topics.NAME...); after every topic for others."""
    if not module.startswith(__name__ + "."):
        return float("inf")
    return importlib.import_module(f"{__name__}.{module.split('.')[2]}").ORDER


def load() -> None:
    """Import every topic's workload, which registers it."""
    modules("workload")


def figures() -> dict[str, Callable]:
    """{results record kind: the function that draws its figures}, from every topic's FIGURES."""
    drawers: dict[str, Callable] = {}
    for module in modules("figures"):
        for kind, draw in module.FIGURES.items():
            if kind in drawers:
                raise ValueError(f"record kind {kind!r} drawn by two topics ({module.__name__})")
            drawers[kind] = draw
    return drawers


def benches() -> dict:
    """{name: Bench} for `kernels-lab bench`: every topic's bench.py that declares BENCH, by topic name."""
    return {m.__name__.split(".")[-2]: m.BENCH for m in modules("bench") if hasattr(m, "BENCH")}
