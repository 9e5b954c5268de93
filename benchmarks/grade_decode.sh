#!/usr/bin/env bash
# Grade lesson 07's protocol exercise (decode_protocol) on a GPU: the lesson's solution and every
# tests/submissions/decode_*.py, each in the grader's sandbox, then the checks that must hold. One call:
#
#   OUT=/some/dir ./benchmarks/grade_decode.sh      -> $OUT/grades_decode_gpu.txt, $OUT/decode/*.json
#
# It needs the [lessons] extra (jupytext: the solution is the lesson's own) and [cu13] (the ordering checks read
# the PTX of numba's compiler; without it they are not counted and the checks below fail, saying so).
# On the simulator every verdict is exact (tests/test_grading_decode.py); here the probes and the PTX must give
# the same, and the megakernel's run may fail too where a wrong wait lets a GPU read x_l early or hoists its poll
# (reported, not required). decode_spin_forever never re-reads its count: on a GPU the megakernel hangs on it
# before the bounded probe, so it must be a timeout (every check 0, said so) that ends within the time limit.
set -u
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 KERNELS_LAB_BACKEND=${KERNELS_LAB_BACKEND:-gpu}
OUT=${OUT:-/tmp/kl-out}; mkdir -p "$OUT/decode"
py=${PYTHON:-python3}
report="$OUT/grades_decode_gpu.txt"
sol="$OUT/decode/decode_solution.py"
$py -c "import sys; from kernels_lab.lessons import solution_source; open(sys.argv[1], 'w').write(solution_source('decode_protocol'))" \
  "$sol" || { echo "cannot write the lesson's solution (pip install -e '.[lessons]')" >&2; exit 1; }

{ echo "# command: ./benchmarks/grade_decode.sh; date: $(date -u +%FT%TZ)"
  echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
  echo "# versions: $($py -m pip list 2>/dev/null | grep -iE '^(numba|numba-cuda|numpy|cuda-core|cuda-bindings) ' | tr -s ' ' | paste -sd,)"
  $py -c 'from kernels_lab import capabilities; print("# PTX compile:", capabilities.ptx_libraries())'
} > "$report" 2>&1

for f in "$sol" tests/submissions/decode_*.py; do
  name=$(basename "$f" .py)
  t0=$(date +%s)
  out=$(timeout 900 $py -m kernels_lab.cli grade decode_protocol "$f" --timeout 120 --workers 1 \
        --json "$OUT/decode/$name.json" 2>&1)
  rc=$?
  echo "$(( $(date +%s) - t0 ))" > "$OUT/decode/$name.seconds"
  printf '### %s exit=%s %ss\n%s\n\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" "$(echo "$out" | grep -v '^grading ')" >> "$report"
done

{ echo "# checks"
  $py - "$OUT/decode" <<'EOF'
import json, sys
from pathlib import Path
from kernels_lab.topics.decode import protocol as dp
folder = Path(sys.argv[1])
FULL = {dp.SIGNAL_ONE: 1, dp.RELEASE: 1.5, dp.AT_COUNT: 1, dp.BELOW: 1.5, dp.BOUNDED: 1.5, dp.ACQUIRE: 1.5, dp.RUN: 2}
# submission -> the checks it must lose (the megakernel's run may be lost as well where said)
LOST = {"decode_solution": {}, "decode_fence_atomic": {}, "decode_relaxed_poll_fence": {},
        "decode_no_fence": {dp.RELEASE}, "decode_plain_load": {dp.ACQUIRE}, "decode_count_short": {dp.BELOW},
        "decode_count_past": {dp.AT_COUNT, dp.RUN}, "decode_signal_adds_two": {dp.SIGNAL_ONE},
        "decode_unbounded": {dp.BOUNDED}, "decode_no_poll": {dp.BELOW, dp.ACQUIRE},
        "decode_spin_forever": set(FULL)}  # a timeout: no check earns
RUN_MAY_FAIL = {"decode_plain_load", "decode_count_short", "decode_signal_adds_two", "decode_no_poll"}
ok_all = True
for name, lost in LOST.items():
    try:
        grade = json.loads((folder / f"{name}.json").read_text())["grades"][0]
    except (OSError, ValueError, KeyError, IndexError) as e:
        print(f"FAIL {name}: no grade ({type(e).__name__})")
        ok_all = False
        continue
    got = {t["name"]: t["score"] for t in grade["tests"]}
    want = {c: 0 if c in lost else p for c, p in FULL.items()}
    if name in RUN_MAY_FAIL:
        got.pop(dp.RUN, None), want.pop(dp.RUN)
    seconds = int((folder / f"{name}.seconds").read_text())
    ok = all(abs(got.get(c, -1) - v) < 1e-3 for c, v in want.items()) and seconds < 600 and \
        grade["outcome"] == ("timeout" if name == "decode_spin_forever" else "graded")
    ok_all &= ok
    run = next((t for t in grade["tests"] if t["name"] == dp.RUN), {})
    print(f"{'PASS' if ok else 'FAIL'} {name}: {grade['score']:g}/{grade['max_score']:g} {grade['outcome']} in {seconds} s; "
          f"lost {sorted(c for c, v in got.items() if v < FULL[c]) or 'nothing'}"
          + (f"; run: {run.get('score')}/2 ({run.get('output', '')[:160]})" if name in RUN_MAY_FAIL else "")
          + ("" if ok else f"; expected {want}"))
print("ALL PASS" if ok_all else "SOME FAILED")
EOF
} >> "$report" 2>&1
tail -n 15 "$report"
