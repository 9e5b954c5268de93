"""Re-render every committed figure from figures/data/ and rewrite the README's numbers.

    python benchmarks/render_figures.py           # figures/*.png and README.md, in place
    python benchmarks/render_figures.py --check   # change nothing; exit 1 if README.md disagrees

Every PNG in figures/ comes from a results file in figures/data/ (FIGURE = RESULTS_STEM_KIND.png,
as `kernels-lab plot` names them), drawn by kernels_lab/profile/plots.py's render (the harness's figures, and each topic's FIGURES);
every number in the README's measured table and figure captions comes from kernels_lab/profile/numbers.py,
between <!-- numbers:begin NAME --> markers.
`benchmarks/h200.sh render` runs this after a GPU run has copied its results into figures/data/.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("KERNELS_LAB_BACKEND", "sim")  # drawing needs no GPU

from kernels_lab.profile import numbers, plots, results  # noqa: E402

FIGURES = ROOT / "figures"
DATA = FIGURES / "data"


def render_file(path: Path, out: Path) -> list[Path]:
    """Every figure of one results file, named STEM_WHAT.png as `kernels-lab plot` names them."""
    return plots.render(results.load(path), out, path.stem)


def render_figures(out: Path = FIGURES, new: bool = False) -> tuple[list[Path], list[str]]:
    """Re-render every committed figure (and, with new=True, every figure a results file supports)
    into `out`. Returns (written, the names of figures that could be drawn but are not committed)."""
    import shutil
    import tempfile
    written, skipped = [], []
    committed = {p.name for p in FIGURES.glob("*.png")}
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(DATA.glob("*.json")):
            for fig in render_file(path, Path(tmp)):
                if fig.name in committed or new:
                    written.append(Path(shutil.copyfile(fig, Path(out) / fig.name)))
                else:
                    skipped.append(fig.name)
    return written, skipped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when README.md disagrees")
    ap.add_argument("--new", action="store_true", help="also write figures not yet committed in figures/")
    args = ap.parse_args(argv)
    readme = ROOT / "README.md"
    text = readme.read_text()
    rendered = numbers.render_readme(text)
    if args.check:
        if rendered != text:
            sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), rendered.splitlines(True),
                                                       "README.md", "README.md (from figures/data)"))
            return 1
        print("README.md agrees with figures/data")
        return 0
    written, skipped = render_figures(new=args.new)
    for p in written:
        print(f"wrote {p.relative_to(ROOT)}")
    if skipped:
        print(f"not committed, left out (--new writes them): {', '.join(skipped)}")
    stems = [d.stem for d in DATA.glob("*.json")]
    for p in sorted(FIGURES.glob("*.png")):
        if not any(p.name.startswith(stem + "_") for stem in stems):
            print(f"note: figures/{p.name} has no results file in figures/data/", file=sys.stderr)
    if rendered != text:
        readme.write_text(rendered)
        print("wrote README.md (numbers from figures/data)")
    else:
        print("README.md numbers already agree with figures/data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
