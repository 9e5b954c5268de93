"""How long each instructor demo takes from the command line, start to exit (issue 27: under 15 s on the H200).

    python benchmarks/demo_times.py RESULTS.json [NAME...]     (default: every demo, in `demo --list` order)

Its figure (kernels_lab/profile/plots.py's demo_times, drawn by render_figures.py from the committed results): each demo's two times against the limit.

Each demo runs as a class would see it, `python -m kernels_lab.cli demo NAME --out DIR`, in its own process:
the time includes Python's start, numba's compiles and the validation runs. A demo is run twice and both
times are kept: the first compiles into numba's cache (the `cache=True` kernels), the second is what an
instructor who ran it once before class sees.
"""

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernels_lab.demos import demos  # noqa: E402
from kernels_lab.profile.results import dump, make_meta  # noqa: E402

LIMIT_S = 15.0


def main(out: str, *names: str) -> int:
    records = []
    for name in names or tuple(demos()):
        for attempt in ("first", "second"):
            with tempfile.TemporaryDirectory() as d:
                t0 = time.perf_counter()
                p = subprocess.run([sys.executable, "-m", "kernels_lab.cli", "demo", name, "--out", d],
                                   capture_output=True, text=True, timeout=300)
                wall = time.perf_counter() - t0
            tail = (p.stdout + p.stderr).strip().splitlines()[-3:]
            records.append({"kind": "demo_time", "demo": name, "attempt": attempt, "wall_s": round(wall, 2),
                            "rc": p.returncode, "under_limit": wall < LIMIT_S, "tail": tail})
            print(f"{name:12s} {attempt:6s} {wall:6.1f} s  rc={p.returncode}  {tail[-1] if tail else ''}", flush=True)
    dump(make_meta(limit_s=LIMIT_S), records, out)
    return 0 if all(r["rc"] == 0 for r in records) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
