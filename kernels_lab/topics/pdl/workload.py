"""Lesson: the launch-side answers. A group of small independent kernels between unknown work.

    producer            stands for unknown earlier work: writes G float32 tensors of different sizes
    quantize[0..G-1]    one small kernel per tensor: absmax -> scale = absmax / 127 -> int8 values
    consumer            stands for unknown later work: reads every quantized tensor (a checksum)

How the G launches are paid for, variant by variant:
    plain        stream-ordered launches, each waits for the previous kernel to finish
    pdl          Programmatic Dependent Launch: each group kernel may launch while the one
                 before it still runs, by switches (after a TransformerEngine design):
                   pdl_sync    only the FIRST group kernel waits (griddepcontrol.wait) before it
                               reads: only it depends on the unknown earlier kernel's results;
                   pdl_trigger all but the LAST trigger (griddepcontrol.launch_dependents), so the
                               next member may start early but no unknown kernel after the group is;
                   pdl_order   every member after the first waits once more at its END: measured
                               on the H200, without it the kernel after the group started as soon
                               as the LAST member finished, while a longer earlier member was still
                               writing (PDL orders launches, not completions). The wait at the end
                               keeps completions in stream order and the bodies still overlap.
                 The host-side attribute (programmatic_stream_serialization) is set on every launch;
                 a kernel with no switch behaves like a plain one towards its predecessor.
    graph        the plain launches captured once in a CUDA graph and replayed
    graph_pdl    the PDL launches captured in a graph
    grouped      one kernel, one block per tensor: fusion, no boundaries at all
    wrong_trigger  LABELLED WRONG: the last group kernel also triggers and the consumer, launched
                 with the attribute, does not wait: it may start before the group is done
                 (the timeline shows it). Excluded from the correct set.
    wrong_unordered LABELLED WRONG: the two TransformerEngine switches without pdl_order: right
                 when the last member is the longest, wrong when an earlier one outlasts it.

Every block stamps its start and end with %globaltimer into a timeline array, so the launch
gaps, the PDL overlap and the graph replay can be drawn without Nsight Systems; a member also
stamps when its work began (after its start wait), which the graded exercise's timeline reads.
The simulator and GPUs below compute capability 9.0 have no PDL: the pdl variants say so once
and run as plain launches there.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ...backend import BACKEND, in_order
from ...core import Axis, KernelLaunch, Plan, Size, Tolerance, Variant, Workload, register
from ...intrinsics import globaltimer, grid_dependency_wait, launch_dependents
from ...runtime import cuda
from ...reduce import block_max, block_sum

# threads per member kernel: 256 on a GPU; 32 on the simulator, where every thread is a Python
# thread and a member's barriers cost per thread (same kernels, smaller blocks)
BLOCK = BACKEND.size(gpu=256, simulator=32)
PRODUCER, CONSUMER = "producer", "consumer"


# -- specification ------------------------------------------------------------------------

def reference_quantize(x: np.ndarray) -> tuple[np.ndarray, float]:
    x64 = x.astype(np.float64)
    absmax = float(np.abs(x64).max()) if x.size else 0.0
    scale = absmax / 127.0 if absmax > 0 else 1.0
    return np.clip(np.rint(x64 / scale), -127, 127).astype(np.int8), scale


def make_sizes(g: int, rng: np.random.Generator, small: int, large: int) -> list[int]:
    if g < 1:
        raise ValueError(f"G = {g}: a group needs at least one tensor")
    return [int(s) for s in rng.integers(small, large + 1, size=g)]


# -- kernels ------------------------------------------------------------------------------

@cuda.jit(device=True, inline=True)
def _stamp_start(stamps, k):
    if cuda.threadIdx.x == 0:
        cuda.atomic.min(stamps, (k, 0), globaltimer())


@cuda.jit(device=True, inline=True)
def _stamp_body(stamps, k):
    # when the member's work began: after its start wait, if it has one (column 0 is when its
    # block became resident, which for a member that waits is earlier)
    if cuda.threadIdx.x == 0:
        cuda.atomic.min(stamps, (k, 2), globaltimer())


@cuda.jit(device=True, inline=True)
def _stamp_end(stamps, k):
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        cuda.atomic.max(stamps, (k, 1), globaltimer())


@cuda.jit
def producer_kernel(data, seed, stamps):
    # Writes every tensor (all G, concatenated): a hash of the index, asymmetric, signed.
    _stamp_start(stamps, 0)
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < data.size:
        h = (i * 2654435761 + seed) % 1000003
        data[i] = np.float32(h) / np.float32(1000003) * np.float32(6.0) - np.float32(2.5)
        i += stride
    _stamp_end(stamps, 0)


@cuda.jit(device=True, inline=True)
def quantize_one(data, offsets, t, q, scales, absmax_sh):
    # One block quantizes tensor t: absmax by a shared-memory tree (reduce.py), then scale and round.
    tid = cuda.threadIdx.x
    lo, hi = offsets[t], offsets[t + 1]
    m = np.float32(0)
    for i in range(lo + tid, hi, cuda.blockDim.x):
        m = max(m, abs(data[i]))
    absmax = block_max(m, absmax_sh)
    scale = absmax / np.float32(127) if absmax > 0 else np.float32(1)
    for i in range(lo + tid, hi, cuda.blockDim.x):
        v = round(data[i] / scale)
        q[i] = np.int8(max(-127, min(127, v)))
    if tid == 0:
        scales[t] = scale


def make_quantize_kernel(wait: bool, trigger: bool, order: bool):
    """The group member, built with its three PDL switches fixed at compile time."""

    def quantize_kernel(data, offsets, t, q, scales, stamps, k):
        absmax_sh = cuda.shared.array(BLOCK, dtype=np.float32)
        _stamp_start(stamps, k)
        if wait:
            grid_dependency_wait()  # the unknown earlier kernel's results are visible after this
        if trigger:
            launch_dependents()     # the next group member has no data dependency on this one
        _stamp_body(stamps, k)
        quantize_one(data, offsets, t, q, scales, absmax_sh)
        if order:
            grid_dependency_wait()  # finish after the member before: completions stay in order
        _stamp_end(stamps, k)

    name = f"quantize{'_wait' if wait else ''}{'_trigger' if trigger else ''}{'_ordered' if order else ''}"
    quantize_kernel.__name__ = quantize_kernel.__qualname__ = name
    return cuda.jit(quantize_kernel)


QUANTIZE = {(w, t, o): make_quantize_kernel(w, t, o) for w in (False, True) for t in (False, True)
            for o in (False, True)}


@cuda.jit
def grouped_quantize_kernel(data, offsets, q, scales, stamps, k):
    # All G tensors in one launch: block t quantizes tensor t.
    absmax_sh = cuda.shared.array(BLOCK, dtype=np.float32)
    _stamp_start(stamps, k)
    quantize_one(data, offsets, cuda.blockIdx.x, q, scales, absmax_sh)
    _stamp_end(stamps, k)


@cuda.jit
def consumer_kernel(q, offsets, scales, checksums, stamps, k, wait):
    # Reads every quantized tensor: checksum[t] = sum of dequantized values (one block per tensor).
    acc_sh = cuda.shared.array(BLOCK, dtype=np.float32)
    _stamp_start(stamps, k)
    if wait:
        grid_dependency_wait()
    t, tid = cuda.blockIdx.x, cuda.threadIdx.x
    acc = np.float32(0)
    for i in range(offsets[t] + tid, offsets[t + 1], cuda.blockDim.x):
        acc += np.float32(q[i])
    total = block_sum(acc, acc_sh)
    if tid == 0:
        checksums[t] = total * scales[t]
    _stamp_end(stamps, k)


# -- the switches -------------------------------------------------------------------------

def pdl_switches(g: int, wrong: str | None = None) -> list[tuple[bool, bool, bool]]:
    """(wait, trigger, order) for each of the G group kernels, by the rules above.

    wrong="trigger": the last kernel triggers too; wrong="unordered": no pdl_order.
    """
    if g < 1:
        raise ValueError(f"G = {g}: a group needs at least one tensor")
    return [(k == 0, wrong == "trigger" or k < g - 1, wrong != "unordered" and k > 0) for k in range(g)]


# -- one run of the pipeline ----------------------------------------------------------------

VARIANTS = ("plain", "pdl", "graph", "graph_pdl", "grouped")
WRONG = ("wrong_trigger", "wrong_unordered")


@dataclass
class Group:
    """Device buffers for one configuration: G tensors of the given sizes."""

    sizes: list[int]
    data: Any = None    # float32[n] on the device; allocated when not given (as are q and scales)
    q: Any = None
    scales: Any = None

    def __post_init__(self):
        if not self.sizes:
            raise ValueError("G = 0: a group needs at least one tensor")
        if any((not isinstance(s, (int, np.integer))) or s < 1 for s in self.sizes):
            raise ValueError(f"tensor sizes must be positive integers, got {self.sizes}")
        self.g = len(self.sizes)
        self.offsets_host = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        n = int(self.offsets_host[-1])
        for name, shape, dtype in (("data", n, np.float32), ("q", n, np.int8), ("scales", self.g, np.float32)):
            given = getattr(self, name)
            if given is None:
                setattr(self, name, cuda.device_array(shape, dtype))
            elif given.shape != (shape,) or given.dtype != dtype:
                raise ValueError(f"{name}: needs {np.dtype(dtype)} of shape ({shape},), got {given.dtype} {given.shape}")
        self.offsets = cuda.to_device(self.offsets_host)
        self.checksums = cuda.device_array(self.g, np.float32)
        # per kernel: first block start, last block end, first member body start (after its wait)
        self.stamps = cuda.device_array((self.g + 2, 3), np.int64)
        self.producer_grid = min(4 * max(1, BACKEND.facts().sm_count), -(-n // BLOCK))

    def timeline(self, stamps: np.ndarray, variant: str) -> list[dict[str, Any]]:
        """The kernels' spans of one run (the grouped variant has one group kernel)."""
        if variant == "grouped":
            return spans(stamps[[0, 1, self.g + 1]], [PRODUCER, "grouped", CONSUMER])
        return spans(stamps, [PRODUCER, *[f"quantize[{t}]" for t in range(self.g)], CONSUMER])

    def reset(self, seed: int) -> None:
        stamps = np.zeros((self.g + 2, 3), np.int64)
        stamps[:, [0, 2]] = np.iinfo(np.int64).max
        self.stamps.copy_to_device(stamps)
        self.q.copy_to_device(np.full(self.q.shape, -128, np.int8))  # poison: never a quantized value
        self.seed = np.int64(seed)


