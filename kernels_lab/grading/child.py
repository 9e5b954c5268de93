"""The child side of the sandbox: import the submission, run it on the given inputs, report.

    python -m kernels_lab.grading.child JOB.pkl REPORT.pkl

The child never sees a reference or a verdict: it gets inputs, and returns outputs, launch
counts, traced bytes and last writers. Everything it reports is checked by the parent.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback
from contextlib import nullcontext
import types
import warnings


def _describe(exc: BaseException) -> dict:
    tb = traceback.extract_tb(exc.__traceback__)
    student = [f for f in tb if f.filename == "<submission>"]
    where = f"line {student[-1].lineno}" if student else ""
    return {"type": type(exc).__name__, "message": str(exc)[:2000], "where": where,
            "traceback": "".join(traceback.format_exception(exc))[-4000:]}


def run_case(entry, kind: str, argument_order, case: dict) -> dict:
    """Run the student's code once on a case's inputs: outputs, launches, traced bytes, writers."""
    from kernels_lab.arrays import poisoned, to_device
    from kernels_lab.profile.launch_hook import count_launches
    from kernels_lab.runtime import ON_SIMULATOR, cuda

    result = {"id": case["id"], "outputs": None, "error": None, "launches": None, "bytes": None,
              "last_writer": None}
    try:
        dev_in = to_device(case["inputs"])
        dev_out = poisoned(case["output_specs"])
        args = [dev_out[k] if k in dev_out else dev_in[k] for k in argument_order]
        tracer = nullcontext()
        if ON_SIMULATOR:
            from kernels_lab.profile.trace import tracing
            tracer = tracing(writers=True, perturb_seed=case.get("perturb_seed"), yield_probability=0.5)
        with count_launches() as seen, tracer as trace:
            if kind == "kernel":
                grid, block = case["config"]
                entry[grid, block](*args)
            else:
                entry(*args)
        if not ON_SIMULATOR:
            cuda.synchronize()
        result["outputs"] = {k: v.copy_to_host() for k, v in dev_out.items()}
        result["launches"] = [(r.kernel, r.grid, r.block) for r in seen]
        if trace is not None:
            result["bytes"] = trace.bytes_total
            result["last_writer"] = dict(trace.last_writer)
    except (Exception, SystemExit) as e:  # noqa: BLE001  (a failing run is a graded outcome)
        result["error"] = _describe(e)
    return result


def main(job_path: str, report_path: str) -> int:
    sys.setswitchinterval(5e-5)  # simulated threads hand over the GIL sooner
    warnings.simplefilter("ignore")  # numba's performance warnings never cost points
    with open(job_path, "rb") as f:
        job = pickle.load(f)
    os.unlink(job_path)  # the inputs stay in memory only
    report = {"nonce": job["nonce"], "import_error": None, "cases": []}

    def save():
        tmp = report_path + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump(report, f)
        os.replace(tmp, report_path)

    import numpy as np

    from kernels_lab.runtime import cuda

    module = types.ModuleType("submission")
    module.__dict__.update({"cuda": cuda, "np": np, "numpy": np, "math": __import__("math")})
    try:
        exec(compile(job["source"], "<submission>", "exec"), module.__dict__)
        entry = module.__dict__.get(job["entry"])
        if entry is None:
            raise NameError(f"the submission defines no {job['entry']!r}")
        if job["kind"] == "kernel" and not hasattr(entry, "py_func"):
            raise TypeError(f"{job['entry']} must be a @cuda.jit kernel, got {type(entry).__name__}")
    except (Exception, SystemExit) as e:  # noqa: BLE001  (a broken submission is a graded outcome)
        report["import_error"] = _describe(e)
        save()
        return 0
    save()  # an import that worked is on record even if a case then hangs

    for case in job["cases"]:
        report["cases"].append(run_case(entry, job["kind"], job["argument_order"], case))
        save()
    if job.get("speed"):
        report["speed"] = run_speed(entry, job["argument_order"], job["speed"])
        save()
    return 0


def run_speed(entry, argument_order, spec: dict) -> dict:
    """Time the student's kernel against the reference, interleaved (GPU): times and the student's output."""
    from kernels_lab.arrays import poisoned, to_device
    from kernels_lab.grading.speed import load_reference, measure
    try:
        dev_in = to_device(spec["inputs"])
        mine, theirs = poisoned(spec["output_specs"]), poisoned(spec["output_specs"])
        args = [[outs[k] if k in outs else dev_in[k] for k in argument_order] for outs in (mine, theirs)]
        times = measure(entry, load_reference(spec["reference"]), *args, spec["config"], spec["reference_config"],
                        spec["reps"])
        idx = spec["check_indices"]
        return {**times, "outputs": {k: v.copy_to_host().reshape(-1)[idx] for k, v in mine.items()}, "error": None}
    except Exception as e:  # noqa: BLE001  (a kernel that fails here loses the speed check only)
        return {"error": _describe(e)}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
