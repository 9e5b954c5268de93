#!/usr/bin/env bash
# Grade the adversarial suite on a GPU: compute-sanitizer memcheck (every case) and racecheck, speed, the
# simulator's traffic trace in its own child, the sm_90 compile gate, the sandbox. One call on the lent GPU:
#
#   OUT=/some/dir ./benchmarks/grade_adversarial.sh        -> $OUT/grades_adversarial_gpu.txt, $OUT/adversarial/*.json
#
# It needs the [lessons] extra (jupytext: the correct submissions are the lessons' own solutions).
#
# Each file of tests/submissions/adversarial/ names its exercise on its first line; the small views of those
# exercises (tests/submissions/mini_exercises.py) are graded, plus a few lesson submissions at the lessons'
# own sizes (memcheck on hidden cases, racecheck, speed). Submissions are graded JOBS at a time (default 4).
# Then the GPU-marked grading tests run. The last lines of the report are the checks that must hold.
set -u
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 KERNELS_LAB_BACKEND=${KERNELS_LAB_BACKEND:-gpu}
OUT=${OUT:-/tmp/kl-out}; mkdir -p "$OUT/adversarial"
py=${PYTHON:-python3}
JOBS=${JOBS:-4}
report="$OUT/grades_adversarial_gpu.txt"
mini=tests/submissions/mini_exercises.py
# the correct submissions are the lessons' solutions (written once, in notebooks/lessons/)
sols=$(mktemp -d)
$py -c "
import sys; from pathlib import Path; from kernels_lab.lessons import solution_source
for name, ex in (('fuse_correct', 'fuse_chain'), ('block_sums_correct', 'block_sums')):
    (Path(sys.argv[1]) / f'{name}.py').write_text(solution_source(ex))" "$sols" ||
  { echo "cannot write the lessons' solutions (is jupytext installed? pip install -e '.[lessons]')" >&2; exit 1; }
escape_target="$OUT/adversarial/escape_results.json"

{ echo "# command: ./benchmarks/grade_adversarial.sh; date: $(date -u +%FT%TZ)"
  echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
  echo "# compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)"
  echo "# versions: $($py -m pip list 2>/dev/null | grep -iE '^(numba|numba-cuda|numpy|cuda-core|cuda-bindings) ' | tr -s ' ' | paste -sd,)"
  $py -m kernels_lab.grading.sandbox
  $py -c 'from kernels_lab.grading import compile_gate; print("# compile gate:", compile_gate.available())'
} > "$report" 2>&1

grade_one() {  # FILE -> its report block on stdout
  f=$1
  name=$(basename "$f" .py)
  named=$(head -1 "$f" | sed -n 's/^# \([a-z_]*\)\..*/\1/p')  # adversarial files name their exercise
  case ${named:-$name} in
    two_launches*) ex=two_launches_mini ;; block_sums*) ex=block_sums_mini ;;
    persistent*) ex=persistent_mini ;; *) ex=fuse_mini ;;
  esac
  extra=()
  [ "$name" = escape_double_fork ] && extra=(--gradescope "$escape_target")
  t0=$(date +%s)
  out=$(KL_TEST_TARGETS="$escape_target" timeout 1200 $py -m kernels_lab.cli grade "$ex" "$f" --exercises "$mini" \
        --timeout 30 --workers 1 --json "$OUT/adversarial/$name.json" "${extra[@]}" 2>&1)
  rc=$?
  printf '### %s (%s) exit=%s %ss\n%s\n\n' "$name" "$ex" "$rc" "$(( $(date +%s) - t0 ))" "$(echo "$out" | grep -v '^grading ')"
}
lesson_one() {  # EXERCISE FILE: at the lesson's own sizes
  t0=$(date +%s)
  out=$(timeout 1200 $py -m kernels_lab.cli grade "$1" "$2" --timeout 30 --workers 1 \
        --json "$OUT/adversarial/lesson_$(basename "$2" .py).json" 2>&1)
  rc=$?
  printf '### lesson %s %s exit=%s %ss\n%s\n\n' "$1" "$(basename "$2")" "$rc" "$(( $(date +%s) - t0 ))" "$(echo "$out" | grep -v '^grading ')"
}
export -f grade_one lesson_one
export py mini OUT escape_target

