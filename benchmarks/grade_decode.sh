#!/usr/bin/env bash
# Grade lesson 07's protocol exercise (decode_protocol) on a GPU: the lesson's solution, its mutants
# (tests/mutations.py) and every tests/submissions/decode_*.py, each in the grader's sandbox, then each one's expected verdict against its grade.
#
#   OUT=/some/dir ./benchmarks/grade_decode.sh      -> $OUT/grades_decode_gpu.txt, $OUT/decode/*.json
#   ONLY="decode_solution decode_read_once" OUT=... ./benchmarks/grade_decode.sh   -> those only (~10 s each, two
#                                                    at a time), and only their expected against graded
#
# It needs the [lessons] extra (jupytext: the solution is the lesson's own; numba-cuda[cu13]: the ordering checks
# read the PTX of numba's compiler). About 4-5 minutes on an H200: two grades at a time (~10 s each), then
# decode_spin_forever alone (it never re-reads its count: on a GPU the megakernel hangs on it, so it must be a
# timeout, every check 0, said so, ended by the 45 s limit). The weak-memory check runs on the simulator in a
# child of every grade (the same on every machine). Expected verdicts are the simulator's (tests/test_grading_decode.py);
# where a GPU legitimately shows more, the summary says which checks may also be lost and why.
set -u
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 KERNELS_LAB_BACKEND=${KERNELS_LAB_BACKEND:-gpu}
OUT=${OUT:-/tmp/kl-out}; mkdir -p "$OUT/decode"
py=${PYTHON:-python3}
report="$OUT/grades_decode_gpu.txt"
sol="$OUT/decode/decode_solution.py"
$py -c "import sys; from kernels_lab.lessons import solution_source; open(sys.argv[1], 'w').write(solution_source('decode_protocol'))" \
  "$sol" || { echo "cannot write the lesson's solution (pip install -e '.[lessons]')" >&2; exit 1; }
mkdir -p "$OUT/mutants"; $py tests/mutations.py "$OUT/mutants" || { echo "cannot write the mutants of the solution" >&2; exit 1; }

{ echo "# command: OUT=$OUT ./benchmarks/grade_decode.sh; date: $(date -u +%FT%TZ)"
  echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
  echo "# versions: python $($py -c 'import platform; print(platform.python_version())'), $($py -m pip list 2>/dev/null | grep -iE '^(numba|numba-cuda|numpy|cuda-core|cuda-bindings) ' | tr -s ' ' | paste -sd,)"
  $py -c 'from kernels_lab import capabilities; print("# PTX compile:", capabilities.ptx_libraries())'
  $py -m kernels_lab.grading.confine 2>/dev/null
} > "$report" 2>&1

grade_one() {  # FILE LIMIT_S: one grade in the sandbox, its JSON, its wall time, its text
  local f=$1 limit=$2 name t0 out rc
  name=$(basename "$f" .py); t0=$(date +%s)
  out=$(timeout 300 $py -m kernels_lab.cli grade decode_protocol "$f" --timeout "$limit" --workers 1 \
        --json "$OUT/decode/$name.json" 2>&1); rc=$?
  echo "$(( $(date +%s) - t0 ))" > "$OUT/decode/$name.seconds"
  printf '### %s exit=%s %ss\n%s\n\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" "$(echo "$out" | grep -v '^grading ')" \
    > "$OUT/decode/$name.txt"
}
export -f grade_one; export OUT py
ONLY=${ONLY:-}
chosen() { [ -z "$ONLY" ] || [[ " $ONLY " == *" $(basename "$1" .py) "* ]]; }
for f in "$sol" "$OUT"/mutants/decode_*.py tests/submissions/decode_*.py; do
  [ "$(basename "$f")" != decode_spin_forever.py ] && chosen "$f" && echo "$f"
