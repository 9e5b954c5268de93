"""The command line: what it prints, what it writes, and every user error as one line.

Most commands run in-process through main() (the back-end is already the simulator here);
the back-end environment variables need a fresh process each, since the back-end is chosen
at import.
"""

import json
import os
import subprocess
import sys

import pytest

from kernels_lab.cli import main

# the parent's back-end choice (NUMBA_ENABLE_CUDASIM, set by the simulator) must not leak into the child
ENV = {**{k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}, "KERNELS_LAB_BACKEND": "sim"}


def run(*args, env=None, cwd=None, timeout=300):
    """The real command in a fresh process (python -m kernels_lab.cli, as the console script runs it)."""
    return subprocess.run([sys.executable, "-m", "kernels_lab.cli", *args], capture_output=True, text=True,
                          env=env or ENV, cwd=cwd, timeout=timeout)


def cli(capsys, *args):
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


def test_help_teaches(capsys):
    rc, out, _ = cli(capsys, "--help")
    assert rc == 0 and "demo elementwise" in out and "KERNELS_LAB_BACKEND" in out


def test_list_names_every_variant_with_pattern_and_launches(capsys):
    rc, out, err = cli(capsys, "list")
    assert rc == 0, err
    for line in ("unfused       unfused     3 launch", "fused         fused       1 launch",
                 "persistent    persistent  1 launch"):
        assert line in out


def test_demo_elementwise_end_to_end(tmp_path, capsys):
    rc, out, err = cli(capsys, "demo", "elementwise", "--n", "37", "--out", tmp_path / "e.png",
                       "--json", tmp_path / "e.json")
    assert rc == 0, err
    assert "timings are not available" in out and "2.33x fewer" in out
    doc = json.loads((tmp_path / "e.json").read_text())
    assert doc["meta"]["backend"] == "simulator"
    rec = {r["variant"]: r for r in doc["records"]}
    assert rec["unfused"]["launches"] == 3 and rec["fused"]["launches"] == 1
    assert all(r["bytes_traced"] == r["bytes_model"] for r in doc["records"])
    assert (tmp_path / "e.png").stat().st_size > 10_000


def test_profile_on_the_simulator_writes_traced_bytes(tmp_path, capsys):
    rc, _, err = cli(capsys, "profile", "elementwise", "--sizes", "5,2^4", "--json", tmp_path / "sub" / "p.json")
    assert rc == 0, err
    doc = json.loads((tmp_path / "sub" / "p.json").read_text())
    assert sorted({r["n"] for r in doc["records"]}) == [5, 16]
    assert doc["meta"]["sweep_axis"] == "n"
    assert all(r["bytes_traced"] == r["bytes_model"] and r["time_ms"] is None for r in doc["records"])


def test_demo_list(capsys):
    rc, out, _ = cli(capsys, "demo", "--list")
    assert rc == 0 and "elementwise" in out and "pdl" in out


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
    (["demo", "elementwise", "--n", "5", "--size", "n=5"], ["--n or --size, not both"]),
    (["demo", "elementwise", "--n", "2^30"], ["simulator", "at most"]),
    (["demo", "consumer", "--n", "5"], ["fixed configurations", "--n"]),
    (["demo", "elementwise", "--out", "{file}/e.png"], ["--out", "is a file, not a folder"]),
    (["demo", "elementwise", "--json", "/proc/kernels-lab/e.json"], ["--json", "cannot write"]),
    (["demo", "elementwise", "--json", "{tmp}"], ["--json", "is a folder"]),
    (["profile", "nosuch", "--json", "{tmp}/p.json"], ["unknown workload 'nosuch'", "known workloads"]),
    (["profile", "elementwise", "--sizes", "4", "--sweep", "n=4", "--json", "{tmp}/p.json"], ["not both"]),
    (["profile", "elementwise", "--sizes", "2..", "--json", "{tmp}/p.json"], ["not a whole number"]),
    (["profile", "elementwise", "--sweep", "n=8..2", "--json", "{tmp}/p.json"], ["low <= high"]),
    (["profile", "softmax", "--sizes", "4", "--json", "{tmp}/p.json"], ["one-axis", "--sweep"]),
    (["profile", "elementwise", "--reps", "-1"], ["--reps", ">= 1"]),
    (["profile", "elementwise", "--json", "{file}/p.json"], ["--json", "is a file"]),
    (["profile", "launch", "--json", "{tmp}/l.json"], ["needs a GPU"]),
    (["profile", "launch", "--sizes", "4", "--json", "{tmp}/l.json"], ["fixed configurations"]),
    (["timeline", "elementwise", "--variants", "fused,nosuch", "--out", "{tmp}"], ["no variant 'nosuch'"]),
    (["timeline", "elementwise", "--n", "0"], ["--n", ">= 1"]),
    (["timeline", "elementwise", "--out", "{file}"], ["--out", "is a file; give a folder"]),
    (["plot", "{tmp}/missing.json", "--out", "{tmp}"], ["no such file"]),
    (["plot", "{file}", "--out", "{tmp}"], ["not valid JSON"]),
    (["plot", "{schema}", "--out", "{tmp}"], ["schema"]),
    (["plot", "{schema}", "--out", "/proc/kernels-lab"], ["--out", "cannot write"]),
    (["grade", "fuse_chain", "{file}", "--csv", "/proc/kernels-lab/book.csv"], ["--csv", "cannot write"]),
    (["nosuch"], ["invalid choice: 'nosuch'"]),
]


@pytest.mark.parametrize("args,fragments", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_every_bad_input_is_one_line_naming_the_problem(args, fragments, tmp_path, a_file, capsys):
    schema = tmp_path / "schema.json"
    schema.write_text('{"schema": "x"}')
    argv = [a.format(file=a_file, tmp=tmp_path, schema=schema) for a in args]
    rc, _, err = cli(capsys, *argv)
    assert_one_line_error(rc, err, *fragments)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file.txt", "schema.json"], "wrote before failing"


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
    out = run("demo", "elementwise", "--out", str(tmp_path / "e.png"), env={**ENV, "KERNELS_LAB_BACKEND": "ptx"})
    assert_one_line_error(out.returncode, out.stderr, "ptx compiles kernels but cannot launch", "gpu or sim")


def test_doctor_says_what_runs_and_what_is_skipped(capsys):
    from kernels_lab import capabilities
    rc, out, _ = cli(capsys, "doctor")
    assert rc in (0, 1)
    assert "[runs   ] correctness, launch counts, traced bytes" in out
    ptx = capabilities.ptx_compile(probe=True)
    assert f"[{'runs' if ptx.available else 'skipped':<7}] PTX compile for sm_75 / sm_80 / sm_90" in out
    assert ptx.detail in out
    for feature in ("grid sync across blocks", "Programmatic Dependent Launch", "Nsight Compute DRAM bytes",
                    "compute-sanitizer"):
        assert f"] {feature}" in out


@pytest.mark.parametrize("name", ["launch", "consumer", "pdl"])
def test_every_other_demo_runs_on_the_simulator(name, tmp_path, capsys):
    rc, out, err = cli(capsys, "demo", name, "--out", tmp_path / f"{name}.png", "--json", tmp_path / f"{name}.json")
    assert rc == 0, err
    assert "backend:" in out and "simulator" in out.lower()
