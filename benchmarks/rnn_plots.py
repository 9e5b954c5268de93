"""Draw the RNN benchmark's figures from its results file.

    PYTHONPATH=$PWD python3 benchmarks/rnn_plots.py OUT_DIR/rnn_bench.json [FIGURE_DIR] [--stem rnn_h200]

us per step per variant and anchor against batch, one panel per hidden size (the persistent kernel
wins at small batch and loses at large batch: both show), and the bytes each variant moves (W read
at every step vs once). The drawing lives in kernels_lab/demos/rnn.py, which the demo shares.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("KERNELS_LAB_BACKEND", "sim")  # drawing needs no GPU

from kernels_lab.demos.rnn import figures  # noqa: E402
from kernels_lab.profile.results import load  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="rnn_bench.json (results v1)")
    ap.add_argument("out", type=Path, nargs="?", help="folder for the PNGs (default: beside the results)")
    ap.add_argument("--stem", default="rnn", help="file name prefix (default rnn)")
    args = ap.parse_args(argv)
    for made in figures(load(args.results), args.out or args.results.parent, args.stem):
        print(f"wrote {made}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
