"""The one idea: a workload is a problem, a variant is one way to compute it on the GPU.

Every variant states its plan for a size n: the kernels it launches, grid and block of
each, and the global-memory bytes each one reads and writes. Correctness checks, the
traffic model, the measurements and the grader all start from this interface.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

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


Launcher = Callable[[], None]


def kernel_name(kernel: Any) -> str:
    """The Python name of a @cuda.jit function, on either back-end."""
    return getattr(kernel, "py_func", kernel).__name__


@dataclass(frozen=True)
class Variant:
    """One way to compute a workload.

    plan(n)                      -> Plan: what it will launch for size n
    bind(inputs, outputs, stream) -> Launcher: validates the device arrays, allocates any
                                    scratch once, and returns a zero-argument callable that
                                    launches the work (what timers, graphs and tests call).
    """

    name: str
    pattern: str
    about: str
    plan: Callable[[int], Plan]
    bind: Callable[..., Launcher]

    def __post_init__(self) -> None:
        if self.pattern not in PATTERNS:
            raise ValueError(f"variant {self.name!r}: unknown pattern {self.pattern!r}; expected one of {PATTERNS}")


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


@dataclass
class Workload:
    """A problem: a float64 NumPy reference, a seeded input maker and a tolerance.

    make_inputs(n, rng) -> {name: host array or scalar} (fresh, random, asymmetric)
    reference(inputs)   -> {output name: float64 array}
    output_specs(n)     -> {output name: (shape, dtype)}
    """

    name: str
    about: str
    make_inputs: Callable[[int, np.random.Generator], dict[str, Any]]
    reference: Callable[[Mapping[str, Any]], dict[str, np.ndarray]]
    output_specs: Callable[[int], dict[str, tuple[tuple[int, ...], np.dtype]]]
    tolerance: Tolerance
    sizes: dict[str, int]  # "gpu" / "simulator": the demo size on each back-end
    variants: dict[str, Variant] = field(default_factory=dict)

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


_REGISTRY: dict[str, Workload] = {}


def register(workload: Workload) -> Workload:
    if workload.name in _REGISTRY:
        raise ValueError(f"workload {workload.name!r} registered twice")
    _REGISTRY[workload.name] = workload
    return workload


def workloads() -> dict[str, Workload]:
    from . import patterns  # noqa: F401  (importing the pattern modules registers them)
    return dict(_REGISTRY)


def get_workload(name: str) -> Workload:
    known = workloads()
    try:
        return known[name]
    except KeyError:
        raise KeyError(f"unknown workload {name!r}; known workloads: {', '.join(sorted(known))}") from None
