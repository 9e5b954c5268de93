"""The one idea: a workload is a problem, a variant is one way to compute it on the GPU.

A workload names its shape axes (`n`; `rows, cols`; `hidden, batch, steps`); one problem
size is a `Size`, a value for every axis. Every variant states its plan for a size: the
kernels it launches, grid and block of each, and the global-memory bytes each one reads and
writes. An exercise is a view of a workload: which variant's plan sets its budgets and what
the student writes. Correctness checks, the traffic model, the measurements, the lessons and
the grader all start from this interface, and find workloads through the registry.
"""

from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from .errors import UsageError

PATTERNS = ("unfused", "fused", "persistent", "graph", "pdl")


@dataclass(frozen=True)
class KernelLaunch:
    """One planned launch: which kernel, its grid and block, and the global bytes it moves.

    read_bytes_in_flight: the bytes of loads one thread issues before it needs any of them
    (8 for two 4-byte loads, 32 for two 16-byte loads; 0 = not declared). With the number of
    threads resident at once it bounds the bandwidth by Little's law: bytes in flight / latency.
    """

    kernel: str
    grid: int
    block: int
    bytes_read: int
    bytes_written: int
    read_bytes_in_flight: int = 0

    def device_bytes_in_flight(self, resident_threads: int) -> int:
        """Bytes of loads in flight across the device (0 = not declared)."""
        if not self.read_bytes_in_flight:
            return 0
        busy = min(self.grid * self.block, resident_threads, -(-self.bytes_read // self.read_bytes_in_flight))
        return max(busy, 1) * self.read_bytes_in_flight


@dataclass(frozen=True)
class Plan:
    launches: tuple[KernelLaunch, ...]

    @property
    def n_launches(self) -> int:
        return len(self.launches)

    @property
    def bytes_read(self) -> int:
        return sum(k.bytes_read for k in self.launches)

    @property
    def bytes_written(self) -> int:
        return sum(k.bytes_written for k in self.launches)

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written


# -- sizes: named axes --------------------------------------------------------------------

@dataclass(frozen=True)
class Axis:
    """One named extent of a workload's problem.

    sim / gpu: the default on the simulator (small: every thread is a Python thread) and on a GPU
    (full size); sweep / sim_sweep: the values a sweep over this axis visits on each back-end.
    """

    name: str
    sim: int
    gpu: int
    sweep: tuple[int, ...] = ()
    sim_sweep: tuple[int, ...] = ()
    unit: str = "elements"
    about: str = ""

    def default(self, on_gpu: bool) -> int:
        return self.gpu if on_gpu else self.sim

    def sweep_values(self, on_gpu: bool) -> tuple[int, ...]:
        return (self.sweep if on_gpu else self.sim_sweep) or (self.default(on_gpu),)


class Size(Mapping[str, int]):
    """One problem size: a positive integer for every axis, in the workload's axis order.

    Size(rows=4096, cols=1024)["cols"] == Size(rows=4096, cols=1024).cols == 1024;
    str() gives "rows=4096,cols=1024", the form the CLI takes back.
    """

    __slots__ = ("_axes",)

    def __init__(self, **axes: int) -> None:
        for name, value in axes.items():
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise SizeError(f"size {name}={value!r}: expected a whole number")
            if value < 1:
                raise SizeError(f"size {name}={value}: every axis needs at least 1 (nothing to compute at {value})")
        object.__setattr__(self, "_axes", {k: int(v) for k, v in axes.items()})

    def __getitem__(self, name: str) -> int:
        return self._axes[name]

    def __getattr__(self, name: str) -> int:
        if name.startswith("_"):  # not an axis (and never recurse while __init__ has not finished)
            raise AttributeError(name)
        try:
            return self._axes[name]
        except KeyError:
            raise AttributeError(f"size {self} has no axis {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Size is immutable; use replace()")

    def __iter__(self) -> Iterator[str]:
        return iter(self._axes)

    def __len__(self) -> int:
        return len(self._axes)

    def __hash__(self) -> int:
        return hash(tuple(self._axes.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._axes) == dict(other)

    def __repr__(self) -> str:
        return f"Size({', '.join(f'{k}={v}' for k, v in self._axes.items())})"

    def __str__(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self._axes.items())

    def __reduce__(self):  # picklable (the grader sends sizes to its child)
        return (_make_size, (tuple(self._axes.items()),))

    def replace(self, **axes: int) -> "Size":
        return Size(**{**self._axes, **axes})

    @property
    def elements(self) -> int:
        """The product of the axes (the element count of a one-axis workload)."""
        return math.prod(self._axes.values())  # exact (an int64 product wraps past 2^63)


def _make_size(items: tuple[tuple[str, int], ...]) -> Size:
    return Size(**dict(items))


class SizeError(UsageError):
    """A size that names an unknown axis or a value that is not a positive whole number."""


_INT = re.compile(r"^\s*(\d+)\s*(?:(\^|\*\*)\s*(\d+))?\s*([kKmMgG]i?)?\s*$")
MAX_INT = 2**63 - 1  # the largest whole number a size or count may be (an int64)
_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9, "ki": 2**10, "mi": 2**20, "gi": 2**30}


def parse_int(text: str) -> int:
    """'4096', '2^12', '2**12', '4k', '4Ki' -> an int (the forms the CLI accepts)."""
    m = _INT.match(str(text))
    if not m:
        raise SizeError(f"{text!r} is not a whole number (write 4096, 2^12 or 4Ki)")
    base, _, exp, suffix = m.groups()
    if exp and int(exp) > 64 and int(base) > 1 or len(base) > 20:  # refused before a huge power is computed
        raise SizeError(f"{text!r} is too large: at most {MAX_INT:,} (2^63 - 1)")
    value = (int(base) ** int(exp) if exp else int(base)) * (_SUFFIX[suffix.lower()] if suffix else 1)
    if value > MAX_INT:
        raise SizeError(f"{text!r} is too large: at most {MAX_INT:,} (2^63 - 1)")
    return value


# -- variants and workloads -----------------------------------------------------------------

Launcher = Callable[[], None]


def kernel_name(kernel: Any) -> str:
    """The Python name of a @cuda.jit function, on either back-end."""
    return getattr(kernel, "py_func", kernel).__name__


@dataclass(frozen=True)
class Variant:
    """One way to compute a workload.

    plan(size)                    -> Plan: what it will launch for this size
    bind(inputs, outputs, stream) -> Launcher: validates the device arrays, allocates any
                                     scratch once, and returns a zero-argument callable that
                                     launches the work (what timers, graphs and tests call).
    limit(size)                   -> None, or why this variant cannot run that size here
                                     (the row does not fit on chip; the grid cannot be co-resident)
    """

    name: str
    pattern: str
    about: str
    plan: Callable[[Size], Plan]
    bind: Callable[..., Launcher]
    limit: Callable[[Size], str | None] | None = None

    def __post_init__(self) -> None:
        if self.pattern not in PATTERNS:
            raise ValueError(f"variant {self.name!r}: unknown pattern {self.pattern!r}; expected one of {PATTERNS}")

    def why_not(self, size: Size) -> str | None:
        """None when this variant runs `size`; else the reason, naming the variant to use instead."""
        return self.limit(size) if self.limit is not None else None


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


@dataclass(frozen=True)
class HardInput:
    """An input a workload promises to handle, so every graded case must test it.

    about:   what it is and what it catches, in words (the grader and tests name it)
    sizes:   Size -> bool, the sizes that can hold it (None: every size); a shape-only hard input
             (present None) is a promise about the cases: an exercise must grade at least one such size
    present: (Size, inputs) -> bool, make_inputs put it in these inputs; required at every size that
             `sizes` accepts (tests/test_hard_inputs.py checks it for every graded case of every exercise)
    """

    about: str
    sizes: Callable[["Size"], bool] | None = None
    present: Callable[["Size", Mapping[str, Any]], bool] | None = None

    def fits(self, size: "Size") -> bool:
        return self.sizes is None or bool(self.sizes(size))


OutputSpecs = dict[str, tuple[tuple[int, ...], Any]]


@dataclass
class Workload:
    """A problem: named axes, a float64 NumPy reference, a seeded input maker and a tolerance.

    make_inputs(size, rng)     -> {name: host array or scalar} (fresh, random, asymmetric)
    reference(inputs)          -> {output name: float64 array}
    output_specs(size)         -> {output name: (shape, dtype)}
    symmetric_inputs(size, rng)-> optional: inputs arranged so that a wrong index can pass (x == b,
                                  a symmetric matrix); the grader's probe for "passes only by luck"
    hard_inputs                -> what the workload promises to handle (HardInput: rows near +100 and -120,
                                  widths that are not multiples of 32, batch > 1, ...): make_inputs puts
                                  each one in every size that can hold it, and an exercise is refused
                                  unless its graded cases include a size for each. Any output of 2 or more
                                  axes adds one of its own: a non-square shape (a swapped index shows).
    """

    name: str
    about: str
    axes: tuple[Axis, ...]
    make_inputs: Callable[[Size, np.random.Generator], dict[str, Any]]
    reference: Callable[[Mapping[str, Any]], dict[str, np.ndarray]]
    output_specs: Callable[[Size], OutputSpecs]
    tolerance: Tolerance
    symmetric_inputs: Callable[[Size, np.random.Generator], dict[str, Any]] | None = None
    hard_inputs: tuple[HardInput, ...] = ()
    variants: dict[str, Variant] = field(default_factory=dict)
    exercises: dict[str, "Exercise"] = field(default_factory=dict, repr=False)

    def add(self, variant: Variant) -> Variant:
        if variant.name in self.variants:
            raise ValueError(f"{self.name}: variant {variant.name!r} registered twice")
        self.variants[variant.name] = variant
        return variant

    def variant(self, name: str) -> Variant:
        try:
            return self.variants[name]
        except KeyError:
            raise KeyError(f"workload {self.name!r} has no variant {name!r}; "
                           f"it has: {', '.join(self.variants)}") from None

    def add_exercise(self, exercise: "Exercise") -> "Exercise":
        if exercise.workload != self.name:
            raise ValueError(f"exercise {exercise.name!r} is a view of {exercise.workload!r}, not {self.name!r}")
        self.variant(exercise.variant)  # the budget variant must exist
        if exercise.kind != "data":  # a data exercise's judge makes its own runs
            graded = [c.size for c in exercise.cases if not c.probe]
            for hard in self.all_hard_inputs(graded[0] if graded else self.default_size(False)):
                if not any(hard.fits(size) for size in graded):
                    raise ValueError(f"exercise {exercise.name!r}: no graded case has a size for the hard input "
                                     f"of {self.name!r}: {hard.about}")
        self.exercises[exercise.name] = exercise
        return exercise

    def all_hard_inputs(self, size: Size) -> tuple[HardInput, ...]:
        """The declared hard inputs, and a non-square shape for each output of 2 or more axes (at `size`)."""
        square = [HardInput(f"a non-square {name} (its axes differ: a swapped index shows)",
                            sizes=lambda s, name=name: len(set(self.output_specs(s)[name][0])) > 1)
                  for name, (shape, _) in self.output_specs(size).items() if len(shape) >= 2]
        return (*self.hard_inputs, *square)

    # sizes
    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    def axis(self, name: str) -> Axis:
        for a in self.axes:
            if a.name == name:
                return a
        raise SizeError(f"workload {self.name!r} has no axis {name!r}; its axes: {', '.join(self.axis_names)}")

    def default_size(self, on_gpu: bool | None = None) -> Size:
        gpu = _on_gpu() if on_gpu is None else on_gpu
        return Size(**{a.name: a.default(gpu) for a in self.axes})

    def size(self, *n: int, **axes: int) -> Size:
        """A Size for this workload: size(1000) for a one-axis workload, size(rows=64, cols=1000);
        axes left out take this back-end's default."""
        if n:
            if len(n) != 1 or len(self.axes) != 1 or axes:
                raise SizeError(f"workload {self.name!r} has axes {', '.join(self.axis_names)}: "
                                f"name them (e.g. {self.default_size(False)})")
            axes = {self.axes[0].name: n[0]}
        for name in axes:
            self.axis(name)
        return Size(**{a.name: axes.get(a.name, a.default(_on_gpu())) for a in self.axes})

    def parse_size(self, text: str) -> Size:
        """'rows=4096,cols=2^10' (or a bare number for a one-axis workload) -> Size."""
        text = str(text).strip()
        if "=" not in text:
            return self.size(parse_int(text))
        axes = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, eq, value = part.partition("=")
            if not eq:
                raise SizeError(f"{part!r}: write AXIS=VALUE (axes of {self.name}: {', '.join(self.axis_names)})")
            axes[name.strip()] = parse_int(value)
        return self.size(**axes)

    def chosen_size(self, text: str | None = None, n: int | None = None) -> Size:
        """What a command line asked for: --size text, else --n (one-axis workloads), else the default."""
        if text:
            return self.parse_size(text)
        if n is not None:
            return self.size(n)
        return self.default_size()

    def sweep(self, axis: str, values: tuple[int, ...] | None = None, base: Size | None = None) -> list[Size]:
        """Sizes that vary one axis, the others fixed (at `base`, else the back-end default)."""
        ax = self.axis(axis)
        base = base or self.default_size()
        return [base.replace(**{axis: v}) for v in (values or ax.sweep_values(_on_gpu()))]

    def parse_sweep(self, text: str, base: Size | None = None) -> tuple[str, list[Size]]:
        """'cols=2^10..2^15' (powers of two between), 'cols=1000,2000' or 'cols' (its default range)."""
        name, eq, spec = str(text).partition("=")
        name = name.strip()
        self.axis(name)
        if not eq:
            return name, self.sweep(name, base=base)
        if ".." in spec:
            lo, hi = (parse_int(s) for s in spec.split("..", 1))
            if lo < 1 or hi < lo:
                raise SizeError(f"sweep {text!r}: need 1 <= low <= high")
            values, v = [], lo
            while v <= hi:
                values.append(v)
                v *= 2
        else:
            values = [parse_int(s) for s in spec.split(",") if s.strip()]
        return name, self.sweep(name, tuple(values), base)

    def test_sizes(self) -> list[Size]:
        """The sizes every variant is checked at on the simulator: the default, then each axis at each
        of its simulator sweep values (the others at their defaults). Authors make them odd."""
        base = self.default_size(False)
        sizes = [base] + [base.replace(**{a.name: v}) for a in self.axes for v in a.sim_sweep]
        return list(dict.fromkeys(sizes))

    def describe_axes(self, on_gpu: bool | None = None) -> str:
        gpu = _on_gpu() if on_gpu is None else on_gpu
        return ", ".join(f"{a.name}={a.default(gpu)}" for a in self.axes)


def _on_gpu() -> bool:
    from .backend import BACKEND
    return BACKEND.on_device


# -- exercises: views of a workload ---------------------------------------------------------

Config = Callable[[Size], tuple[int, int]]


def grid_for(block: int, per_thread: int = 1) -> Config:
    """One thread per `per_thread` elements of the size (its product of axes), blocks of `block`."""
    def config(size: Size) -> tuple[int, int]:
        return max(1, -(-size.elements // (block * per_thread))), block
    config.__qualname__ = f"grid_for({block})"
    return config


def fixed(grid: int, block: int) -> Config:
    """The same grid whatever the size (a persistent kernel must cope)."""
    def config(size: Size) -> tuple[int, int]:
        return grid, block
    config.__qualname__ = f"fixed({grid}, {block})"
    return config


@dataclass(frozen=True)
class Case:
    """One graded size. seed: a public case's inputs; hidden: its inputs are drawn from seed and a seed
    chosen at grading time (grading/cases.build_cases); probe: the workload's symmetric inputs (a wrong
    index could pass)."""

    size: Size
    seed: int
    hidden: bool = False
    probe: bool = False


@dataclass(frozen=True)
class SpeedSpec:
    """The speed check (GPU): the student's kernel against a reference kernel at one large size."""

    size: Size
    reference: str                  # "module:attribute" of the reference solution's kernel
    reference_config: Config
    reps: int = 40


# The grader's checks of a kernel or host exercise, by id (the keys of Exercise.points): grading.judge.CHECKS
# scores them, in this order, and refuses to import if the two differ. Here, so that an exercise's points are
# checked when it is built without the problem objects importing the grader.
GRADED_CHECKS: tuple[str, ...] = (
    "correct (public)", "correct (hidden)", "launch budget", "traffic budget", "launches as asked",
    "one intermediate in global memory", "grid independent of n", "no race under perturbed schedules",
    "compiles for the course's GPUs", "speed")


def check_ids(ex: Exercise) -> tuple[str, ...]:
    """The checks `ex` may give points to: its judge's own (its `checks`) for a "data" exercise, else the grader's."""
    if ex.kind == "data":
        module, _, attr = ex.judge.partition(":")
        return tuple(getattr(getattr(importlib.import_module(module), attr), "checks", ()))
    return GRADED_CHECKS


def validate_points(ex: Exercise) -> None:
    """At build time: every key of ex.points names a check, and every value is a number >= 0."""
    known = check_ids(ex)
    for name, points in ex.points.items():
        if name not in known:
            raise ValueError(f"exercise {ex.name!r}: no check named {name!r}; the checks of a {ex.kind} exercise: "
                             f"{', '.join(known) or '(its judge declares none: give it a `checks` tuple)'}")
        if isinstance(points, bool) or not isinstance(points, (int, float)) or not points >= 0:
            raise ValueError(f"exercise {ex.name!r}: check {name!r} is worth {points!r}; points are a number >= 0")
    if "grid independent of n" in ex.points and not any(
            cfg(case.size)[0] * cfg(case.size)[1] < case.size.elements for case in ex.cases for cfg in ex.configs):
        raise ValueError(f"exercise {ex.name!r}: 'grid independent of n' needs a case with more elements than some "
                         f"launch configuration has threads")


@dataclass(frozen=True)
class Exercise:
    """What a student writes for a workload, and how it is graded.

    kind "kernel": the student writes a @cuda.jit kernel `entry`, launched with each of `configs`
                   (size -> (grid, block)); kind "host": a function `entry(**arrays)` that launches
                   kernels. Inputs, reference, tolerance, output specs and the symmetric-input probe
                   come from the workload; the launch and byte budgets from `variant`'s plan unless
                   overridden (say why in `budget_note`, which the student sees).
    kind "data":   a function `entry(argument)` that returns a value (PDL switches, a prediction);
                   `judge` ("module:attribute") says what each case calls it with, what the grader's
                   child runs with the value, and how the parent scores it (grading/grade.py).
    """

    name: str
    workload: str
    variant: str
    lesson: str
    title: str
    kind: str
    entry: str
    signature: str
    cases: tuple[Case, ...]
    points: Mapping[str, float]
    configs: tuple[Config, ...] = ()
    argument_order: tuple[str, ...] | None = None   # default: the inputs, then the outputs
    max_launches: int | None = None                 # default: the plan's launch count
    max_bytes: Callable[[Size], int] | None = None  # default: the plan's bytes
    budget_note: str = ""
    race_seeds: tuple[int, ...] = ()                # perturbed-schedule reruns (simulator)
    speed: SpeedSpec | None = None
    tolerance: Tolerance | None = None              # default: the workload's
    judge: str = ""                                 # kind "data": "module:attribute" of its judge

    def __post_init__(self) -> None:
        if self.kind not in ("kernel", "host", "data"):
            raise ValueError(f"exercise {self.name!r}: kind must be 'kernel', 'host' or 'data', not {self.kind!r}")
        if (self.kind == "data") != bool(self.judge):
            raise ValueError(f"exercise {self.name!r}: a 'data' exercise needs a judge, and only it has one")
        if self.kind == "kernel" and not self.configs:
            raise ValueError(f"exercise {self.name!r}: a kernel exercise needs at least one launch configuration")
        validate_points(self)  # every key of points names a check the grader has

    @property
    def spec(self) -> Workload:
        return get_workload(self.workload)

    @property
    def max_score(self) -> float:
        return float(sum(self.points.values()))

    @property
    def pattern(self) -> str:
        return self.spec.variant(self.variant).pattern

    def plan(self, size: Size) -> Plan:
        return self.spec.variant(self.variant).plan(size)

    def launch_budget(self, size: Size) -> int:
        return self.max_launches if self.max_launches is not None else self.plan(size).n_launches

    def byte_budget(self, size: Size) -> int:
        return self.max_bytes(size) if self.max_bytes is not None else self.plan(size).bytes_total

    def arguments(self, size: Size) -> tuple[str, ...]:
        if self.argument_order is not None:
            return self.argument_order
        w = self.spec
        inputs = w.make_inputs(size, np.random.default_rng(0))
        return (*inputs, *w.output_specs(size))

    def tol(self) -> Tolerance:
        return self.tolerance or self.spec.tolerance


# -- the registry ---------------------------------------------------------------------------

_REGISTRY: dict[str, Workload] = {}


def register(workload: Workload) -> Workload:
    if workload.name in _REGISTRY:
        raise ValueError(f"workload {workload.name!r} registered twice")
    if not workload.axes:
        raise ValueError(f"workload {workload.name!r} declares no axes")
    _REGISTRY[workload.name] = workload
    return workload


def all_workloads() -> dict[str, Workload]:
    """Every workload, in its topic's ORDER (then as registered), whichever module happened to be imported first."""
    topics = importlib.import_module(f"{__package__}.topics")
    topics.load()  # importing every topic's workload.py registers it
    return dict(sorted(_REGISTRY.items(), key=lambda item: topics.order_of(item[1].reference.__module__)))


def get_workload(name: str) -> Workload:
    known = all_workloads()
    try:
        return known[name]
    except KeyError:
        raise KeyError(f"unknown workload {name!r}; known workloads: {', '.join(sorted(known))}") from None
