"""A hostile class: each submission in tests/submissions/adversarial/ gets exactly the verdict it
deserves, and no hint that is not true. (The GPU run of the same files, under compute-sanitizer, is
benchmarks/grade_adversarial.sh.)"""

import json
import time
from pathlib import Path

import numpy as np
import pytest

from kernels_lab import cli
from kernels_lab.grading import compile_gate, report
from kernels_lab.grading import judge as J
from kernels_lab.grading.cases import build_cases, run_key
from kernels_lab.grading.confine import SANDBOX_ENV, protections
from kernels_lab.grading.exercises import get_exercise, load_exercise_file
from kernels_lab.grading.grade import counted_checks, failed_grade, grade, max_score
from mutations import MUTANTS
from sources import submission, write_submission

SUBMISSIONS = Path(__file__).parent / "submissions"
ADVERSARIAL = SUBMISSIONS / "adversarial"
MINI_FILE = SUBMISSIONS / "mini_exercises.py"
MINI = {ex.name: ex for ex in load_exercise_file(MINI_FILE)}
FALSE_HINTS = ("missing barrier", "symmetric inputs", "grid too small", "missing bounds guard")


def _grade(exercise, name, folder=ADVERSARIAL, **kw):
    kw.setdefault("compile_gate", False)
    kw.setdefault("timeout_s", 30)
    ex = MINI.get(exercise) or get_exercise(exercise)
    source = submission(name) if name in MUTANTS else (folder / f"{name}.py").read_text()
    return grade(ex, source, name, **kw)


def _as_gpu_machine(monkeypatch, module):
    """`module` (the grade or the sanitizer) sees a GPU back-end; the rest of the grader, and its children, stay
    on the simulator."""
    from kernels_lab.backend import GpuBackend
    monkeypatch.setattr(module, "BACKEND", GpuBackend())


def _test(g, name):
    return next(t for t in g.tests if t.name == name)


def _protected(name):
    return dict((n, on) for n, on, _ in protections())[name]


def _no_hint(g, *allowed):
    for h in FALSE_HINTS:
        if h not in allowed:
            assert h not in g.summary, g.summary


# -- escape -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["sandbox", "subreaper only"])
def test_a_double_forked_grandchild_dies_before_the_results_are_written(tmp_path, monkeypatch, mode):
    results = tmp_path / "results.json"
    monkeypatch.setenv("KL_TEST_TARGETS", str(results))
    if mode == "subreaper only":  # no namespaces, no Landlock: the warden alone must kill the grandchild
        monkeypatch.setenv(SANDBOX_ENV, "off")
    code = cli.main(["grade", "fuse_mini", str(ADVERSARIAL / "escape_double_fork.py"), "--exercises", str(MINI_FILE),
                     "--gradescope", str(results), "--timeout", "30"])
    assert code == 0
    time.sleep(1.0)  # the grandchild would write every 0.1 s for 10 s if it were alive
    doc = json.loads(results.read_text())
    assert doc["score"] == sum(test["max_score"] for test in doc["tests"]) > 0 and "escaped" not in doc["output"]


def test_a_submission_cannot_plant_files_in_the_grader_or_numba(tmp_path, monkeypatch):
    if not _protected("filesystem writes"):
        pytest.skip("Landlock is not in force on this machine")
    import kernels_lab
    import numba
    monkeypatch.chdir(tmp_path)  # it also writes a relative file: into its own scratch folder, not here
    g = _grade("fuse_mini", "escape_package_write")
    assert list(tmp_path.iterdir()) == []
    planted = [Path(kernels_lab.__file__).parent, Path(kernels_lab.__file__).parent / "grading",
               Path(numba.__file__).parent]
    assert not any((p / "planted_by_submission.py").exists() for p in planted)
    assert "planted: []" in g.stdout and g.score == g.max_score  # denied, not punished


def test_a_forged_report_is_rejected_and_never_unpickled():
    marker = Path("/tmp/kernels_lab_forged_pickle_ran")
    marker.unlink(missing_ok=True)
    g = _grade("fuse_mini", "forge_report")
    assert g.outcome == "forged" and g.score == 0 and not marker.exists()


# -- work not done by a kernel ---------------------------------------------------------------------

