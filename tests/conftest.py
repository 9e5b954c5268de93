"""Tests run on numba's CUDA simulator unless KERNELS_LAB_BACKEND says otherwise.

The back-end must be chosen before numba is imported, so it is set here, at collection.
On a GPU machine: KERNELS_LAB_BACKEND=gpu python -m pytest -m gpu
"""

import os
import sys

os.environ.setdefault("KERNELS_LAB_BACKEND", "sim")
sys.setswitchinterval(5e-5)  # simulated threads hand over the GIL sooner: barriers run ~10x faster

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import kernels_lab  # noqa: E402,F401  (decides the back-end)
from kernels_lab.runtime import ON_GPU  # noqa: E402


def pytest_collection_modifyitems(config, items):
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
