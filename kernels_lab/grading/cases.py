"""The runs a child makes: every (case, launch configuration, schedule) of an exercise, with fresh inputs.

A run is a plain dict (what the child is sent, plus the Case it came from); build_cases makes them,
run_key names one across children, describe_case names one in a message. A public case's inputs
come from its own seed; a hidden case's from that seed and one hidden seed drawn per grade.
"""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np

from ..core import Case, Exercise
from ..backend import BACKEND


def hidden_seed() -> int:
    """A seed for the hidden cases' inputs, drawn at grading time (in the parent): their values cannot be
    learnt from the repository or from an earlier grade, as GPU MODE's evaluator does."""
    return secrets.randbits(63)


def _case_rng(case: Case, offset: int, fresh: int) -> np.random.Generator:
    key = case.seed * 7919 + offset
    return np.random.default_rng([key, fresh] if case.hidden else key)


def build_cases(exercise: Exercise, public_only: bool = False, perturbed: bool | None = None,
                probes: bool = True, leave_out: frozenset[tuple[int, int]] = frozenset(),
                hidden: int | None = None) -> list[dict[str, Any]]:
    """Every (case, launch configuration, schedule) the child runs, with fresh inputs; but the runs
    whose run_key is in leave_out (with their schedules).

    Inputs: a public case's come from its own seed (a student can reproduce them); a hidden case's
    (and its probe's) from that seed and `hidden` (default: a fresh hidden_seed(); pass one to give
    several children of one grade the same hidden inputs). make_inputs puts the workload's hard
    inputs (core.HardInput) in every size that can hold them.

    role: "plain" (graded), "perturbed" (the same inputs under a perturbed thread schedule:
    races show as results that differ between schedules; simulator only), "probe" (the
    workload's symmetric inputs) and "twin" (asymmetric inputs at the probe's size and
    configuration: "symmetric inputs would have hidden this" is said only when the probe
    passes and its twin fails). Probes, twins and perturbed runs are never graded themselves.
    """
    if exercise.kind == "data":  # the judge says what each case calls the entry with: no inputs, no probes
        judge = load_judge(exercise)
        return [{"id": k, "case": case, "config_index": 0, "inputs": {}, "output_specs": {}, "perturb_seed": None,
                 "config": None, "role": "plain", "of": None, "job": judge.job(case)}
                for k, case in enumerate(c for i, c in enumerate(exercise.cases)
                                         if not (public_only and c.hidden) and (i, 0) not in leave_out)]
    cases = []
    workload = exercise.spec
    configs = exercise.configs or (None,)
    # interleavings are perturbed by the simulator's tracer (one Python thread per GPU thread)
    seeds = exercise.race_seeds if (BACKEND.can_trace if perturbed is None else perturbed) else ()
    fresh = hidden_seed() if hidden is None else hidden
    for i, case in enumerate(exercise.cases):
        if public_only and (case.hidden or case.probe):
            continue
        if case.probe and (not probes or workload.symmetric_inputs is None):
            continue
        for c, config in enumerate(configs):
            if (i, c) in leave_out:
                continue
            rng = _case_rng(case, c, fresh)
            inputs = (workload.symmetric_inputs if case.probe else workload.make_inputs)(case.size, rng)
            entry = {"id": len(cases), "case": case, "config_index": c, "inputs": inputs,
                     "output_specs": workload.output_specs(case.size), "perturb_seed": None,
                     "config": config(case.size) if config else None, "role": "probe" if case.probe else "plain",
                     "of": None}
            cases.append(entry)
            if case.probe:
                twin_rng = _case_rng(case, c + 104729, fresh)
                cases.append({**entry, "id": len(cases), "role": "twin", "of": entry["id"],
                              "inputs": workload.make_inputs(case.size, twin_rng)})
                continue
            for seed in seeds if not case.hidden else ():
                cases.append({**entry, "id": len(cases), "perturb_seed": seed, "role": "perturbed",
                              "of": entry["id"]})
    return cases


def run_key(exercise: Exercise, c: dict[str, Any]) -> tuple[int, int]:
    """A run's identity across children (ids are positions in one child's list, which differ between
    the grade's run and a sanitizer's): the index of its case in the exercise, its configuration
    (what build_cases's leave_out names)."""
    return next(k for k, case in enumerate(exercise.cases) if case is c["case"]), c["config_index"]


def describe_case(c: dict[str, Any]) -> str:
    """'n=257, config (2, 128)' (+ the schedule seed): how a message names one run."""
    if c.get("job"):
        return str(c["job"].get("about") or c["case"].size)
    text = f"{c['case'].size}"
    if c.get("config") is not None:
        text += f", config {tuple(c['config'])}"
    if c.get("perturb_seed") is not None:
        text += f", perturbed schedule seed {c['perturb_seed']}"
    if c.get("role") == "probe":
        text += ", symmetric inputs"
    return text


def load_judge(exercise: Exercise) -> Any:
    """The judge of a "data" exercise ("module:attribute"): job(case), run(value, job) in the
    child, score(case, job, got) -> [(check, ok or None, message)] in the parent."""
    from .speed import load_reference
    return load_reference(exercise.judge)


def speed_job(exercise: Exercise) -> dict[str, Any]:
    """What the speed run is given. The submission's child compiles its kernel for these argument types
    and hands the image over (speed.export); the clean timing process (timing_child) is given the same
    and, from the parent only (speed.timed), the seed of its inputs and the output indices to send back."""
    spec, tol = exercise.speed, exercise.tol()
    return {"workload": exercise.workload, "size": spec.size, "config": exercise.configs[0](spec.size), "reference": spec.reference,
            "reference_config": spec.reference_config(spec.size), "reps": spec.reps,
            "argument_order": exercise.arguments(spec.size), "rtol": float(tol.rtol), "atol": float(tol.atol)}


def speed_inputs(workload: str, size: Any, seed: int, input_set: int) -> dict[str, Any]:
    """The inputs of one of the speed run's two sets (timing_child makes them; the parent checks with them)."""
    from ..core import get_workload
    return get_workload(workload).make_inputs(size, np.random.default_rng([seed, input_set]))
