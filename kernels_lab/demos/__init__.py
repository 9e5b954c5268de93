"""Instructor demos: `kernels-lab demo NAME`. Each measures, draws its figure, and narrates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Demo:
    name: str
    about: str
    run: Callable[..., int]  # (args: argparse.Namespace) -> exit code


def demos() -> dict[str, Demo]:
    from . import elementwise
    found = [elementwise.DEMO]
    return {d.name: d for d in found}