@pytest.mark.parametrize("exercise,name,why", [
    ("two_launches_mini", "host_answer", "element(s) of out were written on the host, not by a kernel"),
    ("two_launches_mini", "host_overwrites_kernel", "element(s) of out were written on the host, not by a kernel"),
    ("two_launches_mini", "host_no_launch", "run_two launched no kernel of its own"),
    ("fuse_mini", "reference_importlib", "is a kernel defined in"),
    ("fuse_mini", "replaced_launch_object", "fused_chain is a _HostKernel object, not a @cuda.jit kernel"),
])
def test_work_not_done_by_the_students_kernel_gets_no_credit(exercise, name, why):
    g = _grade(exercise, name)
    for check in ("correct (public)", "correct (hidden)", "launch budget", "traffic budget", "launches as asked",
                  "one intermediate in global memory"):
        assert all(t.score == 0 for t in g.tests if t.name == check), report.text(g)
    assert why in _test(g, "correct (public)").output and "no credit" in g.summary
    assert g.summary.count("the answer must be computed by your own kernel") == 1
    _no_hint(g)


def test_importing_the_reference_is_refused_while_loading():
    g = _grade("fuse_mini", "reference_import")
    assert g.outcome == "import_error" and g.score == 0
    assert "a submission may not import kernels_lab.topics.elementwise.workload" in g.summary


def test_a_replaced_launch_object_of_real_kernels_is_not_the_kernel():
    # launched like a kernel, but two real kernels behind it: the grader launches the entry itself
    g = _grade("fuse_mini", "fuse_two_launches", folder=SUBMISSIONS)
    public = _test(g, "correct (public)")
    assert public.score == 0 and "fused_chain is a _TwoKernels object, not a @cuda.jit kernel" in public.output


@pytest.fixture(scope="module")
def do_nothing():
    return _grade("fuse_mini", "do_nothing", compile_gate=True)


def test_a_kernel_that_does_nothing_earns_no_budget_points(do_nothing):
    g = do_nothing
    assert g.score == 0, report.text(g)
    assert "no correct run to check this on" in _test(g, "launch budget").output
    assert g.summary.count("never written") == 1
    _no_hint(g)


# -- true feedback ---------------------------------------------------------------------------------

def test_reading_past_the_end_is_a_bounds_bug_not_a_race():
    g = _grade("block_sums_mini", "block_sums_past_end")
    assert "missing bounds guard" in g.summary and "IndexError" in _test(g, "correct (public)").output
    race = _test(g, "no race under perturbed schedules")
    assert race.status == "passed" and "the same result under" in race.output  # n=64 is right in every schedule
    _no_hint(g, "missing bounds guard")


def test_a_transposed_index_is_a_deterministic_bug_not_a_race():
    g = _grade("block_sums_mini", "block_sums_transposed")
    assert _test(g, "correct (public)").score < 3
    assert _test(g, "no race under perturbed schedules").status == "passed"
    _no_hint(g)


def _as_on_a_gpu_with_sanitizers(monkeypatch, asked):
    """Fake a GPU machine with compute-sanitizer: memcheck and racecheck answer "clean" at once (recording
    what they were asked), the simulator's rerun really runs (recording which runs it leaves out)."""
    from kernels_lab.grading import grade as G
    from kernels_lab.grading.sanitizer import SanitizerResult
    real = G._simulator_runs
    _as_gpu_machine(monkeypatch, G)
    monkeypatch.setattr(G, "_simulator_runs", lambda *a: asked.append(("simulator", a[2], a[4])) or real(*a))
    monkeypatch.setattr(G, "find_sanitizer", lambda: "/usr/local/cuda/bin/compute-sanitizer")
    def sanitize(ex, src, tool, *a, **k):
        asked.append((tool, k))
        left = build_cases(ex, public_only=tool != "memcheck", perturbed=False, probes=False,
                                   leave_out=k["hung"])  # what the real one would run
        return SanitizerResult("clean", 0, "") if left else \
            SanitizerResult("skipped", 0, "every run it would check already timed out")
    monkeypatch.setattr(G, "sanitize", sanitize)


