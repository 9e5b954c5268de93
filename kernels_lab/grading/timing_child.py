"""The speed run, in a process where the submission's Python never ran (GPU only).

    python -m kernels_lab.grading.timing_child JOB.pkl REPORT.json PROGRESS.json

The submission's child hands over only its compiled kernel: the cubin numba linked for the speed
size's argument types, and its entry name (speed.export). This process loads that image with the
driver, makes the inputs itself (two sets from seeds the parent drew), and times the kernel against
the reference, interleaved, with the grader's own code: no module-level code of the submission can
wrap a timing function here. Each repetition, outside the timed region:

    both outputs filled with numbers that are not the answer (different in every repetition)
    ->  L2 flushed  ->  event, launch, event  ->  (the reference the same)  ->  the student's output
    compared with the reference's, element by element, on the device

so a kernel that skips elements already holding a number, or answers from an earlier repetition,
is wrong in a timed run and loses the speed point (the report names the first such repetition).
The argument layout is numba's for these types: the reference kernel (compiled here, for the same
types) flattens the arguments, and both kernels are launched through cuda.core with such parameters.
numba-cuda 0.30 internals used here (as in launch_paths): _Kernel._prepare_args, _codelibrary.get_cufunc,
Context.create_module_image; tests/test_grading_adversarial.py fails loudly if they move.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import traceback
from typing import Any

from ..runtime import cuda

FILL_BASE = 1000.0  # what the outputs hold before a timed run: FILL_BASE * (rep + 1) + (index % 7)


@cuda.jit
def fill(buf, base):
    """What an output holds before a timed run: numbers, and not the answer."""
    i = cuda.grid(1)
    if i < buf.size:
        buf[i] = base + (i % 7)


@cuda.jit
def mismatches(got, want, rtol, atol, count):
    """count[0] += the elements of got that differ from want beyond the tolerance (a NaN always does)."""
    i = cuda.grid(1)
    if i < got.size:
        g, w = got[i] * 1.0, want[i] * 1.0
        if not abs(g - w) <= atol + rtol * abs(w):
            cuda.atomic.add(count, 0, 1)


def _launcher(kernel, args: list, config: tuple[int, int], compiled, hold: list):
    """A zero-argument cuda.core launch of `kernel` (a loaded cuda.core kernel) with numba's parameters for
    `args`, flattened by `compiled` (the reference's compiled form: the same argument types). Both kernels
    are launched this way, so neither pays numba's dispatch in its time."""
    from cuda.core import LaunchConfig, launch

    from ..launch_paths import core_stream
    params: list = []
    for ty, val in zip(compiled.argument_types, args):
        compiled._prepare_args(ty, val, 0, hold, params)
    hold.append(args)  # the arrays must outlive every launch
    stream = core_stream(0)
    grid, block = config
    launch_config = LaunchConfig(grid=(int(grid), 1, 1), block=(int(block), 1, 1))
    return lambda: launch(stream, launch_config, kernel, *params)


def measure(job: dict[str, Any]) -> dict[str, Any]:
    """Interleaved times of the student's image and the reference, each run checked (see the module)."""
    import numpy as np

    from ..arrays import to_device
    from ..core import get_workload
    from ..instrument.timing import L2Flusher, TimingUnavailable
    from ..launch_paths import compiled_for
    from .cases import speed_inputs
    from .speed import load_reference
    from ..backend import BACKEND
    if not BACKEND.can_time:
        raise TimingUnavailable("the speed run loads a compiled kernel and times it with CUDA events: a GPU only")
    size = job["size"]
    sets = [to_device(speed_inputs(job["workload"], size, job["seed"], k)) for k in range(2)]
    specs = get_workload(job["workload"]).output_specs(size)
    outs = {who: {k: cuda.device_array(shape, dtype=np.dtype(dt)) for k, (shape, dt) in specs.items()}
            for who in ("student", "reference")}
    order = job["argument_order"]

    def args(who, k):
        return [outs[who][a] if a in outs[who] else sets[k][a] for a in order]
    from cuda.core import ObjectCode
    reference = load_reference(job["reference"])
    compiled = compiled_for(reference, tuple(args("reference", 0)))
    hold: list = []
    # the student's image, loaded as numba loads its own; the reference's, as numba linked it here
    module = cuda.current_context().create_module_image(ObjectCode.from_cubin(bytes(job["image"])))
    hold.append(module)
    theirs, ours = module.get_function(job["entry_name"]).kernel, compiled._codelibrary.get_cufunc().kernel
    students = [_launcher(theirs, args("student", k), job["config"], compiled, hold) for k in range(2)]
    refs = [_launcher(ours, args("reference", k), job["reference_config"], compiled, hold) for k in range(2)]
    flat = {who: [a.reshape(a.size) for a in outs[who].values()] for who in outs}
    count = cuda.to_device(np.zeros(1, np.int64))
    rtol, atol = job["rtol"], job["atol"]

    def prepare(who, rep):
        for a in flat[who]:
            fill[max(1, -(-a.size // 256)), 256](a, a.dtype.type(FILL_BASE * (rep + 1)))

    for k in range(2):  # warm-up: modules loaded, the reference compiled
        students[k]()
        refs[k]()
    cuda.synchronize()
    flusher = L2Flusher()
    start, end = cuda.event(), cuda.event()
    times = {"student": [], "reference": []}
    wrong: list[list[int]] = []  # [repetition, mismatching elements]
    for rep in range(job["reps"]):
        k = rep % 2
        for who, run in (("student", students[k]), ("reference", refs[k])):
            prepare(who, rep)
            flusher()
            start.record()
            run()
            end.record()
            end.synchronize()
            times[who].append(start.elapsed_time(end))
        count.copy_to_device(np.zeros(1, np.int64))
        for got, want in zip(flat["student"], flat["reference"]):
            mismatches[max(1, -(-got.size // 256)), 256](got, want, rtol, atol, count)
        bad = int(count.copy_to_host()[0])
        if bad:
            wrong.append([rep, bad])
    last = (job["reps"] - 1) % 2
    idx = job["check_indices"]
    return {"student_ms": times["student"], "reference_ms": times["reference"], "wrong_reps": wrong,
            "input_set": last, "outputs": {k: v.copy_to_host().reshape(-1)[idx] for k, v in outs["student"].items()},
            "error": None}


def main(job_path: str, report_path: str, progress_path: str) -> int:
    with open(job_path, "rb") as f:
        job = pickle.load(f)
    os.unlink(job_path)

    def write(path, doc):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, path)
    from .records import encode
    write(progress_path, {"phase": "speed", "case": None, "step": 1})
    try:
        report = measure(job)
    except Exception as e:  # noqa: BLE001  (an image that does not load or launch loses the speed point only)
        report = {"error": {"type": type(e).__name__, "message": str(e)[:2000], "where": "",
                            "traceback": traceback.format_exc()[-4000:]}}
    write(report_path, encode({"nonce": job["nonce"], **report}))
    write(progress_path, {"phase": "done", "case": None, "step": 2})
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
