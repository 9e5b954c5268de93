"""The command line: what it prints, what it writes where, its exit statuses, and every user error as
one line (any other error as a traceback that says it is a bug).

Most commands run in-process through main() (the back-end is already the simulator here);
the back-end environment variables need a fresh process each, since the back-end is chosen
at import.
"""

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kernels_lab import cli
from kernels_lab.cli import main

ROOT = Path(__file__).resolve().parents[1]
# the parent's back-end choice (NUMBA_ENABLE_CUDASIM, set by the simulator) must not leak into the child
ENV = {**{k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}, "KERNELS_LAB_BACKEND": "sim"}


def run(*args, env=None, cwd=None, timeout=300):
    """The real command in a fresh process (python -m kernels_lab.cli, as the console script runs it)."""
    return subprocess.run([sys.executable, "-m", "kernels_lab.cli", *args], capture_output=True, text=True,
                          env=env or ENV, cwd=cwd, timeout=timeout)


def cli_run(capsys, *args):
    """main(args) in this process: (exit status, stdout, stderr)."""
    try:
        rc = main([str(a) for a in args])
    except SystemExit as e:  # argparse: --help, and its own errors
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc, err, *fragments):
    assert rc == 2, err
    assert err.startswith("kernels-lab: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for f in fragments:
        assert f in err, err


def results_file(path: Path, records: list) -> Path:
    meta = {"backend": "gpu", "device": "x", "date": "2026-12-04", "command": "t", "versions": {}, "ceiling_GBs": None}
    path.write_text(json.dumps({"schema": "kernels-lab/results/v1", "meta": meta, "records": records}))
    return path


# -- help that teaches ------------------------------------------------------------------------------

def test_help_teaches(capsys):
    rc, out, _ = cli_run(capsys, "--help")
    assert rc == 0 and "demo elementwise" in out and "KERNELS_LAB_BACKEND" in out
    assert "--out DIR" in out and "--json FILE" in out and "70 a bug" in out


COMMANDS = [["list"], ["demo"], ["profile"], ["bench"], ["timeline"], ["plot"], ["grade"], ["grade", "merge"],
            ["grade", "bundle"], ["doctor"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_commands_help_says_what_it_writes_its_exit_status_and_an_example_that_parses(command, capsys):
    rc, out, _ = cli_run(capsys, *command, "--help")
    assert rc == 0
    assert "writes:" in out and "exit status:" in out and "2 a mistake" in out or command == ["doctor"]
    example = re.search(r"^example: +(kernels-lab .*)$", out, re.M)
    assert example, out
    argv = shlex.split(example.group(1))[1:]
    assert argv[:len(command)] == command
    args = cli.parse(argv)  # the example is a valid command line of this very command
    assert args.func.__name__ == "cmd_" + "_".join(command)


def test_grade_merge_and_bundle_are_subcommands_with_their_own_options(capsys):
    rc, out, _ = cli_run(capsys, "grade", "bundle", "--help")
    assert rc == 0 and out.startswith("usage: kernels-lab grade bundle") and "--shard" not in out
    rc, out, _ = cli_run(capsys, "grade", "merge", "--help")
    assert rc == 0 and out.startswith("usage: kernels-lab grade merge") and "--timeout" not in out
    rc, _, err = cli_run(capsys, "grade", "merge", "--timeout", "3", "x.json", "--csv", "b.csv")
    assert_one_line_error(rc, err, "grade merge: unrecognized arguments: --timeout")


README_PLACEHOLDERS = {"EXERCISE": "fuse_chain", "WORKLOAD": "elementwise", "NAME": "elementwise"}


def test_every_readme_command_parses():
    """The README's commands are command lines of this CLI, with options it has (each was also run by hand
    on the simulator, at small sizes, when the options changed)."""
    text = (ROOT / "README.md").read_text()
    found = re.findall(r"`(kernels-lab [^`]*)`", text)
    found += re.findall(r"(?:^ {4}|&& )(?:\.venv/bin/)?(kernels-lab [^#&\n]*)", text, re.M)  # code blocks
    commands = [c for c in found if " / " not in c]  # "kernels-lab list / profile / ...": prose, not a command
    assert len(commands) >= 12, commands
    for command in commands:
        argv = [README_PLACEHOLDERS.get(a, a) for a in shlex.split(command)[1:]]
        assert callable(cli.parse(argv).func), command


# -- what runs, and what it writes where ----------------------------------------------------------------

def test_list_names_every_variant_with_pattern_and_launches(capsys):
    rc, out, err = cli_run(capsys, "list")
    assert rc == 0, err
    for line in ("unfused       unfused     3 launch", "fused         fused       1 launch",
                 "persistent    persistent  1 launch"):
        assert line in out


def test_demo_writes_into_the_out_folder_which_it_creates(tmp_path, capsys):
    out_dir = tmp_path / "figs"
    rc, out, err = cli_run(capsys, "demo", "elementwise", "--n", "37", "--out", out_dir)
    assert rc == 0, err
    assert "timings are not available" in out and "2.33x fewer" in out
    assert sorted(p.name for p in out_dir.iterdir()) == ["elementwise.json", "elementwise.png"]
    doc = json.loads((out_dir / "elementwise.json").read_text())
    assert doc["meta"]["backend"] == "simulator"
    rec = {r["variant"]: r for r in doc["records"]}
    assert rec["unfused"]["launches"] == 3 and rec["fused"]["launches"] == 1
    assert all(r["bytes_traced"] == r["bytes_model"] for r in doc["records"])
    assert (out_dir / "elementwise.png").stat().st_size > 10_000


def test_profile_writes_its_results_into_out_or_the_json_file_named(tmp_path, capsys):
    rc, _, err = cli_run(capsys, "profile", "elementwise", "--sizes", "5,2^4", "--out", tmp_path / "p")
    assert rc == 0, err
    doc = json.loads((tmp_path / "p" / "elementwise_profile.json").read_text())
    assert sorted({r["n"] for r in doc["records"]}) == [5, 16]
    assert doc["meta"]["sweep_axis"] == "n"
    assert all(r["bytes_traced"] == r["bytes_model"] and r["time_ms"] is None for r in doc["records"])
    rc, _, err = cli_run(capsys, "profile", "softmax", "--sweep", "cols=3,40", "--size", "rows=3",
                         "--json", tmp_path / "s.json", "--out", tmp_path / "unused")
    assert rc == 0, err
    doc = json.loads((tmp_path / "s.json").read_text())
    assert sorted({r["size"]["cols"] for r in doc["records"]}) == [3, 40] and {r["size"]["rows"] for r in
                                                                               doc["records"]} == {3}
    assert not (tmp_path / "unused").exists()  # --out is created when something is written into it only


def test_plot_draws_into_out_and_a_file_with_nothing_to_draw_is_an_error(tmp_path, capsys):
    rc, out, err = cli_run(capsys, "plot", ROOT / "figures" / "data" / "ladder_h200.json", "--out", tmp_path / "f")
    assert rc == 0, err
    assert [p.name for p in (tmp_path / "f").iterdir()] == ["ladder_h200_ladder.png"]
    record = {"workload": "w", "variant": "v", "pattern": "fused", "n": 1, "launches": 1, "bytes_model": 8,
              "time_ms": None, "GBs": None, "kind": "mystery"}
    rc, _, err = cli_run(capsys, "plot", results_file(tmp_path / "m.json", [record]), "--out", tmp_path / "g")
    assert_one_line_error(rc, err, "m.json: nothing to draw", "kind mystery")
    rc, _, err = cli_run(capsys, "plot", results_file(tmp_path / "e.json", []), "--out", tmp_path / "g")
    assert_one_line_error(rc, err, "e.json: no records")
    assert not (tmp_path / "g").exists()


def test_demo_list(capsys):
    rc, out, _ = cli_run(capsys, "demo", "--list")
    assert rc == 0 and "elementwise" in out and "pdl" in out


@pytest.mark.parametrize("name", ["launch", "consumer", "pdl"])
def test_the_fixed_configuration_demos_draw_the_committed_results_into_out(name, tmp_path, capsys):
    rc, out, err = cli_run(capsys, "demo", name, "--out", tmp_path / "figs")
    assert rc == 0, err
    assert "backend:" in out and "simulator" in out.lower()
    written = sorted(p.name for p in (tmp_path / "figs").iterdir())
    assert written and all(n.startswith(f"{name}_") and n.endswith(".png") for n in written), written


def test_a_demo_is_handed_a_typed_request(tmp_path, capsys, monkeypatch):
    """What a demo gets: the size as asked, the reps (the default where none were given), its results file and
    figure inside --out, the command line; and what it says it takes decides which options are refused."""
    import kernels_lab.demos as demos_module
    from kernels_lab.demos import Demo, DemoRequest
    got = []
    fake = {"sized": Demo("sized", "takes a size", lambda r: got.append(r) or 0),
            "fixed": Demo("fixed", "fixed configurations", lambda r: got.append(r) or 0, takes_size=False,
                          writes_results_here=False)}
    monkeypatch.setattr(demos_module, "demos", lambda: fake)
    rc, _, err = cli_run(capsys, "demo", "sized", "--size", "n=37", "--out", tmp_path)
    assert rc == 0, err
    assert got == [DemoRequest(size="n=37", n=None, reps=30, out=tmp_path, json=tmp_path / "sized.json",
                               figure=tmp_path / "sized.png", command_line=f"kernels-lab demo sized --size n=37 "
                                                                           f"--out {tmp_path}")]
    assert got[0].sized and not dataclasses.replace(got[0], size=None).sized
    rc, _, err = cli_run(capsys, "demo", "fixed", "--reps", "3", "--out", tmp_path)
    assert rc == 2 and "demo fixed measures fixed configurations: --reps does not apply" in err and len(got) == 1
    rc, _, err = cli_run(capsys, "demo", "fixed", "--json", tmp_path / "f.json", "--out", tmp_path)
    assert rc == 2 and "measures nothing on the simulator" in err and len(got) == 1


# -- every bad input: one line, exit 2, nothing written ----------------------------------------------------

@pytest.fixture
def a_file(tmp_path):
    f = tmp_path / "a_file.txt"
    f.write_text("not a folder")
    return f


# Each bad input: (arguments, fragments the one-line error must contain). {file} is a regular file.
BAD = [
    (["demo", "nosuch"], ["unknown demo 'nosuch'", "demo --list"]),
    (["demo", "elementwise", "--n", "0"], ["--n", ">= 1", "'0'"]),
    (["demo", "elementwise", "--n", "-5"], ["--n", ">= 1", "'-5'"]),
    (["demo", "elementwise", "--n", "many"], ["--n", ">= 1"]),
    (["demo", "elementwise", "--reps", "0"], ["--reps", ">= 1"]),
    (["demo", "elementwise", "--size", "n=abc"], ["'abc' is not a whole number", "2^12"]),
    (["demo", "elementwise", "--size", "rows=3"], ["no axis 'rows'", "its axes: n"]),
    (["demo", "elementwise", "--size", "n=0"], ["at least 1"]),
    (["demo", "elementwise", "--size", " "], ["--size is empty"]),
    (["demo", "elementwise", "--n", "5", "--size", "n=5"], ["--n or --size, not both"]),
    (["demo", "elementwise", "--n", "2^30"], ["simulator", "at most"]),
    (["demo", "consumer", "--n", "5"], ["fixed configurations", "--n does not apply"]),
    (["demo", "pdl", "--n", "1000"], ["demo pdl measures fixed configurations", "--n"]),
    (["demo", "launch", "--reps", "3", "--size", "n=4"], ["--size, --reps do not apply"]),
    (["demo", "launch", "--json", "{tmp}/l.json"], ["measures nothing on the simulator", "--json"]),
    (["demo", "elementwise", "--out", "{file}"], ["--out", "is a file; give a folder"]),
    (["demo", "elementwise", "--out", "{tmp}/e.png"], ["--out", "looks like a file name", "--json"]),
    (["demo", "elementwise", "--out", "{tmp}/no/figs"], ["the folder", "does not exist", "never the folders above"]),
    (["demo", "elementwise", "--json", "/proc/e.json"], ["--json", "cannot write"]),
    (["demo", "elementwise", "--json", "{tmp}"], ["--json", "is a folder"]),
    (["demo", "elementwise", "--json", "{tmp}/no/e.json", "--out", "{tmp}/figs"], ["no does not exist",
                                                                                  "create it first"]),
    (["profile", "nosuch", "--json", "{tmp}/p.json"], ["unknown workload 'nosuch'", "known workloads"]),
    (["profile", "elementwise", "--sizes", "4", "--sweep", "n=4", "--json", "{tmp}/p.json"], ["not both"]),
    (["profile", "elementwise", "--sizes", "2..", "--json", "{tmp}/p.json"], ["not a whole number"]),
    (["profile", "elementwise", "--sweep", "n=8..2", "--json", "{tmp}/p.json"], ["low <= high"]),
    (["profile", "elementwise", "--sweep", "n=", "--json", "{tmp}/p.json"], ["--sweep n=: no values after '='"]),
    (["profile", "softmax", "--sweep", "cols=", "--size", "rows=3", "--out", "{tmp}/o"], ["no values", "cols=2^10"]),
    (["profile", "elementwise", "--sizes", "", "--out", "{tmp}/o"], ["--sizes is empty"]),
    (["profile", "softmax", "--sizes", "4", "--json", "{tmp}/p.json"], ["one-axis", "--sweep"]),
    (["profile", "elementwise", "--reps", "-1"], ["--reps", ">= 1"]),
    (["profile", "elementwise", "--json", "{file}/p.json"], ["--json", "is a file"]),
    (["profile", "elementwise", "--json", "/nonexistent/dir/x.json"], ["/nonexistent/dir does not exist"]),
    (["profile", "elementwise", "--sizes", "8", "--ncu", "--out", "{tmp}/o"], ["--ncu", "drop --ncu"]),
    (["profile", "launch", "--out", "{tmp}/o"], ["'launch' is not a workload", "kernels-lab bench launch"]),
    (["profile", "consumer"], ["'consumer' is not a workload", "bench consumer"]),
    (["timeline", "pdl", "--out", "{tmp}/o"], ["'pdl' is not a workload", "bench pdl"]),
    (["bench", "launch", "--json", "{tmp}/l.json"], ["needs a GPU", "demo launch"]),
    (["bench", "nosuch"], ["unknown bench 'nosuch'", "launch, consumer, pdl"]),
    (["timeline", "elementwise", "--variants", "fused,nosuch", "--out", "{tmp}/o"], ["no variant 'nosuch'"]),
    (["timeline", "elementwise", "--n", "0"], ["--n", ">= 1"]),
    (["timeline", "softmax", "--size", "rows=2,cols=5000", "--variants", "fused_shared", "--out", "{tmp}/o"],
     ["fused_shared stages a row of at most 4096 floats"]),
    (["timeline", "elementwise", "--out", "{file}"], ["--out", "is a file; give a folder"]),
    (["plot", "{tmp}/missing.json", "--out", "{tmp}/o"], ["no such file"]),
    (["plot", "{file}", "--out", "{tmp}/o"], ["not valid JSON"]),
    (["plot", "{schema}", "--out", "{tmp}/o"], ["schema"]),
    (["plot", "{schema}", "--out", "/proc/kernels-lab"], ["--out", "cannot write"]),
    (["grade", "fuse_chain", "{file}", "--csv", "/proc/kernels-lab/book.csv"], ["--csv", "does not exist"]),
    (["grade", "fuse_chain", "{file}", "--out", "{file}"], ["--out", "is a file"]),
    (["grade", "nosuch", "{file}"], ["unknown exercise 'nosuch'", "grade --list"]),
    (["grade", "fuse_chain", "{tmp}/empty"], ["no submissions"]),
    (["grade", "fuse_chain", "{file}", "--shard", "3/2"], ["--shard '3/2'", "i/N"]),
    (["grade", "fuse_chain", "{file}", "--timeout", "nan"], ["--timeout must be a number of seconds > 0"]),
    (["grade", "--list", "--exercises", "{tmp}/mine.py"], ["--exercises", "no such file"]),
    (["grade", "merge", "{tmp}/x.json"], ["grade merge writes a gradebook", "--csv"]),
    (["grade", "merge", "{tmp}/missing", "--csv", "{tmp}/book.csv"], ["missing: no such file or folder"]),
    (["grade", "merge"], ["grade merge", "required: PART"]),
    (["grade", "bundle", "fuse_chain", "--out", "{tmp}/autograder.zip"], ["looks like a file name"]),
    (["grade", "bundle", "nosuch", "--out", "{tmp}/o"], ["unknown exercise 'nosuch'"]),
    (["grade", "bundle", "fuse_chain", "--memory-gb", "0", "--out", "{tmp}/o"], ["--memory-gb must be"]),
    (["nosuch"], ["invalid choice: 'nosuch'"]),
]


@pytest.mark.parametrize("args,fragments", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_every_bad_input_is_one_line_naming_the_problem(args, fragments, tmp_path, a_file, capsys):
    schema = tmp_path / "schema.json"
    schema.write_text('{"schema": "x"}')
    (tmp_path / "empty").mkdir()
    argv = [a.format(file=a_file, tmp=tmp_path, schema=schema) for a in args]
    rc, out, err = cli_run(capsys, *argv)
    assert_one_line_error(rc, err, *fragments)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file.txt", "empty", "schema.json"], "wrote before failing"
    assert not list((tmp_path / "empty").iterdir())
    assert "backend:" not in out, "began the work before failing"


def test_only_a_usage_error_is_one_line_anything_else_is_a_bug_with_its_traceback(monkeypatch, capsys):
    import kernels_lab.core
    for error in (ValueError("a value our own code got wrong"), KeyError("ours"), RuntimeError("boom")):
        def broken():
            raise error
        monkeypatch.setattr(kernels_lab.core, "all_workloads", broken)
        rc, _, err = cli_run(capsys, "list")
        assert rc == cli.EXIT_BUG == 70
        assert "Traceback (most recent call last)" in err and type(error).__name__ in err
        assert err.rstrip().splitlines()[-1].startswith("kernels-lab: this is a bug in kernels-lab") and "report" in err


def test_a_file_the_checks_could_not_foresee_is_one_line_and_exit_3(monkeypatch, tmp_path, capsys):
    import kernels_lab.profile.runs as runs

    def full_disk(*a, **k):
        raise OSError(28, "No space left on device", str(tmp_path / "p.json"))
    monkeypatch.setattr(runs, "profile_workload", full_disk)
    rc, _, err = cli_run(capsys, "profile", "elementwise", "--sizes", "8", "--out", tmp_path)
    assert rc == cli.EXIT_ENVIRONMENT == 3
    assert err == f"kernels-lab: error: No space left on device: {tmp_path / 'p.json'}\n"


def test_profile_ncu_without_ncu_exits_3_before_the_sweep(monkeypatch, tmp_path, capsys):
    import kernels_lab.profile.runs as runs
    import kernels_lab.runtime as runtime
    from kernels_lab.backend import BACKEND
    runtime.device_facts()  # this machine's, cached before the flag below pretends otherwise
    monkeypatch.setattr(BACKEND, "can_time", True)  # as on a GPU machine: --ncu is allowed there
    monkeypatch.setenv("PATH", str(tmp_path))  # and ncu is not on PATH
    monkeypatch.setattr(runs, "profile_workload", lambda *a, **k: pytest.fail("swept although ncu is missing"))
    rc, _, err = cli_run(capsys, "profile", "elementwise", "--sizes", "8", "--ncu", "--out", tmp_path / "o")
    assert rc == 3 and err == ("kernels-lab: error: ncu (Nsight Compute) is not on PATH: install it (or add it to "
                               "PATH), or drop --ncu\n")
    assert not (tmp_path / "o").exists()
    # ncu found but failing: the sweep's results stay written, and the status says what is missing
    monkeypatch.setattr(runs, "ncu_missing", lambda: None)
    monkeypatch.setattr(runs, "profile_workload", lambda *a, **k: ([], "ncu: ncu exited 1: no permission"))
    rc, out, err = cli_run(capsys, "profile", "elementwise", "--sizes", "8", "--ncu", "--out", tmp_path / "o")
    assert rc == 3 and "ncu exited 1: no permission" in err and "wrote " in out


# -- grade: exit statuses, refusals before grading --------------------------------------------------------

def test_grade_exits_1_alike_for_a_syntax_error_a_missing_file_and_a_fifo_never_read(tmp_path):
    (tmp_path / "syntax.py").write_text("def fuse_chain(:\n")
    os.mkfifo(tmp_path / "x.py")  # reading it would block forever
    out = run("grade", "fuse_chain", str(tmp_path / "syntax.py"), str(tmp_path / "nope.py"), str(tmp_path / "x.py"),
              "--json", str(tmp_path / "g.json"), timeout=240)
    assert out.returncode == 1, out.stderr
    grades = {g["submission"]: g for g in json.loads((tmp_path / "g.json").read_text())["grades"]}
    assert {k: g["outcome"] for k, g in grades.items()} == {"syntax.py": "import_error", "nope.py": "unreadable",
                                                             "x.py": "unreadable"}
    assert "SyntaxError" in grades["syntax.py"]["summary"] and "a FIFO, not a regular file" in grades["x.py"]["summary"]
    said = [line for line in out.stderr.splitlines() if line.startswith("kernels-lab: ")]
    assert said == [f"kernels-lab: {name}: {grades[name]['summary'].splitlines()[0]}" for name in grades], said
    assert all(line.count("unreadable") <= 1 for line in said)


def test_gradescope_with_several_submissions_is_refused_before_grading(monkeypatch, tmp_path, capsys):
    import kernels_lab.grading.batch as batch
    from sources import write_submission
    folder = tmp_path / "subs"
    folder.mkdir()
    for name in ("fuse_correct", "fuse_import_error"):
        write_submission(name, folder)
    monkeypatch.setattr(batch, "grade_many", lambda *a, **k: pytest.fail("graded before refusing"))
    rc, _, err = cli_run(capsys, "grade", "fuse_chain", folder, "--gradescope", tmp_path / "results.json")
    assert_one_line_error(rc, err, "--gradescope writes one results.json", "give 2")
    assert not (tmp_path / "results.json").exists()


@pytest.mark.parametrize("outcome,status", [("timeout", 0), ("crash", 0), ("import_error", 1), ("unreadable", 1),
                                            ("grader_error", 3)])
def test_grade_exit_status_says_whether_every_submission_was_graded(outcome, status, monkeypatch, tmp_path, capsys):
    """0: graded, whatever the score (a kernel that hangs or crashes is graded); 1: not loaded; 3: the grader
    failed. --out is the folder of per-submission grades."""
    import kernels_lab.grading.batch as batch
    seen = {}

    def fake_grade_many(ex, paths, workers, out_dir, **kw):
        seen.update(paths=paths, out_dir=out_dir)
        return [batch.failed_grade(ex, p.name, outcome, "what happened") for p in paths]
    monkeypatch.setattr(batch, "grade_many", fake_grade_many)
    (tmp_path / "a.py").write_text("x = 1\n")
    rc, out, err = cli_run(capsys, "grade", "fuse_chain", tmp_path / "a.py", "--out", tmp_path / "grades")
    assert rc == status, err
    assert seen == {"paths": [tmp_path / "a.py"], "out_dir": tmp_path / "grades"}
    assert "fuse_chain - a.py: 0 / " in out
    assert (f"kernels-lab: a.py: {outcome}: what happened\n" in err) == (status != 0), err


# -- the back-end request ----------------------------------------------------------------------------------

@pytest.mark.parametrize("backend,fragment", [
    ("gpu", "KERNELS_LAB_BACKEND=gpu was asked for"),
    ("banana", "KERNELS_LAB_BACKEND='banana' is not a back-end"),
])
def test_a_back_end_that_cannot_be_had_is_one_line_and_doctor_still_reports(backend, fragment):
    env = {**ENV, "KERNELS_LAB_BACKEND": backend}
    if backend == "gpu":
        from kernels_lab.runtime import _gpu_visible
        if _gpu_visible()[0]:
            pytest.skip("this machine has a GPU")
    out = run("list", env=env)
    assert_one_line_error(out.returncode, out.stderr, fragment, "KERNELS_LAB_BACKEND=")
    assert out.stdout == ""
    doc = run("doctor", env=env)
    assert doc.returncode == 1 and "Traceback" not in doc.stderr, doc.stderr
    assert "problems:" in doc.stdout and fragment in doc.stdout
    assert "[skipped] timings" in doc.stdout  # it reports what the fallback can run


def test_the_ptx_back_end_refuses_to_launch_in_one_line(tmp_path):
    out = run("demo", "elementwise", "--out", str(tmp_path / "e"), env={**ENV, "KERNELS_LAB_BACKEND": "ptx"})
    assert_one_line_error(out.returncode, out.stderr, "ptx compiles kernels but cannot launch", "gpu or sim")


def test_doctor_says_what_runs_and_what_is_skipped(capsys):
    from kernels_lab import capabilities
    rc, out, _ = cli_run(capsys, "doctor")
    assert rc in (0, 1)
    assert "[runs   ] correctness, launch counts, traced bytes" in out
    ptx = capabilities.ptx_compile(probe=True)
    assert f"[{'runs' if ptx.available else 'skipped':<7}] PTX compile for sm_75 / sm_80 / sm_90" in out
    assert ptx.detail in out
    for feature in ("grid sync across blocks", "Programmatic Dependent Launch", "Nsight Compute DRAM bytes",
                    "compute-sanitizer"):
        assert f"] {feature}" in out


# -- user mistakes of every kind: one line, exit 2, never a traceback (issue 33 item 6) --------------------------

@pytest.fixture
def odd_inputs(tmp_path):
    """Inputs a user may give by mistake, in tmp/in: a FIFO, a non-UTF-8 file, a folder, a text file."""
    d = tmp_path / "in"
    d.mkdir()
    os.mkfifo(d / "pipe.json")
    (d / "binary.json").write_bytes(b"\xff\xfe\x00")
    (d / "folder").mkdir()
    (d / "mine.txt").write_text("x = 1\n")
    (d / "latin1.py").write_bytes(b"# caf\xe9\n")
    (d / "a.py").write_text("x = 1\n")
    return d


MISTAKES = [
    (["plot", "{in}/pipe.json", "--out", "{tmp}/o"], ["plot: ", "pipe.json: a FIFO, not a regular file"]),
    (["plot", "{in}/binary.json", "--out", "{tmp}/o"], ["binary.json: not UTF-8 text (byte 0), so not a results file"]),
    (["plot", "{in}/folder", "--out", "{tmp}/o"], ["folder: a folder, not a regular file"]),
    (["grade", "merge", "{in}/pipe.json", "--csv", "{tmp}/b.csv"], ["pipe.json: a FIFO, not a regular file"]),
    (["grade", "merge", "{in}/a.py", "--csv", "{tmp}/b.csv"], ["a.py: not valid JSON", "not a grade part"]),
    (["grade", "--list", "--exercises", "{in}/mine.txt"], ["--exercises", "mine.txt: not a .py file"]),
    (["grade", "--list", "--exercises", "{in}/latin1.py"], ["latin1.py: not UTF-8 text (byte 5)"]),
    (["grade", "--list", "--exercises", "{in}/pipe.json"], ["pipe.json: a FIFO, not a regular file"]),
    (["grade", "--list", "--exercises", "{in}/folder"], ["folder: a folder, not a regular file"]),
    (["grade", "bundle", "fuse_chain", "--exercises", "{in}/mine.txt", "--out", "{tmp}/o"], ["not a .py file"]),
    (["demo", "elementwise", "--size", "n=2^99999"], ["'2^99999' is too large: at most 9,223,372,036,854,775,807"]),
    (["demo", "elementwise", "--n", "2^99999"], ["--n: '2^99999' is too large"]),
    (["demo", "elementwise", "--n", "99999999999999999999999"], ["is too large"]),
    (["profile", "elementwise", "--reps", "10^30"], ["--reps: '10^30' is too large"]),
    (["profile", "softmax", "--size", "rows=2^40,cols=2^40", "--out", "{tmp}/o"],
     ["1,208,925,819,614,629,174,706,176 elements: more than any GPU's memory holds"]),
    (["timeline", "elementwise", "--size", "n=2^62", "--out", "{tmp}/o"], ["more than any GPU's memory holds"]),
    (["profile", "elementwise", "--sizes", "2^4..2^9999", "--out", "{tmp}/o"], ["'2^9999' is too large"]),
    (["grade", "fuse_chain", "{in}/a.py", "--memory-gb", "0.01"],
     ["--memory-gb 0.01 is less than the grader itself needs: give at least 0.5"]),
    (["grade", "bundle", "fuse_chain", "--memory-gb", "0.1", "--out", "{tmp}/o"], ["give at least 0.5"]),
    (["grade", "fuse_chain", "{in}/a.py", "--memory-gb", "1e30"], ["more than this machine has"]),
    (["grade", "fuse_chain", "{in}/a.py", "--timeout", "1e300"], ["--timeout 1e+300: at most 86400 seconds"]),
    (["grade", "fuse_chain", "{in}/a.py", "--workers", "x"], ["--workers: invalid int value"]),
    (["grade", "fuse_chain", "{in}/folder"], ["no submissions", "a folder of students' folders"]),
    (["timeline", "elementwise", "--variants", ",", "--out", "{tmp}/o"], ["--variants ',' names no variant",
                                                                          "unfused"]),
]


@pytest.mark.parametrize("args,fragments", MISTAKES, ids=[" ".join(a) for a, _ in MISTAKES])
def test_every_user_mistake_is_one_line_and_exit_2_never_a_traceback(args, fragments, tmp_path, odd_inputs, capsys):
    argv = [a.format(tmp=tmp_path, **{"in": odd_inputs}) for a in args]
    rc, out, err = cli_run(capsys, *argv)
    assert_one_line_error(rc, err, *fragments)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"], "wrote before failing"


def test_a_child_that_runs_out_of_memory_before_the_submission_loads_is_the_graders_failure():
    from kernels_lab.grading.lifecycle import Confined, classify
    from kernels_lab.grading.records import ChildRun
    got = Confined(None, 9, False, True, {"progress": None}, "", "", 0.1)
    run = classify(ChildRun("ok", cases=[{"id": 0}]), None, got, timeout_s=20, memory_bytes=2**28)
    assert run.outcome == "grader_error" and "too small for the grader's own child" in run.detail
    assert "not the submission's doing" in run.detail and "at least 0.5 GiB" in run.detail
