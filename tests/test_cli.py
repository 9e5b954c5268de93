import json
import os
import subprocess
import sys

import pytest

ENV = {**os.environ, "KERNELS_LAB_BACKEND": "sim"}


def run(*args, cwd=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "kernels_lab.cli", *args], capture_output=True, text=True,
                          env=ENV, cwd=cwd, timeout=timeout)


def test_help_teaches():
    out = run("--help")
    assert out.returncode == 0 and "demo elementwise" in out.stdout and "KERNELS_LAB_BACKEND" in out.stdout


def test_list_names_every_variant_with_pattern_and_launches():
    out = run("list")
    assert out.returncode == 0, out.stderr
    for line in ("unfused       unfused     3 launch", "fused         fused       1 launch",
                 "persistent    persistent  1 launch"):
        assert line in out.stdout


def test_demo_elementwise_end_to_end(tmp_path):
    out = run("demo", "elementwise", "--out", str(tmp_path / "e.png"), "--json", str(tmp_path / "e.json"))
    assert out.returncode == 0, out.stderr
    assert "timings are not available" in out.stdout and "2.33x fewer" in out.stdout
    doc = json.loads((tmp_path / "e.json").read_text())
    assert doc["meta"]["backend"] == "simulator"
    rec = {r["variant"]: r for r in doc["records"]}
    assert rec["unfused"]["launches"] == 3 and rec["fused"]["launches"] == 1
    assert all(r["bytes_traced"] == r["bytes_model"] for r in doc["records"])
    assert (tmp_path / "e.png").stat().st_size > 10_000


def test_demo_list_and_unknown_names():
    assert "elementwise" in run("demo", "--list").stdout
    bad = run("demo", "nosuch")
    assert bad.returncode == 2 and "unknown demo" in bad.stderr
    bad = run("profile", "nosuch", "--json", os.devnull)
    assert bad.returncode == 2 and "unknown workload 'nosuch'" in bad.stderr


@pytest.mark.parametrize("content,message", [("{", "not valid JSON"), ('{"schema": "x"}', "schema")])
def test_plot_rejects_bad_results(tmp_path, content, message):
    p = tmp_path / "r.json"
    p.write_text(content)
    out = run("plot", str(p), "--out", str(tmp_path))
    assert out.returncode == 2 and message in out.stderr


def test_profile_on_the_simulator_writes_traced_bytes(tmp_path):
    out = run("profile", "elementwise", "--sizes", "5,2^6", "--json", str(tmp_path / "p.json"))
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "p.json").read_text())
    assert sorted({r["n"] for r in doc["records"]}) == [5, 64]
    assert all(r["bytes_traced"] == r["bytes_model"] and r["time_ms"] is None for r in doc["records"])


def test_ladder_needs_a_gpu():
    out = run("profile", "launch", "--json", os.devnull)
    assert out.returncode == 2 and "needs a GPU" in out.stderr


@pytest.mark.parametrize("name", ["launch", "consumer", "pdl"])
def test_every_other_demo_runs_on_the_simulator(name, tmp_path):
    out = run("demo", name, "--out", str(tmp_path / f"{name}.png"), "--json", str(tmp_path / f"{name}.json"))
    assert out.returncode == 0, out.stderr
    assert "backend:" in out.stdout and ("simulator" in out.stdout.lower())
