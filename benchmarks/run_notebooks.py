"""Execute lesson notebooks with nbclient and save them executed.

    python benchmarks/run_notebooks.py OUTDIR [NB...]     (default: every notebooks/*_solution.ipynb)

Run it on a GPU (benchmarks/h200.sh notebooks), then copy the executed solution notebooks over the
committed ones: notebooks/build.py keeps their outputs while the lessons' sources are unchanged. A
notebook that is stale against its source (notebooks/lessons/) is refused: rebuild it first.
Outputs that carry a warning on stderr are reported (the lessons keep their outputs free of noise).
"""

import importlib.util
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _build():
    spec = importlib.util.spec_from_file_location("build", NOTEBOOKS / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    return build


def main(out_dir: str, *paths: str) -> int:
    build = _build()
    if importlib.util.find_spec("jupytext") is not None:  # it reads the lessons' sources
        sources = build.sources()
    else:
        print("jupytext is not installed: the notebooks are run without checking them against their sources")
        sources = {}
    paths = paths or tuple(str(p) for p in sorted(NOTEBOOKS.glob("*_solution.ipynb")))
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    failed = 0
    for path in paths:
        lesson = Path(path).name.removesuffix(".ipynb").removesuffix("_solution")
        if lesson in sources and (stale := build.stale(lesson)):
            print(f"{Path(path).name}: REFUSED: stale against notebooks/lessons/{lesson}.py "
                  f"({', '.join(p.name for p in stale)}): run python notebooks/build.py", flush=True)
            failed += 1
            continue
        nb = nbformat.read(path, as_version=4)
        t0 = time.time()
        try:
            NotebookClient(nb, timeout=300, kernel_name="python3",
                           resources={"metadata": {"path": str(Path(path).parent)}}).execute()
            status = "ok"
        except Exception as e:  # noqa: BLE001  (report and keep going: the next notebook still runs)
            status, failed = f"FAILED: {type(e).__name__}: {str(e)[-600:]}", failed + 1
        nbformat.write(nb, Path(out_dir) / Path(path).name)
        noisy = [c.source.splitlines()[0] for c in nb.cells if c.cell_type == "code"
                 for o in c.get("outputs", []) if o.get("name") == "stderr" and "Warning" in o.get("text", "")]
        warned = f"; warnings in the outputs of: {'; '.join(noisy[:3])}" if noisy else ""
        print(f"{Path(path).name}: {status} ({time.time() - t0:.1f} s){warned}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
