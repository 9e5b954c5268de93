"""The PDL switches of a group of kernels, judged by what PDL promises (lesson 06).

A group of G kernels (topics/pdl/workload.py's members) runs between an EARLIER kernel
that wrote the group's inputs and a LATER kernel that reads its outputs. Neither is ours, so
the worst is assumed of both: the earlier kernel may trigger at its start, the later one does
not wait. Every launch carries the PDL attribute (programmatic stream serialization). Member k
has three switches, compiled in (quantize_group.make_quantize_kernel), in this order:

    wait      griddepcontrol.wait before it reads anything
    trigger   griddepcontrol.launch_dependents, right after that wait (if any)
    order     griddepcontrol.wait once more at its end

What PDL promises (what this module assumes, with one thing more, below):
  - a kernel launched with the attribute may start once every block of the kernel before it in
    the stream has triggered or exited (an exit counts as a trigger; a trigger is only a hint:
    the launch may come later, never earlier);
  - only griddepcontrol.wait promises that the kernel before has completed and that its writes
    are visible; starting late is not seeing its writes.

From these, `findings(switches)` builds the order the GPU must keep between the events of one
run (each member's launch, its first read, its trigger, its end; the earlier kernel's writes
becoming visible; the later kernel's launch) and reports
  - "too early": a member that may read the earlier kernel's writes before they are visible,
    or a tensor the later kernel may read while its member still writes it (a wrong result);
  - "serial": a boundary where a member cannot start before the member before it has finished
    (a right result, but the overlap PDL is for is lost).
One assumption beyond the promises: a later kernel that does not wait reads correctly once every
block of the member before it has exited without triggering (the project's rule 2; strictly the
CUDA guide promises visibility only after a wait, so a later kernel one writes oneself should wait).

`check_switches(rule)` is lesson 06's check: the rules above for several G, then one run of the
group with those switches (plain launches on the simulator, which has no PDL). `check_fastest`
and `check_grouped` are the lesson's other two checks.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

Switches = tuple[bool, bool, bool]  # (wait, trigger, order), as quantize_group.pdl_switches returns

EARLIER, LATER = "the earlier kernel", "the later kernel"


@dataclass(frozen=True)
class Finding:
    kind: str      # "too early" (a wrong result is possible) or "serial" (right, no overlap)
    member: int    # the member whose switch is the cause
    message: str


def _name(k: int) -> str:
    return f"quantize[{k}]"


def _names(ks: Sequence[int]) -> str:
    return ", ".join(map(_name, ks))


def _verb(ks: Sequence[int], one: str, many: str | None = None) -> str:
    """'launches' / 'launch' after one / several members (or the given plural)."""
    return (one + "es" if one.endswith("h") else one + "s") if len(ks) == 1 and many is None else \
        (one if len(ks) == 1 else (many or one))


def _validate(switches: Any, g: int | None = None) -> list[Switches]:
    if switches is None or switches is Ellipsis:
        raise ValueError("got None: return a list with one (wait, trigger, order) tuple per group member")
    try:
        rows = list(switches)
    except TypeError:
        raise ValueError(f"got {type(switches).__name__}: return a list of (wait, trigger, order) tuples") from None
    if g is not None and len(rows) != g:
        raise ValueError(f"{len(rows)} tuples for a group of G = {g}: one (wait, trigger, order) per member")
    if not rows:
        raise ValueError("an empty list: a group has at least one member")
    out = []
    for k, row in enumerate(rows):
        try:
            values = tuple(row)
        except TypeError:
            raise ValueError(f"member {k}: {row!r} is not a (wait, trigger, order) tuple") from None
        if len(values) != 3 or not all(v in (True, False) for v in values):  # 0/1 and numpy bools pass
            raise ValueError(f"member {k}: {row!r} is not three booleans (wait, trigger, order)")
        out.append(tuple(bool(v) for v in values))
    return out


def _happens_before(sw: list[Switches]) -> dict[str, set[str]]:
    """The edges a -> b ("a happens before b") that PDL and the kernels' code guarantee."""
    g = len(sw)
    edges: dict[str, set[str]] = {}

    def edge(a: str, b: str) -> None:
        edges.setdefault(a, set()).add(b)

    for k, (wait, trigger, order) in enumerate(sw):
        before = "visible" if k == 0 else f"end{k - 1}"   # what this member's waits wait for
        edge(f"launch{k}", f"read{k}")
        edge(f"read{k}", f"end{k}")
        if wait:
            edge(before, f"read{k}")
        if order:
            edge(before, f"end{k}")
        # the trigger point: right after the start wait, or (no trigger) the member's exit
        edge(f"read{k}" if trigger else f"end{k}", f"trig{k}")
        edge(f"trig{k}", f"launch{k + 1}" if k < g - 1 else "later")
    # nothing links the earlier kernel's writes becoming visible to member 0's launch: it may
    # trigger at its start, or exit before its writes are visible
    return edges