def quantize(tensors: Sequence[Any], outputs: Sequence[Any] | None = None) -> list[tuple[np.ndarray, float]]:
    """Quantize a list of float32 vectors with the grouped kernel: [(int8 values, scale), ...].

    `outputs`, if given, are int8 host arrays to fill, one per tensor, of matching sizes.
    """
    if len(tensors) == 0:
        raise ValueError("G = 0: an empty tensor list")
    host = []
    for k, t in enumerate(tensors):
        a = t.copy_to_host() if hasattr(t, "copy_to_host") else np.asarray(t)
        if a.dtype != np.float32:
            raise ValueError(f"tensor {k}: dtype {a.dtype}; float32 is required")
        if a.ndim != 1 or a.size == 0:
            raise ValueError(f"tensor {k}: shape {a.shape}; a non-empty 1-D vector is required")
        host.append(a)
    if outputs is not None:
        if len(outputs) != len(host):
            raise ValueError(f"mismatched lists: {len(host)} tensors but {len(outputs)} outputs")
        for k, (o, a) in enumerate(zip(outputs, host)):
            if np.asarray(o).dtype != np.int8 or np.asarray(o).shape != a.shape:
                raise ValueError(f"output {k}: needs int8 of shape {a.shape}, got {np.asarray(o).dtype} {np.shape(o)}")
    group = Group([a.size for a in host])
    group.reset(0)
    group.data.copy_to_device(np.concatenate(host))
    grouped_quantize_kernel[group.g, BLOCK](group.data, group.offsets, group.q, group.scales, group.stamps, 1)
    q, scales = group.q.copy_to_host(), group.scales.copy_to_host()
    result = []
    for k in range(group.g):
        lo, hi = group.offsets_host[k], group.offsets_host[k + 1]
        if outputs is not None:
            outputs[k][...] = q[lo:hi]
        result.append((q[lo:hi].copy(), float(scales[k])))
    return result


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS + WRONG:
        raise KeyError(f"unknown PDL variant {variant!r}; known: {', '.join(VARIANTS + WRONG)}")


