"""Draw the decode benchmark's figures from its results file.

    PYTHONPATH=$PWD python3 benchmarks/decode_plots.py figures/data/decode_h200.json figures --stem decode_h200

us per pass of every variant and anchor against the weight bytes of one pass, with the floor they set
at the copy ceiling of the same run (one panel per batch); and at batch 1, 8 layers, steady state beside
one pass with its launch. The drawing lives in kernels_lab/demos/decode.py, which the benchmark shares.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("KERNELS_LAB_BACKEND", "sim")  # drawing needs no GPU

from kernels_lab.demos.decode import figures, table  # noqa: E402
from kernels_lab.profile.results import load  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="decode_bench.json (results v1)")
    ap.add_argument("out", type=Path, nargs="?", help="folder for the PNGs (default: beside the results)")
    ap.add_argument("--stem", default="decode", help="file name prefix (default decode)")
    args = ap.parse_args(argv)
    doc = load(args.results)
    for made in figures(doc, args.out or args.results.parent, args.stem):
        print(f"wrote {made}")
    print(table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