def _reach(edges: dict[str, set[str]], a: str) -> set[str]:
    seen, todo = {a}, [a]
    while todo:
        for b in edges.get(todo.pop(), ()):
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return seen


def findings(switches: Sequence[Sequence[bool]]) -> list[Finding]:
    """Everything wrong ("too early") or slow ("serial") about one group's switches."""
    sw = _validate(switches)
    g = len(sw)
    edges = _happens_before(sw)
    out: list[Finding] = []
    # 1. reads of the earlier kernel's writes
    after_visible = _reach(edges, "visible")
    early = [k for k in range(g) if f"read{k}" not in after_visible]
    if early:
        others = [k for k in early if k != 0]
        out.append(Finding("too early", 0, (
            f"{_name(0)} does not wait (wait=False): it may start as soon as {EARLIER} triggers or its blocks "
            f"exit, before that kernel's writes are visible (only griddepcontrol.wait promises them), so it may "
            f"read tensor 0 too early" + (f"; and {_names(others)} {_verb(others, 'launch')} from its trigger, so "
                                          f"{_verb(others, 'it', 'they')} may read too early as well" if others else ""))))
    # 2. the later kernel's reads of the group's outputs
    reaches_later = {k for k in range(g) if "later" in _reach(edges, f"end{k}")}
    read_early = [k for k in range(g) if k not in reaches_later]
    if read_early and sw[-1][1]:
        running = [k for k in read_early if k != g - 1]
        out.append(Finding("too early", g - 1, (
            f"{_name(g - 1)}, the last member, triggers (trigger=True): {LATER}, which does not wait, may launch "
            f"while it still writes tensor {g - 1}" + (f" (and while {_names(running)} still {_verb(running, 'run')})"
                                                      if running else "")
            + ": the last member must not trigger")))
    elif read_early:
        for i in range(1, g):
            wait, _, order = sw[i]
            if not (wait or order) and sw[i - 1][1] and (i - 1) in read_early:
                out.append(Finding("too early", i, (
                    f"{_name(i)} does not wait at its end (order=False): it may finish before {_name(i - 1)}, and then "
                    f"{LATER}, launched when {_name(g - 1)} ends, may read tensor {i - 1} while {_name(i - 1)} still "
                    f"writes it (a larger tensor {i - 1} is enough; the H200 runs caught it)")))
        if not any(f.kind == "too early" and f.member > 0 for f in out):  # never expected: the model above is complete
            out.append(Finding("too early", read_early[0], f"{LATER} may read tensor(s) {read_early} too early"))
    # 3. the overlap: can member k start its body before member k-1 has finished?
    for k in range(1, g):
        if f"read{k}" in _reach(edges, f"end{k - 1}"):
            if sw[k][0]:
                why = (f"{_name(k)} waits at its start (wait=True): it cannot begin until {_name(k - 1)} has finished; "
                       f"the wait belongs at its end (order=True), where it keeps completions in order and lets the "
                       f"bodies overlap")
                cause = k
            else:
                why = (f"{_name(k - 1)} does not trigger (trigger=False): {_name(k)} launches only when {_name(k - 1)} "
                       f"has finished")
                cause = k - 1
            out.append(Finding("serial", cause, why + " (right, but no overlap at this boundary)"))
    return out


def group_switches_by_the_rules(g: int) -> list[Switches]:
    """The project's three rules (the same as quantize_group.pdl_switches(g)): the first member
    waits before it reads, all but the last trigger, every member after the first waits at its end."""
    if g < 1:
        raise ValueError(f"G = {g}: a group needs at least one tensor")
    return [(k == 0, k < g - 1, k > 0) for k in range(g)]


# -- running a group with given switches ------------------------------------------------------