class GroupLauncher:
    """Enqueues producer -> group -> consumer for one variant; call it to run once.

    On a GPU every launch except the producer's is pre-bound through cuda.core (arguments
    flattened once), so plain, PDL and graph variants differ only in what they are named for.
    """

    def __init__(self, group: Group, variant: str, stream=0, neighbours: bool = True):
        """neighbours=False: the group alone, without the producer and consumer around it."""
        _check_variant(variant)
        self.group, self.variant, self.stream, self.neighbours = group, variant, stream, neighbours
        pdl = variant in ("pdl", "graph_pdl") + WRONG
        if pdl and not BACKEND.pdl()[0]:
            warnings.warn(f"{variant}: {BACKEND.pdl()[1]}; running plain launches instead", stacklevel=2)
            pdl = False
        self.uses_pdl = pdl
        g = group
        wrong = variant.removeprefix("wrong_") if variant in WRONG else None
        self.switches = pdl_switches(g.g, wrong) if pdl else [(False, False, False)] * g.g
        if variant == "grouped":
            self.members = [self._bind(grouped_quantize_kernel, g.g,
                                       (g.data, g.offsets, g.q, g.scales, g.stamps, 1), attribute=False)]
        else:
            self.members = [self._bind(QUANTIZE[sw], 1, (g.data, g.offsets, t, g.q, g.scales, g.stamps, t + 1),
                                       attribute=pdl) for t, sw in enumerate(self.switches)]
        # The consumer always has the attribute under PDL, and never waits: what protects it is
        # that the last group kernel does not trigger.
        self.consumer = self._bind(consumer_kernel, g.g, (g.q, g.offsets, g.scales, g.checksums, g.stamps,
                                                          g.g + 1, 0), attribute=pdl)
        self._group = BACKEND.graph(self.members, stream, variant) if variant.startswith("graph") else \
            in_order(self.members)

    def _bind(self, kernel, grid: int, args: tuple, attribute: bool):
        return BACKEND.launcher(kernel, grid, BLOCK, args, self.stream, pdl=attribute)

    def __call__(self) -> None:
        g, s = self.group, self.stream
        if self.neighbours:
            producer_kernel[g.producer_grid, BLOCK, s](g.data, g.seed, g.stamps)
        self._group()
        if self.neighbours:
            self.consumer()


