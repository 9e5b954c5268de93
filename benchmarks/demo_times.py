"""How long each instructor demo takes from the command line, start to exit (issue 27: under 15 s on the H200).

    python benchmarks/demo_times.py RESULTS.json [NAME...]     (default: every demo, in `demo --list` order)

Its figure (render_figures.py draws it from the committed results): each demo's two times against the limit.

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


def figure(doc: dict, path: Path) -> Path:
    """Seconds per demo, first and second run, with the limit a live class can wait."""
    from kernels_lab.profile.plots import _save, _source_note, _style, plt
    recs = doc["records"]
    names = list(dict.fromkeys(r["demo"] for r in recs))
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.4))
    for k, (attempt, color) in enumerate((("first", "#9ecae1"), ("second", "#1f77b4"))):
        times = {r["demo"]: r["wall_s"] for r in recs if r["attempt"] == attempt}
        ys = [i + (k - 0.5) * 0.38 for i in range(len(names))]
        ax.barh(ys, [times.get(n, 0) for n in names], height=0.36, color=color,
                label=f"{attempt} run" + (" (compiles into numba's cache)" if attempt == "first" else ""))
    limit = doc["meta"].get("limit_s", LIMIT_S)
    ax.axvline(limit, color="#d62728", ls="--", lw=1, label=f"the limit: {limit:.0f} s")
    ax.set_yticks(range(len(names)), [f"demo {n}" for n in names])
    ax.invert_yaxis()
    ax.set_xlabel("seconds, `kernels-lab demo NAME` start to exit")
    _style(ax, "How long each demo takes from the command line")
    ax.legend(fontsize=7, loc="lower right")
    _source_note(fig, doc["meta"])
    return _save(fig, path)


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