def group_outputs(switches: Sequence[Switches], sizes: Sequence[int], seed: int = 1) -> dict[str, Any]:
    """Earlier kernel -> the group with these switches -> later kernel: the host copies of q, scales,
    checksums, stamps and data, and "pdl" (whether the launches carried the attribute). With PDL
    where the GPU has it (compute capability >= 9.0), else plain launches (the simulator has no PDL:
    there the griddepcontrol instructions do nothing, and the run shows the values, not the overlap)."""
    from . import workload as qg
    sw = _validate(switches, len(sizes))
    g = qg.Group(list(sizes))
    return _pipeline(g, [(qg.QUANTIZE[s], 1, (g.data, g.offsets, t, g.q, g.scales, g.stamps, t + 1))
                             for t, s in enumerate(sw)], seed)


def _pipeline(g: Any, members: list[tuple[Any, int, tuple]], seed: int) -> dict[str, Any]:
    """The earlier kernel, the members (kernel, grid, arguments), the later kernel: every launch but
    the earlier kernel's with the PDL attribute where the GPU has PDL. On a GPU the sequence runs
    twice and the second run is reported: a kernel's module loads at its first launch (CUDA's lazy
    loading), which holds the host back and would show in the timeline as a gap that is not PDL's."""
    from ...backend import BACKEND
    from ...runtime import cuda
    from . import workload as qg
    use_pdl = BACKEND.pdl()[0]
    launches = [*members, (qg.consumer_kernel, g.g, (g.q, g.offsets, g.scales, g.checksums, g.stamps, g.g + 1, 0))]
    bound = [BACKEND.launcher(k, grid, qg.BLOCK, args, 0, pdl=use_pdl) for k, grid, args in launches]
    for _ in range(BACKEND.size(gpu=2, simulator=1)):  # the simulator loads no modules: once is enough
        g.reset(seed)
        qg.producer_kernel[g.producer_grid, qg.BLOCK](g.data, g.seed, g.stamps)
        for launch in bound:
            launch()
        cuda.synchronize()
    return {"q": g.q.copy_to_host(), "scales": g.scales.copy_to_host(), "checksums": g.checksums.copy_to_host(),
            "stamps": g.stamps.copy_to_host(), "data": g.data.copy_to_host(), "pdl": use_pdl}


def run_group(switches: Sequence[Switches], sizes: Sequence[int], seed: int = 1) -> str | None:
    """One run of group_outputs; None when every quantized tensor, scale and checksum is right
    (quantize_group.check)."""
    from . import workload as qg
    return qg.check(_layout(sizes), group_outputs(switches, sizes, seed))


def _layout(sizes: Sequence[int]) -> Any:
    """What quantize_group.check needs of a Group (G and the offsets), without device arrays."""
    import types

    import numpy as np
    return types.SimpleNamespace(g=len(sizes), offsets_host=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))


# -- the grouped answer: one kernel of the student's instead of G members ------------------------

def is_kernel(value: Any) -> bool:
    """A @cuda.jit object (a kernel, or a device function, which entry_problem then refuses)."""
    return hasattr(value, "py_func") and hasattr(value, "__getitem__")


def kernel_switches(kernel: Any) -> tuple[bool, bool]:
    """(waits, triggers) of a kernel that has run: from its PTX on a GPU (griddepcontrol.wait /
    .launch_dependents anywhere in it), from the calls its threads made on the simulator (read
    and reset here). Either way it says whether the instruction is there, not where."""
    from ...backend import BACKEND
    if BACKEND.can_trace:  # it sees every thread's calls
        from ...intrinsics import SIM_CALLS
        seen = dict(SIM_CALLS)
        SIM_CALLS.update(wait=0, trigger=0)
        return seen["wait"] > 0, seen["trigger"] > 0
    ptx = "\n".join(kernel.inspect_asm().values())
    return "griddepcontrol.wait" in ptx, "griddepcontrol.launch_dependents" in ptx


def ptx_read_before_wait(ptx: str) -> str | None:
    """The first load of global memory that comes before griddepcontrol.wait in a kernel's PTX (numba's
    array loads are generic `ld.f32`, a few `ld.global`; parameters, shared, local and constant loads do
    not count), or None: no such load, or no wait at all (a finding of its own). The wait is an asm
    statement with a memory clobber, so the compiler moves no load across it: the order in the PTX is
    the order in the kernel."""
    from ...grading.api import first_load_before
    load = first_load_before(ptx, "griddepcontrol.wait")
    return None if load is None else f"`{load}` comes before griddepcontrol.wait in its PTX"