def run_once(group: Group, variant: str, seed: int = 1) -> dict[str, Any]:
    """Run the pipeline once; return the host copies of q, scales, checksums and stamps."""
    group.reset(seed)
    GroupLauncher(group, variant)()
    cuda.synchronize()
    return {"q": group.q.copy_to_host(), "scales": group.scales.copy_to_host(),
            "checksums": group.checksums.copy_to_host(), "stamps": group.stamps.copy_to_host(),
            "data": group.data.copy_to_host()}


def check(group: Group, out: dict[str, Any]) -> str | None:
    """None when q, scales and checksums match the float64 reference of what the producer wrote."""
    data = out["data"]
    for t in range(group.g):
        lo, hi = group.offsets_host[t], group.offsets_host[t + 1]
        want_q, want_scale = reference_quantize(data[lo:hi])
        got_q = out["q"][lo:hi]
        # float32 x / scale may land on the other side of a .5 than float64: allow one step
        # there, and only there
        off = np.abs(got_q.astype(np.int16) - want_q.astype(np.int16))
        ratio = data[lo:hi].astype(np.float64) / want_scale
        near_half = np.abs(np.abs(ratio - np.trunc(ratio)) - 0.5) < 1e-3
        bad = (off > 1) | ((off == 1) & ~near_half)
        if bad.any():
            i = int(np.argmax(bad))
            return f"tensor {t}: q[{i}] = {got_q[i]}, expected {want_q[i]}"
        if not np.isclose(out["scales"][t], want_scale, rtol=1e-6):
            return f"tensor {t}: scale {out['scales'][t]}, expected {want_scale}"
        want_sum = float(got_q.astype(np.float64).sum() * out["scales"][t])
        if not np.isclose(out["checksums"][t], want_sum, rtol=1e-4, atol=1e-3 * max(1.0, want_scale)):
            return f"tensor {t}: consumer checksum {out['checksums'][t]}, expected {want_sum} (read too early?)"
    return None