def test_a_hang_on_one_hidden_size_costs_that_run_only(monkeypatch):
    # as on a GPU machine with compute-sanitizer (faked): memcheck and the simulator's child are told which
    # runs never finished, so neither spins there again (the H200 run: 150 s under memcheck, 60 s on the
    # simulator), and each gives the others a short limit
    from kernels_lab.grading.grade import AFTER_HANG_S
    asked = []
    _as_on_a_gpu_with_sanitizers(monkeypatch, asked)
    t0 = time.monotonic()
    g = _grade("fuse_mini", "spin_on_hidden", timeout_s=2)
    assert time.monotonic() - t0 < 25
    ex = MINI["fuse_mini"]
    runs = build_cases(ex, perturbed=False)
    spin = next(run_key(ex, c) for c in runs if c["case"].size.elements == 70 and c["config"] == (3, 32))
    probe = next(run_key(ex, c) for c in runs if c["role"] == "probe")  # after the spin: never reached
    assert [(a[0], a[1]["hung"], a[1]["run_limit_s"]) if a[0] == "memcheck" else a for a in asked] == \
        [("memcheck", frozenset({spin, probe}), AFTER_HANG_S), ("simulator", AFTER_HANG_S, frozenset({spin, probe}))]
    assert g.outcome == "timeout" and _test(g, "correct (public)").status == "passed"
    hidden = _test(g, "correct (hidden)")
    assert hidden.score == 0 and "did not finish within 2 s during run 3 of 5 (n=70, config (3, 32))" in hidden.output
    assert g.max_score == max_score(MINI["fuse_mini"], compile_gate=False)
    _no_hint(g)


def test_a_spin_in_every_run_costs_one_limit_on_a_gpu_machine(monkeypatch):
    # the H200: a kernel that spins in every run took 290 s (over 420 s with --timeout 60): memcheck, racecheck
    # and the simulator's rerun each spun again. Now the first run's limit is all it costs: every other run
    # never finished in the graded child, so no later phase has a run to make
    from kernels_lab.grading.grade import AFTER_HANG_S
    asked = []
    _as_on_a_gpu_with_sanitizers(monkeypatch, asked)
    limit = 3
    t0 = time.monotonic()
    spin = submission("fuse_infinite_spin").replace("fused_chain(x, b, alpha, out)", "block_sums(x, out)")
    g = grade(MINI["block_sums_mini"], spin, "spin", compile_gate=False, timeout_s=limit)  # it has a race check
    took = time.monotonic() - t0
    assert took <= 2 * limit + 30, took
    assert g.outcome == "timeout" and g.score == 0 and g.max_score == max_score(MINI["block_sums_mini"], False)
    every = frozenset(run_key(MINI["block_sums_mini"], c) for c in
                      build_cases(MINI["block_sums_mini"], perturbed=False, probes=False))
    assert [a for a in asked if a[0] == "simulator"] == [("simulator", AFTER_HANG_S, every)]  # no run left: no child
    memcheck = [a[1] for a in asked if a[0] == "memcheck"]
    assert len(memcheck) == 1 and memcheck[0]["hung"] == every  # the sanitizer is left nothing to run either
    assert "did not finish within 3 s during run 1 of" in _test(g, "correct (public)").output
    race = _test(g, "no race under perturbed schedules")  # racecheck is left no run either: no credit, no time
    assert race.score == 0 and "racecheck" in race.output
    _no_hint(g)


# -- consistent scores -------------------------------------------------------------------------------

