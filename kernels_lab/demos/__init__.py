"""Instructor demos: `kernels-lab demo NAME`. Each measures, draws its figure, and narrates.

A topic's demo is its demo.py (kernels_lab/topics/NAME/demo.py); a demo of the harness itself (the launch
ladder) is a module of this package. Every such module that defines DEMO is a demo: a new one is a new
file, nothing else to edit. They are listed in the order of their ORDER (the lessons' order), then by name.
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

    from .. import topics
    modules = [importlib.import_module(f"{__name__}.{info.name}") for info in pkgutil.iter_modules(__path__)]
    found = [m.DEMO for m in modules + topics.modules("demo") if isinstance(getattr(m, "DEMO", None), Demo)]
    found.sort(key=lambda d: (d.order, d.name))
    return {d.name: d for d in found}