{ ls tests/submissions/adversarial/*.py
  ls $sols/fuse_correct.py tests/submissions/fuse_no_bounds_guard.py tests/submissions/fuse_wrong_index.py \
     tests/submissions/fuse_global_temporary.py tests/submissions/persistent_no_stride.py \
     tests/submissions/block_sums_no_barrier.py $sols/block_sums_correct.py \
     tests/submissions/two_launches_three_kernels.py tests/submissions/fuse_two_launches.py
} | xargs -P "$JOBS" -I{} bash -c 'grade_one {}' > "$OUT/adversarial/blocks.txt"
printf '%s\n' "fuse_chain $sols/fuse_correct.py" "fuse_chain tests/submissions/fuse_no_bounds_guard.py" \
              "block_sums tests/submissions/block_sums_no_barrier.py" \
  | xargs -P "$JOBS" -L1 bash -c 'lesson_one "$0" "$1"' >> "$OUT/adversarial/blocks.txt"
cat "$OUT/adversarial/blocks.txt" >> "$report"
sleep 2  # a surviving grandchild of escape_double_fork would have rewritten its results.json by now

{ echo "# GPU-marked grading tests"
  timeout 1200 $py -m pytest -m gpu -q -p no:cacheprovider --tb=short tests/test_grading.py tests/test_grading_adversarial.py tests/test_grading_pdl.py tests/test_pdl.py 2>&1 | tail -15
  echo "# checks"
  $py - "$OUT/adversarial" "$escape_target" <<'EOF'
import json, sys
from pathlib import Path
from kernels_lab.grading.grade import MEMCHECK_FOUND, SIMULATOR_FOUND
folder, target = Path(sys.argv[1]), Path(sys.argv[2])
def g(name):
    try:
        return json.loads((folder / f"{name}.json").read_text())["grades"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return None
def test(grade, check):
    return next((t for t in grade["tests"] if t["name"] == check), None) if grade else None
checks = []
def check(label, ok):
    checks.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {label}")
doc = json.loads(target.read_text()) if target.exists() else {}
check("escape: results.json is the grader's after the grade", doc.get("score") is not None and "escaped" not in doc.get("output", ""))
for name in ("host_answer", "host_overwrites_kernel", "host_no_launch", "reference_importlib", "replaced_launch_object", "do_nothing"):
    x = g(name)
    check(f"{name}: no correctness or budget credit", x is not None and all((test(x, c) or {"score": 0})["score"] == 0
          for c in ("correct (public)", "correct (hidden)", "launch budget", "traffic budget")))
for name in ("block_sums_past_end", "block_sums_transposed"):
    x = g(name)
    check(f"{name}: no 'missing barrier' hint (racecheck finds no hazard)", x is not None and "missing barrier" not in x["summary"])
x = g("fuse_no_bounds_guard")
check("fuse_no_bounds_guard: memcheck charges the runs it catches", x is not None
      and MEMCHECK_FOUND in test(x, "correct (public)")["output"])
# memcheck misses an overrun that lands in padding or the next array; the simulator's rerun checks every index
check("fuse_no_bounds_guard: hidden runs charged for the bad access (memcheck or the simulator's rerun)", x is not None
      and test(x, "correct (hidden)")["score"] < 3 and any(e in test(x, "correct (hidden)")["output"]
      for e in (MEMCHECK_FOUND, SIMULATOR_FOUND + ": IndexError")))
x = g("fuse_global_temporary")
check("fuse_global_temporary: traffic budget counted on the GPU (simulator trace)", x is not None
      and test(x, "traffic budget")["max_score"] == 1 and test(x, "traffic budget")["score"] == 0)
x = g("block_sums_no_barrier")
check("block_sums_no_barrier: racecheck finds the race", x is not None and test(x, "no race under perturbed schedules")["score"] == 0)
x = g("fuse_correct")
check("fuse_correct: full marks with speed and sanitizers", x is not None and x["score"] == x["max_score"] > 0)
x = g("device_helper")
check("device_helper: compiles (a plain device function needs no driver)", x is not None and test(x, "compiles for the course's GPUs")["status"] == "passed")
x = g("spin_on_hidden")
check("spin_on_hidden: public credit kept, the hang named", x is not None and test(x, "correct (public)")["status"] == "passed"
      and "did not finish within" in test(x, "correct (hidden)")["output"])
maxima = {(y["exercise"], y["max_score"]) for p in folder.glob("*.json") if p.name != target.name
          for y in json.loads(p.read_text()).get("grades", [])}
by_ex = {}
for ex, m in maxima:
    by_ex.setdefault(ex, set()).add(m)
check(f"one maximum per exercise across outcomes: {by_ex}", all(len(v) == 1 for v in by_ex.values()))
print(f"{sum(checks)} passed, {len(checks) - sum(checks)} failed")
EOF
} >> "$report" 2>&1
tail -20 "$report"