def test_one_maximum_for_every_outcome_and_in_the_list(capsys, do_nothing):
    ex = MINI["fuse_mini"]
    here = max_score(ex)  # speed: 0 of 0 on the simulator; the compile gate counts on every machine
    assert here == sum(counted_checks(ex).values()) == 9
    done = do_nothing
    missing = failed_grade(ex, "gone.py", "unreadable", "no such file")
    crashed = _grade("fuse_mini", "exit_at_import", compile_gate=True)
    assert done.max_score == missing.max_score == crashed.max_score == here
    # an exit while loading is said as such, not as a generic crash
    assert crashed.outcome == "exited" and "exited (exit code 3) while loading the submission" in crashed.summary

    assert cli.main(["grade", "--list", "--exercises", str(MINI_FILE)]) == 0
    assert f"fuse_mini         lesson 01  fuse_chain, small ({here:g} points here" in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["--timeout", "-1"], "--timeout must be a number of seconds > 0, got -1"),
    (["--timeout", "nan"], "--timeout must be a number of seconds > 0"),
    (["--memory-gb", "0"], "--memory-gb must be a number of GiB > 0, got 0"),
    (["--workers", "0"], "--workers must be at least 1"),
])
def test_numeric_options_are_checked_with_one_line(argv, message, capsys, tmp_path):
    assert cli.main(["grade", "fuse_chain", str(write_submission("fuse_correct", tmp_path)), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_missing_file_exits_nonzero_after_writing_its_zero_grade(tmp_path, capsys):
    results, book = tmp_path / "results.json", tmp_path / "grades.json"
    code = cli.main(["grade", "fuse_mini", str(tmp_path / "nope.py"), "--exercises", str(MINI_FILE),
                     "--gradescope", str(results), "--json", str(book)])
    assert code == 1
    assert json.loads(results.read_text())["score"] == 0
    g = json.loads(book.read_text())["grades"][0]
    assert g["outcome"] == "unreadable" and g["max_score"] == max_score(MINI["fuse_mini"])
    assert "nope.py: no such file" in capsys.readouterr().err


# -- the environment is not the student's fault -------------------------------------------------------

def test_a_missing_toolchain_gives_the_gate_and_keeps_one_maximum(monkeypatch):
    # the gate counts on every machine (after `pip install -e .` as with the cu13 extra, and in the Gradescope
    # bundle): where it cannot run, a working kernel is given its point, and the instructor is told
    monkeypatch.setattr(compile_gate, "available", lambda: (False, "no NVVM/NVRTC to compile with"))
    ex = MINI["fuse_mini"]
    assert counted_checks(ex)["compiles for the course's GPUs"] == 1 and max_score(ex) == 9
    assert failed_grade(ex, "broken.py", "crash", "died").max_score == 9
    g = _grade("fuse_mini", "device_helper", compile_gate=True)
    gate = _test(g, "compiles for the course's GPUs")
    assert gate.score == gate.max_score == 1 and gate.status == "skipped", report.text(g)
    assert "no NVVM/NVRTC" in gate.output and "the point is given, not lost" in gate.output
    assert g.score == g.max_score == 9 and any("compile gate" in n for n in g.notes)
    monkeypatch.setattr(compile_gate, "available", lambda: (True, "found"))
    assert max_score(ex) == 9 == failed_grade(ex, "broken.py", "crash", "died").max_score


def test_a_driver_failure_during_the_gate_is_never_a_lost_point(monkeypatch):
    # the probe says the toolchain is there; then the compile of this submission hits the environment
    monkeypatch.setattr(compile_gate, "available", lambda: (True, "NVVM and NVRTC found"))
    monkeypatch.setattr(compile_gate, "_run", lambda *a, **k: {
        "status": "environment", "type": "CudaSupportError",
        "message": "Error at driver init: CUDA driver library cannot be found."})
    g = _grade("fuse_mini", "device_helper", compile_gate=True)
    gate = _test(g, "compiles for the course's GPUs")
    assert gate.score == gate.max_score == 1 and gate.status == "skipped"
    assert "not your kernel's: the point is given, not lost" in gate.output
    assert g.score == g.max_score == 9 and any("compile gate" in n for n in g.notes)


def test_the_gate_classifies_driver_errors_as_the_environments():
    from numba.cuda.cudadrv.error import CudaSupportError
    assert compile_gate.is_environmental(CudaSupportError("Error at driver init: CUDA driver library cannot be found"))
    assert not compile_gate.is_environmental(TypeError("cannot determine Numba type of <class 'dict'>"))
    # words are not enough: numba's message may quote a student's global of that name
    assert not compile_gate.is_environmental(RuntimeError("Untyped global name 'libnvvm'"))


def test_a_plain_device_function_compiles_without_a_driver():
    ok, why = compile_gate.available()
    if not ok:
        pytest.skip(why)
    result = compile_gate.gate(MINI["fuse_mini"], (ADVERSARIAL / "device_helper.py").read_text())
    assert result.status == "passed", result.message


def test_the_gate_signature_follows_each_arrays_rank():
    sig = compile_gate.signature_expr(get_exercise("fused_softmax"))
    assert sig.count("types.Array(types.float32, 2, 'C')") == 2


# -- GPU-only attribution, checked on a sample log ------------------------------------------------------

def test_memcheck_errors_are_charged_to_the_run_whose_array_they_touched():
    from kernels_lab.grading.sanitizer import attribute
    log = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at fused_chain+0x150 in <submission>:7
=========     by thread (5,0,0) in block (1,0,0)
=========     Access at 0x7f0000001004 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f0000000c00 of size 1028 bytes
========= Invalid __global__ write of size 4 bytes
=========     by thread (9,0,0) in block (0,0,0)
=========     Address 0x7f0000009000 is out of bounds
========= ERROR SUMMARY: 2 errors
"""
    by_case, unattributed, first = attribute(log, {3: [(0x7f0000000c00, 1028)], 4: [(0x7f0000002000, 400)]})
    assert by_case == {3: 1} and unattributed == 1 and "Invalid __global__ read" in first[3]


def test_a_sanitizer_leaves_out_the_runs_that_already_hung(monkeypatch):
    from kernels_lab.grading import sanitizer as S
    from kernels_lab.grading.exercises import get_exercise
    ex = get_exercise("fuse_chain")
    keys = [run_key(ex, c) for c in build_cases(ex, perturbed=False, probes=False)]
    given = []

    def child(ex, source, timeout_s, memory_bytes, cases, **kw):
        given.append([run_key(ex, c) for c in cases])
        raise StopIteration  # what it was given is all this test needs

    _as_gpu_machine(monkeypatch, S)
    monkeypatch.setattr(S, "find_sanitizer", lambda: "/usr/local/cuda/bin/compute-sanitizer")
    monkeypatch.setattr(S, "run_child", child)
    with pytest.raises(StopIteration):
        S.sanitize(ex, "", "memcheck", hung=frozenset(keys[1:2]))
    assert given == [keys[:1] + keys[2:]]
    assert S.sanitize(ex, "", "memcheck", hung=frozenset(keys)).status == "skipped" and len(given) == 1


def test_a_sanitizer_run_is_matched_to_the_graded_run_by_case_and_configuration_not_by_position():
    # memcheck's child runs no probes, the grade's does: ids are positions in each child's own list
    from kernels_lab.grading.exercises import get_exercise
    ex = get_exercise("fuse_chain")
    graded = [c for c in build_cases(ex, perturbed=False, hidden=7) if c["role"] == "plain"]
    checked = build_cases(ex, perturbed=False, probes=False, hidden=7)  # one hidden seed per grade
    by_key = {run_key(ex, c): c for c in graded}
    assert len(by_key) == len(graded) == len(checked)
    for c in checked:
        twin = by_key[run_key(ex, c)]
        assert twin["case"] is c["case"] and twin["config"] == c["config"]
        assert all(np.array_equal(twin["inputs"][k], v) for k, v in c["inputs"].items())


def test_on_a_gpu_machine_the_simulator_charges_an_index_past_the_end_in_every_run(monkeypatch):
    # memcheck cannot see an overrun that lands in an allocation's padding or the next array (the H200
    # run: fuse_no_bounds_guard kept its hidden points); the simulator's child, run on every back-end,
    # checks every index. Faked here: the GPU runs are right, the simulator's runs are the unguarded kernel's.
    from kernels_lab.grading import grade as G
    ex = MINI["fuse_mini"]
    real = G._simulator_runs
    _as_gpu_machine(monkeypatch, G)
    monkeypatch.setattr(G, "_simulator_runs", lambda e, src, *a: real(e, submission("fuse_no_bounds_guard"), *a))
    g = grade(ex, submission("fuse_correct"), "gpu-right", compile_gate=False, sanitizers=False)
    hidden = _test(g, "correct (hidden)")
    assert hidden.score == 0 and G.SIMULATOR_FOUND + ": IndexError" in hidden.output, report.text(g)
    assert _test(g, "correct (public)").score < 3 and g.summary.count("missing bounds guard") == 1, report.text(g)


def test_the_sandbox_says_what_protects_this_machine():
    rows = protections()
    names = [r[0] for r in rows]
    assert names[:5] == ["process containment", "filesystem writes", "signals and ptrace", "unprivileged user",
                         "network"]
    assert all(isinstance(on, bool) and isinstance(how, str) and how for _, on, how in rows)
    assert dict((n, on) for n, on, _ in rows)["process containment"]


def test_a_gpu_machine_still_counts_the_byte_budget_from_a_simulator_trace(monkeypatch):
    # as on a GPU machine: the graded run has no trace, so a second child on the simulator traces the bytes
    from kernels_lab.grading import grade as G
    source = submission("fuse_global_temporary")
    ex = MINI["fuse_mini"]
    sim = G._simulator_runs(ex, source, 30, 3 << 30)
    ev = J.Evidence(ex, J.Machine(gpu=True, simulator=False), [], {}, {}, sim_rerun=sim)
    t = J.CHECKS["traffic budget"].score(ev, 1)
    assert t.score == 0 and t.max_score == 1 and "(traced on the simulator)" in t.output
    assert "bytes of global-memory traffic at n=1 where the plan needs" in ev.hints.texts()[0]


def test_memcheck_errors_cost_the_runs_they_occur_in_hidden_ones_too(monkeypatch):
    # as on a GPU machine with compute-sanitizer: memcheck (faked here) ties two errors to the hidden run
    from kernels_lab.grading import grade as G
    from kernels_lab.grading.sanitizer import SanitizerResult
    ex = MINI["fuse_mini"]
    hidden = next(run_key(ex, c) for c in build_cases(ex, perturbed=False) if c["case"].hidden and c["role"] == "plain")
    found = SanitizerResult("errors", 2, "Invalid __global__ read of size 4 bytes", {hidden: 2}, 0,
                            {hidden: "Invalid __global__ read of size 4 bytes; by thread (6,0,0) in block (2,0,0)"})
    _as_gpu_machine(monkeypatch, G)
    monkeypatch.setattr(G, "find_sanitizer", lambda: "/usr/local/cuda/bin/compute-sanitizer")
    monkeypatch.setattr(G, "sanitize", lambda *a, **k: found)
    g = grade(ex, submission("fuse_correct"), "oob", compile_gate=False)
    assert _test(g, "correct (public)").status == "passed"
    hidden_test = _test(g, "correct (hidden)")
    assert hidden_test.score == 0 and G.MEMCHECK_FOUND + " 2 bad memory access(es)" in hidden_test.output
    assert g.summary.count("missing bounds guard") == 1 and "(first seen at n=70" in g.summary


# -- the same verdict on both back-ends ------------------------------------------------------------------

def _graded_as_on_a_gpu(monkeypatch, exercise, gpu_source, simulator_source):
    """A grade as on a GPU machine (faked): the graded runs are `gpu_source`'s (what a GPU's schedule gave),
    the simulator's rerun of the same runs is `simulator_source`'s."""
    from kernels_lab.grading import grade as G
    real = G._simulator_runs
    _as_gpu_machine(monkeypatch, G)
    monkeypatch.setattr(G, "_simulator_runs", lambda e, src, *a: real(e, simulator_source, *a))
    ex = MINI.get(exercise) or get_exercise(exercise)
    return grade(ex, gpu_source, "gpu", compile_gate=False, sanitizers=False)


def test_a_missing_grid_barrier_that_the_gpus_schedule_hid_costs_correctness(monkeypatch):
    # rnn_no_grid_barrier: every step in one launch, syncthreads between steps. On the H200 all its blocks ran
    # in step and the answer came out right (10/10); the simulator runs the blocks one after another, and every
    # run with more than one block (batch * hidden > 32) reads h[t-1] before the other blocks wrote it
    from kernels_lab.grading.grade import SIMULATOR_WRONG
    g = _graded_as_on_a_gpu(monkeypatch, "rnn_step", submission("rnn_correct"), submission("rnn_no_grid_barrier"))
    public, hidden = _test(g, "correct (public)"), _test(g, "correct (hidden)")
    assert public.score == round(4 * 2 / 3, 3) and hidden.score == 2, report.text(g)  # the runs of one block are right
    assert f"hidden=24,batch=3,steps=2: {SIMULATOR_WRONG}: 24 wrong element(s)" in public.output
    assert g.summary.count("the result depends on the order the blocks run in") == 1
    assert "the GPU's schedule hid it" in g.summary and "a grid-wide barrier between steps" in g.summary
    assert _test(g, "launch budget").status == "passed"
    _no_hint(g)


def test_on_the_simulator_a_missing_grid_barrier_loses_the_same_runs_and_says_why():
    g = _grade("rnn_step", "rnn_no_grid_barrier", folder=SUBMISSIONS)
    public, hidden = _test(g, "correct (public)"), _test(g, "correct (hidden)")
    assert public.score == round(4 * 2 / 3, 3) and hidden.score == 2, report.text(g)
    assert "hidden=24,batch=3,steps=2: 24 wrong element(s)" in public.output
    assert g.summary.count("1 launch(es) where the exercise allows 2, and values read before another block "
                           "wrote them") == 1 and "a grid-wide barrier: launch once per step" in g.summary
    assert "never written" not in g.summary  # the specific hint, not the generic one
    _no_hint(g)


# -- feedback: one message per problem, and true -------------------------------------------------------

def test_a_submission_that_was_not_graded_is_told_why_once():
    g = failed_grade(MINI["fuse_mini"], "nope.py", "unreadable", "unreadable: nope.py: no such file")
    text = report.text(g)
    assert text.count("nope.py: no such file") == 1 and "unreadable: unreadable:" not in text
    assert all("the reason is above" in t.output for t in g.tests if t.max_score)
    assert report.gradescope(g)["output"].startswith("unreadable: nope.py: no such file")


def test_an_untouched_stub_is_told_it_did_nothing_not_that_it_copied(tmp_path):
    from kernels_lab.lessons import lesson_sources, read_lesson
    stub = next(c.stub for p in lesson_sources().values() for c in read_lesson(p)
                if c.kind == "exercise" and c.exercise == "rnn_step")
    g = grade(get_exercise("rnn_step"), stub, "stub", compile_gate=False, timeout_s=30)
    assert g.score == 0 and "copied" not in g.summary and "reference" not in g.summary, report.text(g)
    assert "launches no kernel and writes no output (is the exercise filled in?)" in g.summary
    public = _test(g, "correct (public)").output
    assert public.count("launched no kernel of its own") == 1 and "(in all 3 runs)" in public  # once, counted


def test_a_copied_reference_is_still_called_one():
    g = _grade("fuse_mini", "reference_importlib")
    assert "no credit for a result from a kernel you did not write (a copied reference)" in g.summary


def test_a_fifo_is_refused_before_it_is_read(tmp_path):
    import os

    from kernels_lab.grading.submission import SubmissionError, load_source
    fifo = tmp_path / "x.py"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(SubmissionError, match="x.py: a FIFO, not a regular file"):
        load_source(fifo, "fuse_mini")  # opening it would block until a writer came
    assert time.monotonic() - t0 < 5


def test_the_notebook_says_each_hint_once_whatever_the_launch_configurations():
    import math

    from kernels_lab import lessons
    from kernels_lab.runtime import cuda
    namespace = {"cuda": cuda, "np": np, "math": math}
    exec(submission("fuse_no_bounds_guard"), namespace)
    with pytest.raises(AssertionError) as e:  # fuse_chain: 4 sizes x 3 launch configurations
        lessons.check("fuse_chain", namespace["fused_chain"])
    assert str(e.value).count("missing bounds guard") == 1 and "correct (public): 0/3" in str(e.value)


# -- the speed point cannot be bought (issue 33 item 3) ----------------------------------------------------------
# On the simulator speed is not counted: what shows here is that both cheats are right (so only the timing could
# catch them), that the mechanism the clean timing process uses catches the early return, and that nothing the
# submission's own process reports is read as a time. benchmarks/grade_adversarial.sh grades both on a GPU, where
# they must lose the speed point (the early return: wrong in a timed run; the wrapped clock: slower).

@pytest.mark.parametrize("name,traffic", [("speed_early_return", 0), ("speed_patch_timing", 1)])
def test_the_speed_cheats_are_right_and_speed_is_not_counted_on_the_simulator(name, traffic):
    g = _grade("fuse_mini", name)
    # the early return reads the output before it writes it: 16 B per element where the plan needs 12
    assert {t.name: t.score for t in g.tests if t.max_score} == {
        "correct (public)": 3, "correct (hidden)": 3, "launch budget": 1, "traffic budget": traffic}, report.text(g)
    assert _test(g, "speed").status == "skipped" and _test(g, "speed").max_score == 0
    _no_hint(g)


def test_outputs_that_hold_numbers_before_a_timed_run_catch_a_kernel_that_skips_them():
    # the timing process's own helpers (timing_child), here on the simulator: the outputs hold numbers that are not
    # the answer before each timed run, and each run's output is compared with the reference's
    import math
    from kernels_lab.arrays import to_device
    from kernels_lab.grading.timing_child import FILL_BASE, fill, mismatches
    from kernels_lab.runtime import cuda
    from kernels_lab.topics.elementwise.workload import fused_naive_kernel
    ex = get_exercise("fuse_chain")
    n = 300
    inputs = to_device(ex.spec.make_inputs(ex.spec.size(n), np.random.default_rng(3)))
    want = cuda.device_array(n, np.float32)
    fused_naive_kernel[(n + 127) // 128, 128](inputs["x"], inputs["b"], inputs["alpha"], want)

    def differ(name):
        ns = {"cuda": cuda, "np": np, "math": math}
        exec(compile((ADVERSARIAL / f"{name}.py").read_text(), name, "exec"), ns)
        got = cuda.device_array(n, np.float32)
        fill[(n + 127) // 128, 128](got, np.float32(FILL_BASE * 2))
        ns["fused_chain"][(n + 127) // 128, 128](inputs["x"], inputs["b"], inputs["alpha"], got)
        count = cuda.to_device(np.zeros(1, np.int64))
        mismatches[(n + 127) // 128, 128](got, want, 1e-4, 1e-5, count)
        return int(count.copy_to_host()[0])
    assert differ("speed_early_return") == n       # it kept every number it found: wrong in that timed run
    assert differ("speed_patch_timing") == 0       # right (its clock wrapping does not reach the timing process)


def test_the_timing_process_never_imports_the_submission_and_its_numba_internals_are_where_it_looks():
    import inspect
    from kernels_lab.grading import child, speed, timing_child
    source = inspect.getsource(timing_child)
    import re
    assert not re.search(r"(?<![.\w])(exec|eval|compile)\(", source) and ".child import" not in source  # no source runs
    assert '"source"' not in inspect.getsource(speed.timed)  # and none is sent to it
    assert "measure" not in inspect.getsource(child.run_speed)  # the child compiles only: nothing is timed there
    assert "_codelibrary" in inspect.getsource(speed.export)
    # numba-cuda 0.30 internals the export and the timing process use: fail loudly if they move (read from the
    # installed source: the simulator cannot import the modules that hold them)
    import importlib.util
    root = Path(importlib.util.find_spec("numba_cuda").submodule_search_locations[0]) / "numba" / "cuda"
    needed = {"codegen.py": ("def get_cubin(self", "self._entry_name = entry_name"),
              "dispatcher.py": ("lib._entry_name = cres.fndesc.llvm_func_name", "def _prepare_args(self, ty, val, "
                                "stream, retr, kernelargs)", "launch(stream, config, kernel, *kernelargs)"),
              "cudadrv/driver.py": ("def create_module_image(", "def _to_core_stream(", "def elapsed_time(",
                                    'result = self.linker.link("cubin")', "self.object_code.get_kernel(name)")}
    for name, phrases in needed.items():
        text = (root / name).read_text()
        assert all(p in text for p in phrases), (name, [p for p in phrases if p not in text])


def test_the_timing_process_runs_confined_and_its_report_comes_back_through_the_nonce():
    # the clean timing process is a confined child of its own; on the simulator it stops at its first GPU step and
    # says so (the speed point is not counted here), and that answer reaches the parent as the process's report
    from kernels_lab.grading.cases import speed_job
    from kernels_lab.grading.speed import timed
    ex = get_exercise("fuse_chain")
    got = timed(ex, {**speed_job(ex), "size": ex.spec.size(100)}, {"image": np.zeros(8, np.uint8), "entry_name": "k"},
                timeout_s=60)
    assert got["error"]["type"] == "TimingUnavailable" and "a GPU only" in got["error"]["message"], got
    assert got["seed"] > 0 and got["check_indices"][-1] == 99


@pytest.mark.gpu
@pytest.mark.parametrize("name,why", [("speed_early_return", "timed runs at the speed size"),
                                      ("speed_patch_timing", "slower: your kernel takes")])
def test_the_speed_cheats_lose_the_speed_point_on_a_gpu(name, why):
    g = _grade("fuse_chain", name, timeout_s=60)
    speed = _test(g, "speed")
    assert speed.max_score == 1 and speed.score == 0 and why in speed.output, report.text(g)
    assert _test(g, "correct (public)").score == 3 and _test(g, "correct (hidden)").score == 3