@contextlib.contextmanager
def _reads_before_wait(kernel: Any) -> Iterator[list[str]]:
    """Simulator: yields a list that receives the first global read a thread of `kernel` made before
    that thread called grid_dependency_wait() (the simulator sees each access in the thread that
    makes it; the kernel's name for the wait is swapped, for the run, for one that marks its thread)."""
    import inspect
    import threading

    from ...intrinsics import grid_dependency_wait
    from ...instrument.launch_hook import listening
    from ...instrument.trace import watching
    func = kernel.py_func
    space = func.__globals__
    names = [k for k, v in space.items() if v is grid_dependency_wait]
    params = list(inspect.signature(func).parameters)
    found: list[str] = []
    labels: dict[int, str] = {}
    running = [False]

    def waited() -> None:
        threading.current_thread()._kl_waited = True
        grid_dependency_wait()

    def begin(rec, args, py_func) -> None:
        running[0] = py_func is func
        if running[0]:
            labels.update({id(a._ary): n for n, a in zip(params, args) if hasattr(a, "_ary")})

    def access(ary, idx, write: bool) -> None:
        th = threading.current_thread()
        if running[0] and not write and not found and not getattr(th, "_kl_waited", False):
            at = list(idx) if isinstance(idx, tuple) else [idx]
            found.append(f"block {tuple(th.blockIdx)[0]} thread {tuple(th.threadIdx)[0]} read "
                         f"{labels.get(id(ary), 'an array')}{[int(i) for i in at]} before its grid_dependency_wait()")

    saved = {k: space[k] for k in names}
    space.update({k: waited for k in names})
    try:
        with listening(begin, lambda rec: running.__setitem__(0, False)), watching(access):
            yield found
    finally:
        space.update(saved)


def grouped_outputs(kernel: Any, sizes: Sequence[int], seed: int = 1) -> dict[str, Any]:
    """Earlier kernel -> the student's grouped kernel (G blocks of quantize_group.BLOCK threads, the
    PDL attribute set like every launch here) -> later kernel; as group_outputs, plus "grouped":
    whether the kernel waits and triggers, or why it cannot be run."""
    from ...backend import BACKEND
    from ...grading.api import entry_problem
    from . import workload as qg
    problem = entry_problem(kernel, "kernel", "the grouped kernel")
    if problem:
        return {"grouped": {"problem": problem}}
    g = qg.Group(list(sizes))
    watched = BACKEND.can_trace  # every thread's calls and reads are seen; else the compiled PTX tells
    if watched:
        kernel_switches(kernel)  # zero the call counts: the earlier and later kernels make no PDL calls
    with _reads_before_wait(kernel) if watched else contextlib.nullcontext([]) as early:
        out = _pipeline(g, [(kernel, g.g, (g.data, g.offsets, g.q, g.scales))], seed)
    waits, triggers = kernel_switches(kernel)
    if not watched:
        early = [r] if (r := ptx_read_before_wait("\n".join(kernel.inspect_asm().values()))) else []
    return {**out, "grouped": {"waits": waits, "triggers": triggers, "reads_first": early[0] if early else None,
                               "found_by": "the calls and reads its threads made" if watched else "its PTX"}}


# -- the lesson's check ------------------------------------------------------------------------

CHECK_GROUPS = (1, 2, 3, 5, 8)
RUN_SIZES = (300, 20, 90, 7)  # the first member's tensor is the largest: it runs longest


def check_switches(rule: Callable[[int], Sequence[Sequence[bool]]] | None, groups: Sequence[int] = CHECK_GROUPS,
                   run_sizes: Sequence[int] = RUN_SIZES) -> str:
    """Lesson 06, exercise 1: `rule(g)` returns the (wait, trigger, order) switches of a group of g
    members. Raises AssertionError naming every member that would read too early or break the
    overlap; else runs one group with the switches and returns the verdict."""
    if rule is None:
        raise AssertionError("define group_switches(g) first")
    if not callable(rule):
        raise AssertionError(f"group_switches must be a function of g, not {type(rule).__name__}")
    if is_kernel(answer := _call(rule, len(run_sizes))):
        return _check_grouped_answer(answer, run_sizes)
    failing: dict[int, list[Finding]] = {}
    for g in groups:
        try:
            sw = _validate(_call(rule, g), g)
        except ValueError as e:
            raise AssertionError(f"group_switches({g}): {e}") from None
        if found := findings(sw):
            failing[g] = found
    if failing:
        g = 3 if 3 in failing else next(iter(failing))  # G = 3 has a first, a middle and a last member
        found = failing[g]
        wrong = [f.message for f in found if f.kind == "too early"]
        slow = [f.message for f in found if f.kind == "serial"]
        lines = ([f"G = {g}: {len(wrong)} way(s) to read too early (a wrong result):"] + wrong[:4] if wrong else []) + \
                ([f"G = {g}: {len(slow)} boundary(ies) without overlap (right, but slower):"] + slow[:4] if slow else [])
        more = [str(other) for other in failing if other != g]
        raise AssertionError("group_switches: " + "\n  ".join(lines)
                             + (f"\n  (wrong too for G = {', '.join(more)})" if more else ""))
    from ...backend import BACKEND
    problem = run_group(answer, run_sizes)  # the answer for a group of len(run_sizes), asked once above
    pdl, why = BACKEND.pdl()
    how = ("with PDL on this GPU" if pdl else
           f"with plain launches ({why}: griddepcontrol does nothing there, so this run checks the "
           f"values, not the overlap)")
    if problem is not None:
        raise AssertionError(f"group_switches: the rules hold, but a group of {len(run_sizes)} run {how} was wrong: "
                             f"{problem}")
    return (f"group_switches: right for G = {', '.join(map(str, groups))}: the first member waits before it reads, "
            f"the later kernel launches only after every member has ended, and every boundary can overlap; "
            f"a group of {len(run_sizes)} ran {how}: every tensor right")


