"""Lesson 08's register table: the occupancy arithmetic, the committed file against the kernels the variants
launch today, and one kernel recompiled through ptxas (sm_90, no GPU) giving the committed count."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from kernels_lab import capabilities, lessons
from kernels_lab.topics.layernorm import registers as R

COMMITTED = lessons.DATA / "compiled" / "layernorm_registers_sm90.json"


@pytest.mark.parametrize("registers,threads,shared,blocks,limit", [
    (32, 64, 0, 32, "registers and threads and blocks"),  # 2048 registers a block: 32 fit, and 32 x 64 threads
    (46, 64, 0, 21, "registers"),     # 48 a thread after rounding to 256 a warp: 3072 a block
    (39, 512, 0, 3, "registers"),     # 40 a thread: 20480 a block
    (16, 1024, 0, 2, "threads"),
    (16, 32, 100_000, 2, "shared memory"),
])
def test_blocks_per_sm(registers, threads, shared, blocks, limit):
    assert R.blocks_per_sm(registers, threads, shared) == (blocks, limit)


def test_the_committed_counts_give_the_committed_occupancy():
    for r in json.loads(COMMITTED.read_text())["records"]:
        shared = r["shared_bytes"] + r.get("dynamic_shared_bytes", 0)  # the staged kernels' stages
        assert (r["blocks_per_sm"], r["limited_by"]) == R.blocks_per_sm(r["registers"], r["threads"], shared)
        assert r["threads_per_sm"] == r["blocks_per_sm"] * r["threads"]


# in a child on the PTX back-end: the GPU's layouts (the simulator's cluster layouts are smaller), numba's compiler
_CHILD = """
import json
from kernels_lab.topics.layernorm import registers as R
from kernels_lab.topics.layernorm.study import LONG, SHAPES
kernels = [(s.cols, v, k.py_func.__name__, block) for s in SHAPES + LONG
           for v, k, block, _, _ in R.kernels_at(s.cols, staged=s in LONG)]
_, k, block, _, _ = next(v for v in R.kernels_at(8192) if v[0] == "persistent")
_, cl, cl_block, _, _ = next(v for v in R.kernels_at(32768) if v[0] == "cluster")  # its launch bound asks 2 blocks
print(json.dumps({"kernels": kernels, "registers": R.usage(k, block)["registers"],
                  "cluster": R.usage(cl, cl_block)}))
"""


@pytest.mark.skipif(shutil.which("ptxas") is None or not capabilities.ptx_libraries().available,
                    reason="needs ptxas and numba's compiler (the cu13 extra)")
def test_the_committed_table_is_todays_kernels_and_ptxas_count():
    doc = json.loads(COMMITTED.read_text())
    env = {**os.environ, "KERNELS_LAB_BACKEND": "ptx"}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    got = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    today = json.loads(got.stdout.strip().splitlines()[-1])
    committed = {(r["size"]["cols"], r["variant"], r["kernel"], r["threads"]) for r in doc["records"]}
    assert committed == {tuple(k) for k in today["kernels"]}, "the kernels changed: rerun " + doc["meta"]["command"]
    want = next(r for r in doc["records"] if r["variant"] == "persistent" and r["size"]["cols"] == 8192)
    assert today["registers"] == want["registers"]
    want = next(r for r in doc["records"] if r["variant"] == "cluster" and r["size"]["cols"] == 32768)
    assert (today["cluster"]["registers"], today["cluster"]["spill_bytes"]) == (want["registers"], want["spill_bytes"])
    assert want["registers"] <= 64  # the launch bound (512 threads, 2 blocks an SM) reached ptxas
