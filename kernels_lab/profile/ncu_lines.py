"""The ncu child for a study's lines: registered variants and numbered versions (layernorm's v2), which the
instrument layer below the harness cannot see.

    python -m kernels_lab.profile.ncu_lines WORKLOAD N LINE...
"""

from __future__ import annotations

import sys

from ..core import get_workload
from ..instrument.ncu import run_marked
from .study import studies

CHILD = "kernels_lab.profile.ncu_lines"


def main(argv: list[str]) -> int:
    workload = get_workload(argv[0])
    study = studies().get(workload.name)
    lines = {line.name: line.variant for line in study.lines()} if study is not None else {}
    lines = {**{n: workload.variant(n) for n in workload.variants}, **lines}
    unknown = [n for n in argv[2:] if n not in lines]
    if unknown:
        raise SystemExit(f"{workload.name} has no variant or study line {unknown}; lines: {sorted(lines)}")
    run_marked(workload, workload.parse_size(argv[1]), [lines[n] for n in argv[2:]])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