def spans(stamps: np.ndarray, names: Sequence[str]) -> list[dict[str, Any]]:
    """Block stamps -> one span per kernel, in us from the earliest start."""
    rows = [(n, int(row[0]), int(row[1])) for n, row in zip(names, stamps)]
    t0 = min(s for _, s, _ in rows)
    out = []
    for name, s, e in rows:
        if e < s:
            raise ValueError(f"kernel {name}: end stamp before start stamp (was it run?)")
        out.append({"kernel": name, "start_us": (s - t0) / 1e3, "end_us": (e - t0) / 1e3})
    return out


# -- the group as a registered workload: every launch-side variant, the group alone ----------
# (kernels-lab list / profile / timeline see it like any other workload; the producer and
# consumer that stand for unknown work are left out, the inputs come from the host.)

GROUP_G = 8


def group_sizes(n: int) -> list[int]:
    """n elements as min(8, n) tensors of different sizes (tensor t gets a share ~ t + 1)."""
    if n < 1:
        raise ValueError(f"n = {n}: the group needs at least one element")
    g = min(GROUP_G, n)
    cuts = [round(n * k * (k + 1) / (g * (g + 1))) for k in range(g + 1)]
    sizes = [b - a for a, b in zip(cuts, cuts[1:])]
    if min(sizes) < 1:  # tiny n: one element each, the rest to the last
        sizes = [1] * (g - 1) + [n - g + 1]
    return sizes


def _group_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    sizes = group_sizes(size.n)
    parts = [rng.standard_normal(s).astype(np.float32) * np.float32(0.5 + t) + np.float32(0.1 * t)
             for t, s in enumerate(sizes)]  # a different scale and offset per tensor
    return {"data": np.concatenate(parts)}


def _group_reference(inputs) -> dict[str, np.ndarray]:
    data = inputs["data"]
    offsets = np.concatenate([[0], np.cumsum(group_sizes(data.size))])
    qs, scales = zip(*(reference_quantize(data[lo:hi]) for lo, hi in zip(offsets, offsets[1:])))
    return {"q": np.concatenate(qs).astype(np.float64), "scales": np.asarray(scales)}


def _group_outputs(size: Size):
    return {"q": ((size.n,), np.int8), "scales": ((len(group_sizes(size.n)),), np.float32)}


def _member_bytes(size: int, kernel: str, stamps: int) -> KernelLaunch:
    # data read twice (absmax, then quantize), q written once, one scale; every thread reads the
    # tensor's two offsets; thread 0's %globaltimer stamps are 8-byte atomics (read + write each)
    return KernelLaunch(kernel, 1, BLOCK, bytes_read=8 * size + 16 * BLOCK + 8 * stamps,
                        bytes_written=size + 4 + 8 * stamps)


