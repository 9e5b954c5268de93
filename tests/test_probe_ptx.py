"""grading.probe_ptx: a student's device functions sent to a child as data, rebuilt there on the PTX back-end
inside a judge's probe kernel and compiled by numba's real compiler: the compile gate of every data exercise."""

import math
import subprocess
import sys

import numpy as np
import pytest
from numba import types

from kernels_lab import capabilities
from kernels_lab.grading.probe_ptx import (Probe, compile_probes, launch_failure, portable, rebuild, rejection,
                                          where_not_compiled)
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


class Half:  # were it pickled: a call of os._exit where the value is rebuilt
    def __reduce__(self):
        return (os._exit, (3,))


HALF = Half()""")
# found by an attack on the gate (12-07): each compiled other code than the simulator ran, or skipped the gate
TRUE_FLAG = LIST.replace("    box = [ma, mb]",
                         "    if PYTHON:\n        box = [ma, mb]\n    else:\n        box = (ma, mb)")\
    .replace("HALF = np.float32(0.5)", "HALF = np.float32(0.5)\nPYTHON = True  # the same object as a kernels_lab flag")
NAMED_LIKE_THE_TOOLCHAIN = LIST.replace("box", "libnvvm")  # "libnvvm" in numba's words is no missing library
FAKE = HELPER + """

class Fake:  # looks like a device function (py_func), runs as Python on the simulator
    py_func = mid.py_func
    _device = True

    def __call__(self, na, ma, qa, nb, mb, qb):
        return [na + nb, ma, qa][0], ma, qa


combine = Fake()
"""
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


DIAMOND = HELPER.replace("return na + nb, mid(ma, mb), qa + qb", "return na + nb, mid(ma, mb), mid(qa, qb)")\
    .replace("    return (a + b) * HALF", "    return (a + b) * HALF\n\n\n@cuda.jit(device=True)\ndef both(a, b):\n"
             "    return mid(a, b) + mid(b, a)")


@needs_compiler
@pytest.mark.parametrize("source, says", [
    (OWN_CLASS, "mid uses a Half. A device function may use numbers"),
    (ENDS_THE_CHILD, "mid uses a Half"),  # never pickled: nothing of it runs in the compiler's process
    (TRUE_FLAG, "NRT required"),          # True is sent as True, not as the flag it is the same object as
    (NAMED_LIKE_THE_TOOLCHAIN, "NRT required"),
    (FAKE, "a Fake is not a @cuda.jit(device=True) function")])
def test_what_no_gpu_compiles_is_refused_by_the_gate_never_skipped(source, says):
    got = compile_probes(_probe(source))["merge"]
    assert got["status"] == "rejected" and says in got["message"], got


@needs_compiler
def test_a_helper_two_functions_share_is_no_recursion():
    got = compile_probes(_probe(DIAMOND.replace("mid(qa, qb)", "both(qa, qb)")))["merge"]
    assert got["status"] == "compiled", got


@needs_compiler
def test_the_compilers_process_starts_as_the_grader_started(monkeypatch):
    monkeypatch.setattr(sys, "executable", "/bin/true")  # a submission's doing, in the grader's child
    monkeypatch.setenv("PYTHONHOME", "/nonexistent")
    assert compile_probes(_probe(LIST))["merge"]["status"] == "rejected"


def test_a_gpu_launch_numba_refuses_is_worded_as_the_gates_refusal():
    from numba.core.errors import NumbaError
    # a GPU's launch error as the H100 gave it (figures/data/grades_welford_study_gpu_h100.txt): terminal colours
    raw = ("Failed in cuda mode pipeline (step: nopython frontend)\n\x1b[1m\x1b[1mFailed in cuda mode pipeline (step: "
           "cuda native lowering)\n\x1b[1mNRT required but not enabled\x1b[0m\n\x1b[1mDuring: lowering \"$42build_list"
           ".3 = build_list(items=[Var($binop_sub38.2, <submission>:7)])\" at <submission> (7)\x1b[0m")
    got = launch_failure(NumbaError(raw), "welford.py")
    assert got["rejected"] and "\x1b" not in got["error"], got
    assert "NRT required" in got["error"] and "cuda.local.array" in got["error"]  # the hint the simulator's gate gives
    other = launch_failure(ZeroDivisionError("float division by zero\nsecond line"), "welford.py")
    assert other == {"error": "ZeroDivisionError: float division by zero", "rejected": False}


@needs_compiler
def test_a_job_compiled_once_is_answered_again_without_a_child(monkeypatch):
    first = compile_probes(_probe(LIST))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("a second child for the same job"))
    assert compile_probes(_probe(LIST)) == first


@needs_compiler
def test_a_refusal_quotes_the_students_line_from_the_source_the_grading_child_holds(monkeypatch):
    import linecache
    monkeypatch.setitem(linecache.cache, "<submission>", (len(LIST), None, LIST.splitlines(True), "<submission>"))
    got = compile_probes(_probe(LIST + "\n"))["merge"]  # a job of its own (the cache holds LIST's)
    assert got["status"] == "rejected" and "box = [ma, mb]" in got["message"], got


@pytest.fixture(autouse=True)
def _no_answer_from_an_earlier_test(monkeypatch):
    """Each test's jobs go to a child of their own: the per-process cache starts empty."""
    import kernels_lab.grading.probe_ptx as pp
    monkeypatch.setattr(pp, "_COMPILED", {})


SUBCLASS_FORGES = HELPER.replace("HALF = np.float32(0.5)", """import os


class Half(float):  # a float to an isinstance test: were it pickled, its __reduce__ would run in the compiler
    def __reduce__(self):
        return (os._exit, (3,))


HALF = Half(0.5)""")


@pytest.mark.parametrize("source", [SUBCLASS_FORGES, SUBCLASS_FORGES.replace("(float)", "(int)").replace("0.5", "1"),
                                    SUBCLASS_FORGES.replace("(float)", "(tuple)").replace("Half(0.5)", "Half((1,))")])
def test_a_subclass_of_a_number_is_refused_never_pickled(source):
    with pytest.raises(ValueError, match="uses a Half"):
        portable(_combine(source))


@needs_compiler
def test_the_compilers_process_builds_numbas_types_and_nothing_else():
    import pickle
    from kernels_lab.grading.probe_ptx import _GradersData
    import io
    with pytest.raises(pickle.UnpicklingError, match="only numba's types"):
        _GradersData(io.BytesIO(pickle.dumps({"merge": {"x": print}}))).load()
    assert _GradersData(io.BytesIO(pickle.dumps(PARTIALS))).load() == PARTIALS
