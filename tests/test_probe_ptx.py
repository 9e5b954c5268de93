"""grading.probe_ptx: a student's device functions sent to a child as data, rebuilt there on the PTX back-end
inside a judge's probe kernel and compiled by numba's real compiler: the compile gate of every data exercise."""

import math

import numpy as np
import pytest
from numba import types

from kernels_lab import capabilities
from kernels_lab.grading.probe_ptx import Probe, compile_probes, portable, rebuild, rejection, where_not_compiled
from kernels_lab.runtime import ON_SIMULATOR, cuda
from kernels_lab.topics.layernorm.welford import merge_kernel

PARTIALS = types.Array(types.float32, 2, "C")
HELPER = """
HALF = np.float32(0.5)


@cuda.jit(device=True)
def mid(a, b):
    return (a + b) * HALF


@cuda.jit(device=True)
def combine(na, ma, qa, nb, mb, qb):
    return na + nb, mid(ma, mb), qa + qb
"""
LIST = HELPER.replace("return na + nb, mid(ma, mb), qa + qb", "box = [ma, mb]\n    return na + nb, box[0], qa + qb")
OWN_CLASS = HELPER.replace("HALF = np.float32(0.5)", "class Half:\n    pass\n\n\nHALF = Half()")
ENDS_THE_CHILD = HELPER.replace("HALF = np.float32(0.5)", """import os


class Half:  # sent as a call of os._exit, made where the value is rebuilt
    def __reduce__(self):
        return (os._exit, (3,))


HALF = Half()""")
RECURSIVE = """
@cuda.jit(device=True)
def combine(na, ma, qa, nb, mb, qb):
    return combine(na, ma, qa, nb, mb, qb)
"""


def _combine(source: str):
    space = {"cuda": cuda, "np": np, "math": math}
    exec(compile(source, "<submission>", "exec"), space)
    return space["combine"]


def _probe(source: str) -> dict[str, Probe]:
    return {"merge": Probe(merge_kernel, (_combine(source),), (PARTIALS, PARTIALS, PARTIALS))}


needs_compiler = pytest.mark.skipif(not capabilities.ptx_libraries().available,
                                    reason="no numba compiler here (NVVM / NVRTC)")


def test_a_function_travels_with_its_helpers_and_constants():
    rebuilt = rebuild(portable(_combine(HELPER)))
    assert rebuilt.py_func(np.float32(2), np.float32(1), np.float32(0), np.float32(3), np.float32(5),
                           np.float32(1)) == (5, 3, 1)


def test_a_recursive_function_is_refused_before_any_child():
    got = compile_probes(_probe(RECURSIVE))
    assert got["merge"]["status"] == "rejected" and "calls itself" in got["merge"]["message"]


@needs_compiler
def test_what_compiles_gives_its_ptx_and_what_numba_refuses_gives_its_words():
    got = compile_probes({**_probe(HELPER), "list": _probe(LIST)["merge"]})
    assert got["merge"]["status"] == "compiled" and ".entry" in got["merge"]["ptx"], got
    assert got["list"]["status"] == "rejected", got
    assert "NRT required" in got["list"]["message"] and "cuda.local.array" in got["list"]["message"]
    assert rejection(got) == got["list"]["message"] and rejection({"merge": got["merge"]}) is None


@needs_compiler
@pytest.mark.parametrize("source, says", [(OWN_CLASS, "uses a Half, which cannot be compiled"),
                                          (ENDS_THE_CHILD, "ended while it rebuilt or compiled your function")])
def test_a_value_that_cannot_travel_is_the_functions_fault_never_a_skipped_gate(source, says):
    got = compile_probes(_probe(source))["merge"]
    assert got["status"] == "rejected" and says in got["message"], got


@needs_compiler
def test_the_simulator_compiles_and_a_gpu_leaves_it_to_the_launch():
    got = where_not_compiled(_probe(LIST))
    if ON_SIMULATOR:
        assert rejection(got) is not None
    else:
        assert got == {}