def _call(rule: Callable[[int], Any], g: int) -> Any:
    try:
        return rule(g)
    except Exception as e:  # noqa: BLE001  (the student's code: say what it raised)
        raise AssertionError(f"group_switches({g}) raised {type(e).__name__}: {e}") from None


def _check_grouped_answer(kernel: Any, sizes: Sequence[int]) -> str:
    """check_switches for an answer that is one grouped kernel: the rules of a group of one, one run."""
    from . import workload as qg
    ran = grouped_outputs(kernel, sizes)
    checks = SwitchesJudge._grouped_rules(len(sizes), ran["grouped"])
    if checks is None:
        raise AssertionError(f"group_switches returned a kernel that cannot be run: {ran['grouped']['problem']}")
    (_, rules_ok, rules_msg), _ = checks
    if not rules_ok:
        raise AssertionError(f"group_switches: {rules_msg}")
    problem = qg.check(_layout(sizes), {**ran, "data": producer_data(sizes, 1)})
    if problem is not None:
        raise AssertionError(f"group_switches: the grouped kernel ran {len(sizes)} tensors wrong: {problem}")
    return (f"group_switches: one grouped kernel that waits before it reads and does not trigger; "
            f"{len(sizes)} tensors of {', '.join(map(str, sizes))} elements: every tensor right")


# -- lesson 06's other checks -------------------------------------------------------------------

CANDIDATES = ("plain", "graph", "graph_pdl", "grouped")


def check_fastest(prediction: Any, g: int = 64, data: str = "pdl_h200.json") -> str:
    """Lesson 06, exercise 2: {"tiny": variant, "large": variant}, the variant of CANDIDATES with
    the smallest end-to-end time for a group of g, against the committed study. A variant whose
    interquartile range overlaps the fastest one's counts as fastest too (a tie)."""
    from ...lessons import committed
    if not isinstance(prediction, dict):
        raise AssertionError(f"fastest: a dict like {{'tiny': 'plain', 'large': 'plain'}}, not {type(prediction).__name__}")
    records = [r for r in committed(data)["records"] if r["G"] == g and r["variant"] in CANDIDATES]
    right, wrong = [], []
    for cls in ("tiny", "large"):
        got = prediction.get(cls, Ellipsis)
        if got is Ellipsis or got is None:
            raise AssertionError(f"fastest[{cls!r}]: fill in your prediction, one of {', '.join(CANDIDATES)}")
        if got not in CANDIDATES:
            raise AssertionError(f"fastest[{cls!r}] = {got!r}: one of {', '.join(CANDIDATES)}")
        by = {r["variant"]: r for r in records if r["size_class"] == cls}
        best = min(by.values(), key=lambda r: r["e2e_us"])
        ties = [v for v in CANDIDATES if by[v]["e2e_us_q1"] <= best["e2e_us_q3"]]
        table = ", ".join(f"{v} {by[v]['e2e_us']:,.0f} us" for v in CANDIDATES)
        if got in ties:
            right.append(f"{cls}: {got}, right (" + (f"a tie: {' and '.join(ties)} within each other's quartiles; "
                                                     if len(ties) > 1 else "") + table + ")")
        else:
            wrong.append(f"{cls}: {got} is not the fastest; where does each variant spend its time at G = {g}: "
                         f"the host's launches (the ladder), the GPU's boundaries, or the members' own work "
                         f"(the G = 8 timelines)?")
    if wrong:
        raise AssertionError("fastest: " + "\n  ".join(wrong + right))
    return f"fastest at G = {g} (figures/data/{data}, median end to end):\n  " + "\n  ".join(right)


