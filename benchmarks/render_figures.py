"""Re-render every committed figure from figures/data/ and rewrite the README's numbers.

    python benchmarks/render_figures.py           # figures/*.png and README.md, in place
    python benchmarks/render_figures.py --check   # change nothing; exit 1 if README.md disagrees

Every PNG in figures/ comes from a results file in figures/data/ (FIGURE = RESULTS_STEM_KIND.png,
as `kernels-lab plot` names them), drawn by the harness's plots, a topic's FIGURES or OTHER_RENDERERS;
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

from kernels_lab import topics  # noqa: E402
from kernels_lab.profile import numbers, plots, results  # noqa: E402

FIGURES = ROOT / "figures"
DATA = FIGURES / "data"


def _softmax(doc, out: Path, stem: str) -> list[Path]:
    """benchmarks/softmax_bench.py's records (kinds softmax_shape, softmax_sweep): softmax_plots.py draws them."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import softmax_plots
    meta, records = doc["meta"], doc["records"]
    made = []
    if any(r.get("kind") == "softmax_shape" for r in records):
        made.append(softmax_plots.versions(records, meta, out / f"{stem}_versions.png"))
    if any(r.get("kind") == "softmax_shape" and r.get("vs_torch") for r in records):
        made.append(softmax_plots.vs_torch(records, meta, out / f"{stem}_vs_torch.png"))
    if any(r.get("kind") == "softmax_sweep" for r in records):
        made.append(softmax_plots.by_cols(records, meta, out / f"{stem}_cols.png"))
    return made


def _rnn(doc, out: Path, stem: str) -> list[Path]:
    """benchmarks/rnn_bench.py's records (kinds rnn_*): the RNN demo's figures draw them."""
    from kernels_lab.demos.rnn import figures
    return list(figures(doc, out, stem))


def _decode(doc, out: Path, stem: str) -> list[Path]:
    """benchmarks/decode_bench.py's records (kind decode): kernels_lab/demos/decode.py draws them."""
    from kernels_lab.demos.decode import figures
    return list(figures(doc, out, stem))


def _demo_times(doc, out: Path, stem: str) -> list[Path]:
    """benchmarks/demo_times.py's records (kind demo_time): it draws them."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import demo_times
    return [demo_times.figure(doc, out / f"{stem}_seconds.png")]


# Results whose records the harness's plots.render does not draw, by record kind: who draws them
# (besides the topics, which declare theirs: kernels_lab.topics.figures()).
OTHER_RENDERERS = ((lambda kind: kind.startswith("softmax_"), _softmax), (lambda kind: kind.startswith("rnn"), _rnn),
                   (lambda kind: kind == "decode", _decode), (lambda kind: kind == "demo_time", _demo_times))


def render_file(path: Path, out: Path) -> list[Path]:
    """Every figure of one results file, named STEM_WHAT.png as `kernels-lab plot` names them."""
    doc = results.load(path)
    made = plots.render(doc, out, path.stem)
    kinds = {r.get("kind") or "" for r in doc["records"]}
    for wants, draw in OTHER_RENDERERS:
        if any(wants(k) for k in kinds):
            made += draw(doc, Path(out), path.stem)
    for kind, draw in topics.figures().items():
        if kind in kinds:
            made += draw(doc, Path(out), path.stem)
    return made


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