done | xargs -r -P 2 -I{} bash -c 'grade_one {} 90'
chosen decode_spin_forever.py && grade_one tests/submissions/decode_spin_forever.py 45
cat "$OUT"/decode/*.txt >> "$report"

{ echo "# expected against graded (the simulator's exact verdicts; 'may also lose' where a GPU shows more)"
  $py - "$OUT/decode" "$ONLY" <<'PYEOF'
import json, sys
from pathlib import Path
from kernels_lab.grading.exercises import get_exercise
from kernels_lab.topics.decode import protocol as dp
folder = Path(sys.argv[1])
FULL = dict(get_exercise("decode_protocol").points)
GATED = {dp.BELOW, dp.BOUNDED}
# submission -> the checks it loses on the simulator (tests/test_grading_decode.py)
LOST = {"decode_solution": set(), "decode_fence_atomic": set(), "decode_relaxed_poll_fence": set(),
        "decode_backoff": set(), "decode_no_fence": {dp.RELEASE, dp.WEAK}, "decode_plain_load": {dp.ACQUIRE, dp.WEAK},
        "decode_fence_not_yet_path": {dp.ACQUIRE, dp.WEAK}, "decode_count_short": {dp.BELOW},
        "decode_count_past": {dp.AT_COUNT, *GATED, dp.RUN, dp.WEAK},
        "decode_wrong_counter": {dp.AT_COUNT, *GATED, dp.RUN, dp.WEAK}, "decode_stub": set(FULL),
        "decode_read_once": {dp.AT_COUNT, *GATED}, "decode_signal_adds_two": {dp.SIGNAL_ONE},
        "decode_signal_rejected": {dp.RELEASE}, "decode_wait_rejected": {dp.ACQUIRE},
        "decode_barrier_in_signal": {dp.RUN, dp.WEAK},
        "decode_unbounded": {dp.BOUNDED}, "decode_no_poll": {dp.BELOW, dp.ACQUIRE, dp.WEAK},
        "decode_spin_forever": set(FULL)}  # a GPU: a timeout, no check earns (the simulator: AT_COUNT, GATED, ACQUIRE, WEAK)
ONLY = sys.argv[2].split()
# where a GPU may show more than the simulator (and why): these checks may be lost as well
MAY = {"decode_plain_load": ({dp.AT_COUNT, *GATED, dp.RUN, dp.WEAK}, "the GPU's compiler hoists the plain load: it "
                             "reads once, so the count that comes while it polls is never seen, and the megakernel "
                             "may read x_l early or give up"),
       "decode_count_short": ({dp.RUN, dp.WEAK}, "a GPU may read the last tile's rows before they are written"),
       "decode_signal_adds_two": ({dp.RUN, dp.WEAK}, "a layer looks done when half its tiles are"),
       "decode_no_poll": ({dp.RUN}, "blocks read x_l before it is written"),
       "decode_fence_not_yet_path": ({dp.RUN}, "a stale read of x_l on the GPU"),
       "decode_no_fence": ({dp.RUN}, "a stale read of x_l on the GPU"),
       "decode_barrier_in_signal": (set(FULL), "the barrier may deadlock the megakernel: a timeout"),
       "decode_read_once": ({dp.RUN, dp.WEAK}, "the megakernel's waits give up where a layer is not done at once")}
ok_all, rows = True, []
for name, lost in LOST.items():
    if ONLY and name not in ONLY:
        continue
    try:
        grade = json.loads((folder / f"{name}.json").read_text())["grades"][0]
    except (OSError, ValueError, KeyError, IndexError) as e:
        rows.append(f"FAIL {name}: no grade ({type(e).__name__})")
        ok_all = False
        continue
    got = {t["name"]: t["score"] for t in grade["tests"]}
    lost_got = {c for c, p in FULL.items() if got.get(c, 0) < p - 1e-3}
    may, why = MAY.get(name, (set(), ""))
    timeout = grade["outcome"] == "timeout"
    seconds = int((folder / f"{name}.seconds").read_text())
    ok = lost <= lost_got <= lost | may and seconds < 150 and grade["max_score"] == 10 and \
        (timeout == (name == "decode_spin_forever") or (timeout and name in MAY and MAY[name][0] == set(FULL)))
    ok_all &= ok
    extra = sorted(lost_got - lost)
    rows.append(f"{'PASS' if ok else 'FAIL'} {name}: {grade['score']:g}/{grade['max_score']:g} {grade['outcome']} "
                f"in {seconds} s; expected to lose {sorted(lost) if lost != set(FULL) else 'everything'}, lost "
                f"{sorted(lost_got) if lost_got != set(FULL) else 'everything'}"
                + (f"; also lost on this GPU {extra} ({why})" if extra and ok else ""))
print("\n".join(rows))
print("ALL PASS" if ok_all else "SOME FAILED")
PYEOF
} >> "$report" 2>&1
tail -n 22 "$report"