GROUPED_SIZES = (1, 70, 5, 200, 33)  # some longer than the block, one of a single element
GROUPED_BLOCKS = (32, 64)


def check_grouped(kernel: Any, sizes: Sequence[int] = GROUPED_SIZES, blocks: Sequence[int] = GROUPED_BLOCKS) -> str:
    """Lesson 06, exercise 3: grouped_dequantize(q, offsets, scales, out), one block per tensor,
    out[i] = q[i] * scales[t] for i in tensor t; launched with G blocks of each of `blocks`
    threads into an output poisoned with NaN."""
    import numpy as np

    from ...runtime import cuda
    if kernel is None:
        raise AssertionError("define grouped_dequantize first")
    if not hasattr(kernel, "__getitem__"):
        raise AssertionError("grouped_dequantize must be a @cuda.jit kernel")
    rng = np.random.default_rng(6)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    q = rng.integers(-127, 128, size=int(offsets[-1])).astype(np.int8)
    scales = (rng.random(len(sizes)) * 0.05 + 0.01).astype(np.float32)
    tensor_of = np.repeat(np.arange(len(sizes)), sizes)
    want = q.astype(np.float64) * scales[tensor_of].astype(np.float64)
    runs = []
    for block in blocks:
        out = cuda.to_device(np.full(q.size, np.nan, np.float32))
        try:
            kernel[len(sizes), block](cuda.to_device(q), cuda.to_device(offsets), cuda.to_device(scales), out)
            got = out.copy_to_host()
        except Exception as e:  # noqa: BLE001  (the student's kernel: say what it raised)
            raise AssertionError(f"grouped_dequantize with {len(sizes)} blocks of {block}: {type(e).__name__}: {e}") from None
        bad = ~np.isclose(got, want, rtol=1e-6, atol=0)
        if bad.any():
            i = int(np.argmax(bad))
            t = int(tensor_of[i])
            what = "never written" if np.isnan(got[i]) else f"{got[i]:.6g}"
            hint = (f"; tensor {t} has {sizes[t]} elements and the block {block} threads: does each block loop over "
                    f"its tensor in steps of cuda.blockDim.x?" if np.isnan(got[i]) and sizes[t] > block else "")
            raise AssertionError(f"grouped_dequantize with {len(sizes)} blocks of {block}: {int(bad.sum())} of {q.size} "
                                 f"elements wrong; first out[{i}] (tensor {t}, element {i - offsets[t]}) is {what}, "
                                 f"expected {want[i]:.6g}{hint}")
        runs.append(block)
    return (f"grouped_dequantize: right for {len(sizes)} tensors of {', '.join(map(str, sizes))} elements, with blocks "
            f"of {' and '.join(map(str, runs))} threads")


# -- the grader's judge of exercise group_switches (an Exercise of kind "data") ---------------------

RULES, OVERLAP, RUN, TIMELINE = ("rules (no early read)", "overlap kept", "correct group run",
                                  "overlap on the timeline")
NO_PDL_NOTE = "this run checks the kernels, not the overlap; the rules check above is what grades the placement"


