"""Tests run on numba's CUDA simulator unless KERNELS_LAB_BACKEND says otherwise.

The back-end must be chosen before numba is imported, so it is set here, at collection.
On a GPU machine: KERNELS_LAB_BACKEND=gpu python -m pytest -m gpu
"""

import os
import sys

os.environ.setdefault("KERNELS_LAB_BACKEND", "sim")
# simulated threads hand over the GIL sooner than Python's 5 ms: barriers run ~10x faster. 0.2 ms, not 0.05 ms:
# with two xdist workers on two cores, tests/test_softmax.py + test_clusters.py took 38-43 s at 2e-4 against
# 57-60 s at 5e-5 (54 s at 1e-4, 52 s at 1e-3, 78 s at 5e-3): each hand-over costs an OS thread switch
sys.setswitchinterval(2e-4)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import kernels_lab  # noqa: E402,F401  (decides the back-end)
from kernels_lab.runtime import ON_GPU  # noqa: E402


# The modules whose tests are the longest (measured with --durations on two cores: lessons run top to bottom,
# every study at its check sizes, every kernel compiled to PTX, the decode submissions graded): handed out
# first, so that the two xdist workers do not end with one of them alone on a long test.
LONGEST_FIRST = ("test_notebooks", "test_studies", "test_ptx", "test_grading_decode")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks (its worker plugin comes later, runs first)
def pytest_collection_modifyitems(config, items):
    _share_module_fixtures(items)
    first = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: first.get(getattr(getattr(item, "module", None), "__name__", "").rpartition(".")[2], len(first)))
    if ON_GPU:
        return
    skip = pytest.mark.skip(reason="needs a real GPU (KERNELS_LAB_BACKEND=gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng(request):
    # A fresh, test-specific seed: inputs differ between tests, and a failure names its seed.
    seed = int(os.environ.get("KERNELS_LAB_TEST_SEED", abs(hash(request.node.nodeid)) % (2**32)))
    request.node.add_report_section("setup", "seed", f"rng seed {seed}: rerun with KERNELS_LAB_TEST_SEED={seed}")
    return np.random.default_rng(seed)


def _share_module_fixtures(items):
    """Under `--dist loadgroup` (pyproject's addopts): the tests that share a module-scoped fixture of this
    suite (one param of it) go to one xdist worker, so the fixture is made once, not once per worker that
    drew one of its tests (test_studies' softmax study run is 25 s, test_site's mkdocs build 12 s, test_ptx's
    compiling child a numba start-up). A test without such a fixture is its own group: spread as by `load`."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        for name in info.names_closure:
            defs = info.name2fixturedefs.get(name)
            if not defs or defs[-1].scope != "module" or not str(defs[-1].baseid).startswith("tests/"):
                continue
            callspec = getattr(item, "callspec", None)
            param = callspec.params.get(name, "") if callspec is not None else ""
            item.add_marker(pytest.mark.xdist_group(f"{item.module.__name__}:{name}:{param}"))
            break
