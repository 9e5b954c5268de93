#!/usr/bin/env bash
# One call on the lent H200: ./benchmarks/h200.sh STEP... ; results land in $OUT.
# Steps: env tests demo ncu profile ceiling-sizes ladder consumer polls pdl pdl-window decode timeline demos notebooks grade grade-lessons
#        probe render, and a study by its name: elementwise layernorm softmax cross_entropy rnn block_chain, and decode
#        after its GPU tests (kernels-lab bench NAME; `kernels-lab bench --list` names every study)
# (render needs no GPU: after copying $OUT's results into figures/data/ as NAME_<gpu>.json (h200, h100: the GPU its meta names), it redraws
#  every figure in figures/ and rewrites the README's numbers from them)
set -u
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 KERNELS_LAB_BACKEND=gpu
OUT=${OUT:-/tmp/kl-out}; mkdir -p "$OUT"
py=python3
for step in "$@"; do
  echo "=== $step $(date -u +%FT%TZ)"
  case $step in
    env)
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/env.txt"
      $py -m pip list 2>/dev/null | grep -iE "^(numba|numpy|llvmlite|cuda-|matplotlib|nbclient|ipykernel)" | tee -a "$OUT/env.txt"
      $py -m kernels_lab.cli doctor | tee -a "$OUT/env.txt" ;;
    consumer-tests)
      $py -m pytest -m gpu -q -p no:cacheprovider --tb=short tests/test_consumer.py 2>&1 | tail -3 ;;
    tests)
      $py -m pytest -m gpu -q -p no:cacheprovider --tb=short -W ignore::numba.core.errors.NumbaPerformanceWarning tests > "$OUT/gpu-tests.txt" 2>&1; tail -15 "$OUT/gpu-tests.txt" ;;
    demo)
      $py -m kernels_lab.cli demo elementwise --json "$OUT/elementwise.json" --out "$OUT" ;;
    ncu)
      ncu --clock-control none --csv --print-units base \
          --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
          $py -m kernels_lab.instrument.ncu elementwise 134217728 unfused fused_naive fused persistent \
          > "$OUT/ncu_elementwise.csv" 2> "$OUT/ncu_stderr.txt"; echo "ncu rc=$?"; tail -3 "$OUT/ncu_stderr.txt"
      grep -c '"' "$OUT/ncu_elementwise.csv" ;;
    profile)
      $py -m kernels_lab.cli profile elementwise --ncu --json "$OUT/profile_elementwise.json" 2>&1 | grep -v Warn ;;
    elementwise|layernorm|softmax|cross_entropy|rnn|block_chain)  # a topic's study: every number its lesson and the README quote
      $py -m kernels_lab.cli bench $step --json "$OUT/$step.json" 2>&1 | grep -v Warn ;;
    ceiling-sizes)  # the read and copy kernels at 64 MiB, 256 MiB (a study's pass) and 1 GiB (the ceilings'), both clocks
      $py -m kernels_lab.profile.ceiling_sizes "$OUT/ceiling_sizes.json" 2>&1 | grep -v Warn ;;
    ladder)
      $py -m kernels_lab.cli bench launch --json "$OUT/ladder.json" ;;
    consumer)
      $py -m kernels_lab.cli bench consumer --json "$OUT/consumer.json" 2>&1 | grep -v Warn ;;
    polls)
      $py -m kernels_lab.topics.consumer.polls "$OUT/consumer_polls.json" 2>&1 | grep -v Warn ;;
    timeline)
      for w in elementwise quantize_group; do
        $py -m kernels_lab.cli timeline $w --json "$OUT/timeline_$w.json" --out "$OUT" 2>&1 | grep -v Warn; done ;;
    pdl)
      $py -m kernels_lab.cli bench pdl --json "$OUT/pdl.json" 2>&1 | grep -v Warn ;;
    pdl-window)
      $py -m kernels_lab.topics.pdl.window "$OUT/pdl_window.json" 2>&1 | grep -v Warn ;;
    decode)
      # the megakernel's GPU tests (real waits, the bounded wait's error), then its study (every line checked, timed)
      $py -m pytest -m gpu -q -p no:cacheprovider --tb=short tests/test_decode.py 2>&1 | tail -3
      $py -m kernels_lab.cli bench decode --json "$OUT/decode.json" --out "$OUT" 2>&1 | grep -v Warn ;;
    demos)
      for d in consumer pdl; do $py -m kernels_lab.cli demo $d --json "$OUT/demo_$d.json" --out "$OUT" 2>&1 | grep -v Warn; done ;;
    notebooks)
      $py benchmarks/run_notebooks.py "$OUT" notebooks/0*_solution.ipynb 2>&1 | grep -v WARNING ;;
    grade)
      # each exercise with its own submissions; the full reports (speed, sanitizers) go to $OUT
      { echo "# command: ./benchmarks/h200.sh grade; date: $(date -u +%FT%TZ)"
        echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
        echo "# versions: $($py -m pip list 2>/dev/null | grep -iE '^(numba|numpy|llvmlite|cuda-core) ' | tr -s ' ' | paste -sd,)"
      } > "$OUT/grades-gpu.txt"
      # (each exercise's lesson solution first, then the student-style submissions named after it)
      for pair in fuse_chain:01_fusion:fuse_ block_sums:03_persistent:block_sums_ \
                  persistent_chain:03_persistent:persistent_ two_launches:02_launch_overhead:two_launches_; do
        ex=${pair%%:*}; rest=${pair#*:}
        $py -m kernels_lab.cli grade $ex notebooks/${rest%%:*}_solution.ipynb $(m=$(mktemp -d); $py tests/mutations.py "$m" && ls tests/submissions/${rest#*:}*.py "$m"/${rest#*:}*.py 2>/dev/null) \
            --timeout 30 --workers 2 --json "$OUT/grades_$ex.json" 2>/dev/null
      done >> "$OUT/grades-gpu.txt"; grep -E "^[a-z_]+ - " "$OUT/grades-gpu.txt" ;;
    grade-lessons)
      # lessons 04 and 06's graded exercises, with the sandbox as it is on a GPU: the lesson solutions, the
      # wrong answers of tests/submissions, and lesson 06's grouped-kernel answer (right, and without its wait)
      sub=$(mktemp -d); cp tests/submissions/pdl_grouped_kernel.py "$sub/"; mkdir "$sub/m"; $py tests/mutations.py "$sub/m"
      grep -v "grid_dependency_wait()  #" tests/submissions/pdl_grouped_kernel.py > "$sub/pdl_grouped_no_wait.py"
      for pair in "group_switches:notebooks/06_launch_side_solution.ipynb tests/submissions/pdl_*.py $sub/*.py $sub/m/pdl_*.py" \
                  "fused_softmax:notebooks/04_reductions_solution.ipynb tests/submissions/softmax_*.py $sub/m/softmax_*.py"; do
        ex=${pair%%:*}
        { echo "# command: ./benchmarks/h200.sh grade-lessons (kernels-lab grade $ex ... --timeout 60 --json); date: $(date -u +%FT%TZ)"
          echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
          echo "# versions: $($py -m pip list 2>/dev/null | grep -iE '^(numba|numba-cuda|numpy|cuda-core) ' | tr -s ' ' | paste -sd,)"
          $py -m kernels_lab.grading.confine
          # the progress line rewrites itself with carriage returns: split it and drop it
          $py -m kernels_lab.cli grade $ex ${pair#*:} --timeout 60 --workers 2 --json "$OUT/grades_$ex.json" 2>&1 | tr '\r' '\n' | grep -v "^grading "
        } > "$OUT/grades_${ex}_gpu.txt"; grep -E "^[a-z_]+ - |traffic|timeline|FAIL" "$OUT/grades_${ex}_gpu.txt" | head -30
      done ;;
    probe)
      $py benchmarks/sandbox_probe.py 2>&1 | tee "$OUT/sandbox_probe2.txt" ;;
    render)
      KERNELS_LAB_BACKEND=sim $py benchmarks/render_figures.py && KERNELS_LAB_BACKEND=sim $py benchmarks/render_figures.py --check ;;
    *) echo "unknown step $step" ;;
  esac
done
