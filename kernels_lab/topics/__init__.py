"""The topics: one folder each, everything about one problem in one place (README, "Add a topic").

    topics/NAME/workload.py   the workload: reference, variants, plans, exercises; importing it registers it
    topics/NAME/figures.py    FIGURES = {record kind: draw(doc, out, stem) -> [PNG paths]}: what it draws
    topics/NAME/bench.py      its GPU benchmark, `python -m kernels_lab.topics.NAME.bench OUT`

Every package here is a topic: a new one is a new folder, nothing else to edit. Generic code names
no topic; it asks this module (the registry loads every workload.py, render_figures.py every FIGURES).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Callable


def _modules(part: str) -> list[ModuleType]:
    """Every topic's module `part` (workload, figures), imported, in the topics' name order."""
    found = []
    for topic in pkgutil.iter_modules(__path__):
        if topic.ispkg:
            package = importlib.import_module(f"{__name__}.{topic.name}")
            if any(m.name == part for m in pkgutil.iter_modules(package.__path__)):
                found.append(importlib.import_module(f"{package.__name__}.{part}"))
    return found


def load() -> None:
    """Import every topic's workload, which registers it."""
    _modules("workload")


def figures() -> dict[str, Callable]:
    """{results record kind: the function that draws its figures}, from every topic's FIGURES."""
    drawers: dict[str, Callable] = {}
    for module in _modules("figures"):
        for kind, draw in module.FIGURES.items():
            if kind in drawers:
                raise ValueError(f"record kind {kind!r} drawn by two topics ({module.__name__})")
            drawers[kind] = draw
    return drawers
