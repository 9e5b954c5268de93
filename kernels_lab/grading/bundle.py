"""A Gradescope autograder for one exercise: `kernels-lab grade bundle EXERCISE --out DIR` writes
DIR/EXERCISE_autograder.zip.

The zip holds, at its root (Gradescope's layout):
  setup.sh            run once when Gradescope builds the image: installs THIS copy of kernels-lab
                      (the source is in the zip, so the version graded is exactly the instructor's),
                      with the [cu13] extra for the compile gate and the PTX ordering checks
                      (decode_protocol) when pip can get it; else without, warning loudly: the gate
                      cannot run, yet counts as everywhere, its point given to a kernel that works, and
                      memory ordering is judged by the simulator's weak-memory runs only (one maximum on
                      every machine, grading.judge)
  run_autograder      run per submission: grades the file in /autograder/submission on numba's CUDA
                      simulator (Gradescope has no GPU) and writes /autograder/results/results.json
  kernels-lab-src/    the package source (pyproject.toml, kernels_lab/)
  exercises.py        the instructor's exercise file, when one was given (--exercises)

For a test, the root /autograder can be moved with KERNELS_LAB_AUTOGRADER_ROOT, and the Python
used with KERNELS_LAB_PYTHON (default python3).
"""

from __future__ import annotations

import json
import shlex
import zipfile
from pathlib import Path
from typing import Sequence

from ..errors import UsageError
from .submission import MARKER

ROOT_ENV = "KERNELS_LAB_AUTOGRADER_ROOT"
PYTHON_ENV = "KERNELS_LAB_PYTHON"
PACKAGE = Path(__file__).resolve().parents[1]          # kernels_lab/
PROJECT = PACKAGE.parent                              # the folder with pyproject.toml

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, from /autograder/source, when it builds the autograder image.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v python3 >/dev/null || ! python3 -m pip --version >/dev/null 2>&1; then
    apt-get update -q && apt-get install -y -q python3 python3-pip python3-venv
fi
PIP="python3 -m pip install --no-cache-dir"
$PIP --break-system-packages --help >/dev/null 2>&1 && PIP="$PIP --break-system-packages"
# this exact copy of kernels-lab ({version}); the [cu13] extra brings NVVM/NVRTC for the compile gate and the
# memory-ordering checks that read the PTX (decode_protocol)
if ! $PIP "./kernels-lab-src[cu13]"; then
    $PIP "./kernels-lab-src"
    echo "########################################################################################" >&2
    echo "WARNING: numba-cuda[cu13] (NVVM) could not be installed: the compile gate is given, and" >&2
    echo "memory ordering is judged by the simulator's weak-memory runs only, not from the PTX." >&2
    echo "########################################################################################" >&2
fi
python3 -c "import kernels_lab; print('kernels-lab', kernels_lab.__version__, 'installed')"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission. It must leave results/results.json behind.
set -u
ROOT="${{{root_env}:-/autograder}}"
PY="${{{python_env}:-python3}}"
export KERNELS_LAB_BACKEND=sim          # Gradescope has no GPU: numba's CUDA simulator
mkdir -p "$ROOT/results"
cd "$ROOT/source" 2>/dev/null || cd "$ROOT"
"$PY" -m kernels_lab.cli grade {exercise} "$ROOT/submission" --pick-one \\
    --gradescope "$ROOT/results/results.json" --timeout {timeout:g} --memory-gb {memory:g}{extra}
status=$?
if [ ! -s "$ROOT/results/results.json" ]; then   # the grader itself failed before writing anything
    printf '{{"score": 0, "output": "the autograder failed (exit %s); tell your instructor", "tests": []}}\\n' \\
        "$status" > "$ROOT/results/results.json"
fi
exit 0
"""


def _source_files() -> list[tuple[Path, str]]:
    files = [(PROJECT / "pyproject.toml", "kernels-lab-src/pyproject.toml")]
    if (PROJECT / "README.md").exists():
        files.append((PROJECT / "README.md", "kernels-lab-src/README.md"))
    for p in sorted(PACKAGE.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".typed", ".json", ".md", ".txt"):
            files.append((p, f"kernels-lab-src/kernels_lab/{p.relative_to(PACKAGE).as_posix()}"))
    return files


def write_bundle(exercise: str, out: Path, exercise_files: Sequence[Path] = (), timeout_s: float = 20.0,
                 memory_gb: float = 4.0) -> Path:
    """Write the autograder zip for `exercise` (checked to exist first)."""
    from .. import __version__
    from .exercises import get_exercise
    get_exercise(exercise, exercise_files)
    if len(exercise_files) > 1:
        raise UsageError("grade bundle takes at most one --exercises file")
    extra = ' --exercises "$ROOT/source/exercises.py"' if exercise_files else ""
    run = RUN_AUTOGRADER.format(root_env=ROOT_ENV, python_env=PYTHON_ENV, exercise=shlex.quote(exercise),
                                timeout=timeout_s, memory=memory_gb, extra=extra)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        def add(name: str, text: str, mode: int = 0o644) -> None:
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)
        add("setup.sh", SETUP_SH.format(version=__version__), 0o755)
        add("run_autograder", run, 0o755)
        for path, name in _source_files():
            add(name, path.read_text())
        if exercise_files:
            add("exercises.py", Path(exercise_files[0]).read_text())
        add("kernels-lab-bundle.json", json.dumps({"exercise": exercise, "kernels_lab": __version__,
                                                   "backend": "sim", "timeout_s": timeout_s}, indent=1))
    return out


def pick_one(folder: Path, exercise: str, entry: str) -> Path:
    """The one file of a Gradescope submission folder to grade: <exercise>.py / .ipynb, else the only
    .py or .ipynb, else the notebook with the exercise's marker cells, else the .py defining the entry."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in (".py", ".ipynb")
                   and not any(part.startswith(".") or part == "__MACOSX" for part in p.relative_to(folder).parts))
    if not files:
        raise FileNotFoundError(f"{folder}: no .py or .ipynb file was submitted")
    for f in files:
        if f.stem == exercise:
            return f
    if len(files) == 1:
        return files[0]
    marked = [f for f in files if f.suffix == ".ipynb" and f"{MARKER} {exercise}" in f.read_text(errors="replace")]
    if len(marked) == 1:
        return marked[0]
    defining = [f for f in files if f.suffix == ".py" and f"def {entry}(" in f.read_text(errors="replace")]
    if len(defining) == 1:
        return defining[0]
    names = ", ".join(str(f.relative_to(folder)) for f in files)
    raise FileNotFoundError(f"{folder}: several files ({names}) and none is clearly the {exercise} exercise: "
                            f"submit one file named {exercise}.py")