def case_sizes(n: int, g: int, seed: int) -> list[int]:
    """A graded run's tensors: g of them, n elements together, the first much the largest (it runs
    longest, so a member or the later kernel that does not wait for it shows on a GPU with PDL)."""
    import numpy as np
    if g < 1 or n < g:
        raise ValueError(f"n = {n}, G = {g}: every tensor needs at least one element")
    if g == 1:
        return [n]
    rest = np.random.default_rng(seed).integers(1, max(1, n // (8 * (g - 1))) + 1, g - 1)
    return [n - int(rest.sum()), *map(int, rest)]


def producer_data(sizes: Sequence[int], seed: int):
    """What quantize_group.producer_kernel writes, computed on the host (float32, as the kernel does)."""
    import numpy as np
    i = np.arange(int(sum(sizes)), dtype=np.int64)
    h = ((i * 2654435761 + seed) % 1000003).astype(np.float32)
    return h / np.float32(1000003) * np.float32(6.0) - np.float32(2.5)


def _cut(items: Sequence[str], most: int = 1) -> str:
    return "; ".join(items[:most]) + (f" (and {len(items) - most} more at this G)" if len(items) > most else "")


def timeline_overlap(stamps: Any) -> list[tuple[int, float]]:
    """Per boundary k = 1 .. G-1 of one run: (k, us from member k-1's end to member k's start of work);
    negative when member k was already working while member k-1 ran (rows: the earlier kernel,
    the members, the later kernel; columns: first block start, last block end, work start)."""
    import numpy as np
    st = np.asarray(stamps, np.int64)
    return [(k, (int(st[k + 1, 2]) - int(st[k, 1])) / 1e3) for k in range(1, st.shape[0] - 2)]


class SwitchesJudge:
    """Grades `group_switches(g)` (lesson 06, exercise 1) for the grader (grading/grade.py, kind "data").

    The answer for a group of g is either the g members' (wait, trigger, order) switches, or one
    grouped kernel of the student's, `grouped(data, offsets, q, scales)`, that quantizes all g tensors
    (block t quantizes tensor t), launched with the PDL attribute like every launch here: as a group of
    one it must wait before it reads and must not trigger.

    A case is Case(Size(n=elements, g=members), seed):
      job(case)              parent: what the child calls the entry with (the argument G) and runs
      run(value, job)        child: one run of the group with the returned switches (group_outputs)
                             or the returned kernel (grouped_outputs)
      score(case, job, got)  parent: [(check, ok, message)]: the rules (findings), the overlap (only
                             where the rules hold), the run against the float64 reference of what the
                             earlier kernel wrote (recomputed here): a wrong run always costs, a right
                             one earns only where the rules hold; on a GPU with PDL, the timeline: did
                             each member start its work before the member before it ended
                             (ok None: not counted in that case)
      not_counted(check)     why a check does not count on this machine (None: it counts)
    """

    checks = (RULES, OVERLAP, RUN, TIMELINE)  # the ids the exercise's points may use (grading.judge)

    def not_counted(self, check: str) -> str | None:
        from ...backend import BACKEND
        if check == TIMELINE and not (pdl := BACKEND.pdl())[0]:
            return f"the timeline shows PDL's overlap only on a GPU with PDL ({pdl[1]}); not counted here"
        return None

    def job(self, case: Any) -> dict[str, Any]:
        g, n = case.size["g"], case.size["n"]
        sizes = case_sizes(n, g, case.seed)
        shown = ", ".join(map(str, sizes[:4])) + (", ..." if g > 4 else "")
        return {"argument": g, "sizes": sizes, "seed": case.seed,
                "about": f"G = {g} (tensors of {shown} elements, seed {case.seed})"}

    def run(self, value: Any, job: dict[str, Any]) -> dict[str, Any]:
        out = (grouped_outputs if is_kernel(value) else group_outputs)(value, job["sizes"], job["seed"])
        return {k: out[k] for k in ("q", "scales", "checksums", "stamps", "pdl", "grouped") if k in out}

    def score(self, case: Any, job: dict[str, Any], got: Any) -> list[tuple[str, bool | None, str]]:
        """got: the case's grading.records.Run (value, ran, run_error)."""
        from ...backend import BACKEND
        from . import workload as qg
        g = job["argument"]
        ran, error = got.ran, got.run_error
        grouped = ran.get("grouped") if isinstance(ran, dict) else None
        if isinstance(grouped, dict):
            checks = self._grouped_rules(g, grouped)
        else:
            try:
                sw = _validate(got.value, g)
            except ValueError as e:
                return self._refused(f"group_switches({g}): {e}")
            checks = self._switch_rules(g, sw)
        if checks is None:  # a grouped kernel that could not be run (not a kernel, not the student's)
            return self._refused(f"group_switches({g}) returned a kernel that cannot be graded: {grouped['problem']}")
        rules, overlap = checks
        early = rules[1] is False
        pdl = bool(isinstance(ran, dict) and ran.get("pdl") is True)
        how = "run with PDL on this GPU" if pdl else f"plain launches ({BACKEND.pdl()[1]}): {NO_PDL_NOTE}"
        if error or not isinstance(ran, dict):
            why = (f"{job['about']}: the run failed: {error.type}: {error.message[:300]}" if error else
                   f"{job['about']}: the run failed: the child returned no run")
            return [rules, overlap, (RUN, False, why), (TIMELINE, None, why)]
        try:
            problem = qg.check(_layout(job["sizes"]), {**ran, "data": producer_data(job["sizes"], job["seed"])})
        except (KeyError, TypeError, ValueError, IndexError) as e:  # a report that is not the run's
            problem = f"the run's report cannot be read ({type(e).__name__}: {e})"
        if problem:  # a wrong run always costs
            run = (RUN, False, f"{job['about']}: {problem} ({how})")
        elif early:  # a right run earns nothing for switches the rules reject (it was right by luck, or plainly)
            run = (RUN, None, f"not credited where a member may read too early, even when the run came out right "
                              f"({how})")
        else:
            run = (RUN, True, f"every tensor, scale and checksum right ({how})")
        return [rules, overlap, run, self._timeline(g, ran, grouped, credited=run[1] is True and overlap[1] is not None)]

    @staticmethod
    def _refused(why: str) -> list[tuple[str, bool | None, str]]:
        """An answer that cannot be judged: the rules and the run fail, the rest is not counted."""
        return [(RULES, False, why), (OVERLAP, None, why), (RUN, False, why), (TIMELINE, None, why)]

    @staticmethod
    def _switch_rules(g: int, sw: list[Switches]) -> tuple[tuple, tuple]:
        found = findings(sw)
        early = [f.message for f in found if f.kind == "too early"]
        serial = [f.message for f in found if f.kind == "serial"]
        rules = (RULES, not early, f"G = {g}: {_cut(early)}" if early else
                 "no member reads too early: the first member waits before it reads, and the later kernel "
                 "launches only after every member has ended")
        if early:
            return rules, (OVERLAP, None, "not checked where a member may read too early: fix those first")
        return rules, (OVERLAP, not serial, f"G = {g}: {_cut(serial)}" if serial else
                       "every boundary of the group can overlap")

    @staticmethod
    def _grouped_rules(g: int, grouped: dict[str, Any]) -> tuple[tuple, tuple] | None:
        if grouped.get("problem"):
            return None
        early = []
        if not grouped.get("waits"):
            early.append(f"G = {g}: the grouped kernel does not wait (no grid_dependency_wait()): launched with the "
                         f"PDL attribute, it may start before {EARLIER}'s writes are visible and read them too early; "
                         f"wait before the first read")
        elif grouped.get("reads_first"):
            early.append(f"G = {g}: the grouped kernel reads before it waits ({grouped['reads_first']}): launched "
                         f"with the PDL attribute, that read may see {EARLIER}'s data before its writes are visible; "
                         f"call grid_dependency_wait() before the first read of any array")
        if grouped.get("triggers"):
            early.append(f"G = {g}: the grouped kernel triggers (launch_dependents()): {LATER}, which does not wait, "
                         f"may launch while its blocks still write; as the last (and only) member it must not trigger")
        rules = (RULES, not early, "; ".join(early) if early else
                 "one grouped kernel that waits before it reads and does not trigger (found by "
                 + str(grouped.get("found_by", "?")) + ")")
        if early:
            return rules, (OVERLAP, None, "not checked where the kernel may read too early: fix that first")
        return rules, (OVERLAP, True, "one grouped kernel: no boundaries inside the group, its blocks run side by side")

    def _timeline(self, g: int, ran: dict[str, Any], grouped: Any, credited: bool) -> tuple[str, bool | None, str]:
        """On a GPU with PDL: each member's start of work against the end of the member before it."""
        if why := self.not_counted(TIMELINE):
            return TIMELINE, None, why
        if not credited:
            return TIMELINE, None, "not measured where the rules or the run failed"
        if isinstance(grouped, dict):
            return TIMELINE, True, "one grouped kernel: no boundary to overlap"
        if g == 1:
            return TIMELINE, None, "G = 1: no boundary inside the group"
        try:
            gaps = timeline_overlap(ran["stamps"])
        except (KeyError, TypeError, ValueError, IndexError) as e:
            return TIMELINE, False, f"G = {g}: the run's timeline cannot be read ({type(e).__name__}: {e})"
        late = [(k, gap) for k, gap in gaps if gap >= 0]
        if late:
            k, gap = late[0]
            return TIMELINE, False, (f"G = {g}: quantize[{k}] began its work {gap:.1f} us after quantize[{k - 1}] ended "
                                     f"(%globaltimer stamps): no overlap at {len(late)} of {len(gaps)} boundaries")
        k, gap = max(gaps, key=lambda kg: kg[1])
        return TIMELINE, True, (f"G = {g}: every member began its work while the member before it still ran "
                                f"(the least: quantize[{k}], {-gap:.1f} us before quantize[{k - 1}] ended)")


GROUP_SWITCHES = SwitchesJudge()
