"""Instructor demos: `kernels-lab demo NAME`. Each measures, draws its figure, and narrates.

A topic's demo is its demo.py (kernels_lab/topics/NAME/demo.py); a demo of the harness itself (the launch
ladder) is a module of this package. Every such module that defines DEMO is a demo: a new one is a new
file, nothing else to edit. They are listed in the order of their ORDER (the lessons' order), then by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class DemoRequest:
    """What `kernels-lab demo NAME` asks of a demo, its options checked: the size (as given: the demo reads it
    against its workload's axes), the repetitions, and where everything it writes goes."""

    size: str | None      # --size, by axis (rows=4096,cols=1024), or None
    n: int | None         # --n, a one-axis workload's size, or None
    reps: int             # timed repetitions per variant (GPU only)
    out: Path             # the folder for everything it writes
    json: Path            # its results file
    figure: Path          # its main figure (others beside it, named NAME_*.png)
    command_line: str     # for the results' meta

    @property
    def sized(self) -> bool:
        """Whether the user chose the size (--size or --n)."""
        return bool(self.size) or self.n is not None


@dataclass(frozen=True)
class Demo:
    name: str
    about: str
    run: Callable[[DemoRequest], int]  # -> exit code
    order: int = 99                    # where it stands in `demo --list` (the lessons' order)
    takes_size: bool = True            # False: fixed configurations; the CLI refuses --n / --size / --reps
    writes_results_here: bool = True   # False: on the simulator it draws the committed GPU results, and writes no
                                       # results file (the CLI refuses --json there)


def demos() -> dict[str, Demo]:
    import importlib
    import pkgutil

    from .. import topics
    modules = [importlib.import_module(f"{__name__}.{info.name}") for info in pkgutil.iter_modules(__path__)]
    found = [m.DEMO for m in modules + topics.modules("demo") if isinstance(getattr(m, "DEMO", None), Demo)]
    found.sort(key=lambda d: (d.order, d.name))
    return {d.name: d for d in found}