def _group_plan(variant: str):
    def plan(size: Size) -> Plan:
        sizes = group_sizes(size.n)
        if variant == "grouped":
            one = [_member_bytes(s, "grouped_quantize_kernel", stamps=2) for s in sizes]
            return Plan((KernelLaunch("grouped_quantize_kernel", len(sizes), BLOCK, sum(k.bytes_read for k in one),
                                      sum(k.bytes_written for k in one)),))
        switches = pdl_switches(len(sizes)) if variant in ("pdl", "graph_pdl") and BACKEND.pdl()[0] else \
            [(False, False, False)] * len(sizes)
        return Plan(tuple(_member_bytes(s, QUANTIZE[sw].py_func.__name__, stamps=3) for s, sw in zip(sizes, switches)))
    return plan


def _group_bind(variant: str):
    def bind(inputs, outputs, stream=0):
        data = inputs["data"]
        group = Group(group_sizes(data.size), data=data, q=outputs["q"], scales=outputs["scales"])
        group.reset(0)
        return GroupLauncher(group, variant, stream, neighbours=False)
    return bind


WORKLOAD = register(Workload(
    name="quantize_group",
    about=f"{GROUP_G} float32 tensors of different sizes -> int8 + scale each: the PDL lesson's group",
    make_inputs=_group_inputs, reference=_group_reference, output_specs=_group_outputs,
    tolerance=Tolerance(rtol=1e-6, atol=1.0),  # q: one int8 step (float32 x/scale may round the other way at .5)
    axes=(Axis("n", sim=3 * BLOCK + 5, gpu=1 << 16, sweep=tuple(1 << k for k in range(10, 25, 2)),
               sim_sweep=(8,), about=f"elements of all {GROUP_G} tensors together"),),
))
for _name, _pattern, _about in (
        ("plain", "unfused", "G stream-ordered launches"),
        ("pdl", "pdl", "G launches with PDL: the first waits, all but the last trigger, all after the first "
                       "wait at the end"),
        ("graph", "graph", "the G launches captured once in a CUDA graph, replayed"),
        ("graph_pdl", "graph", "the PDL launches captured in a graph"),
        ("grouped", "fused", "one kernel, one block per tensor")):
    WORKLOAD.add(Variant(_name, _pattern, _about, _group_plan(_name), _group_bind(_name)))


# -- lesson 06's exercise 1 as a graded exercise: the student returns the switches ---------------
# Each case is one group of g members, n elements together, the first tensor the largest
# (pdl_rules.case_sizes); the judge (pdl_rules.SwitchesJudge) checks the rules for that G, and the
# grader's child runs the group with the returned switches, or the returned grouped kernel (with
# PDL on a GPU of compute capability >= 9.0, where the members' timeline is read too; plain
# launches on the simulator).

from ...core import Case, Exercise  # noqa: E402

_SWITCH_N = BACKEND.size(gpu=1 << 20, simulator=300)
WORKLOAD.add_exercise(Exercise(
    name="group_switches", workload="quantize_group", variant="pdl", lesson="06",
    title="place the PDL switches of a group of G kernels", kind="data", entry="group_switches",
    signature="def group_switches(g: int) -> list[tuple[bool, bool, bool]]:  # (wait, trigger, order) per member\n"
              "# or return one @cuda.jit kernel grouped(data, offsets, q, scales) of yours that quantizes all g "
              "tensors (block t: tensor t), launched with g blocks and the PDL attribute",
    cases=tuple(Case(Size(n=max(_SWITCH_N, g), g=g), seed) for seed, g in enumerate((1, 2, 3, 8), start=1)),
    argument_order=("g",), judge="kernels_lab.topics.pdl.rules:GROUP_SWITCHES",
    points={"rules (no early read)": 4, "overlap kept": 2, "correct group run": 3,
            "overlap on the timeline": 1}))  # counted on a GPU with PDL only (SwitchesJudge.not_counted)
