"""Device time with CUDA events, cold L2, many repetitions; host time per launch beside it.

    warm-up (compiles, loads modules)  ->  for each repetition: flush L2 (or, for a warm-cache
    figure, sleep ~50 us on the GPU), event, launch, event  ->  median and quartiles of the
    event times; then host wall time per launch, measured separately by issuing launches
    back to back (their gap to device time is launch overhead).

The flush (~40 us on an H200) or the spin (~100 us) runs just before the start event, so
the host's dispatch hides behind it and the events time the GPU's work. What a chain of
dependent launches dispatches after that head start shows up in the device time, as it
would for a caller: so cold-L2 times of a 3-launch chain at small n include ~15-20 us of
exposed dispatch per extra launch, warm-cache times (longer head start) almost none.

Two clocks, the same launchers, interleaved: time_launchers is the one-pass latency (a cold cache and
an idle GPU before each pass: what one call costs), time_steady the steady state (passes issued back to
back, warm, the host running ahead: what a call costs inside a loop of them).

The simulator has no clock worth the name: every function here raises there (why_untimed() says
why beforehand), and callers report timings as unavailable instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..backend import BACKEND
from ..runtime import cuda, device_facts


class TimingUnavailable(RuntimeError):
    """Timing needs a GPU."""


@dataclass(frozen=True)
class Timing:
    median_ms: float
    q1_ms: float
    q3_ms: float
    reps: int
    host_us_per_call: float
    samples_ms: tuple[float, ...] = ()  # every repetition, in order (interleaved with the other launchers')

    @property
    def spread(self) -> float:
        """Interquartile range over median: the noise a comparison must beat."""
        return (self.q3_ms - self.q1_ms) / self.median_ms if self.median_ms > 0 else float("inf")


@cuda.jit
def _scribble(buf, value):
    i = cuda.grid(1)
    if i < buf.size:
        buf[i] = value + i


@cuda.jit
def _spin(cell, rounds):
    # A bounded wait of dependent FMAs in one thread (~100 us for 50k rounds on an H200):
    # gives the host a head start while touching one element, so L2 stays warm.
    # (nanosleep is only a hint and may return at once.)
    x = cell[0]
    for _ in range(rounds):
        x = x * 0.999999 + 1.0
    cell[0] = x


class L2Flusher:
    """Writes a buffer of twice the L2 size, so the next kernel starts with a cold cache."""

    def __init__(self, stream=0):
        l2 = max(device_facts().l2_bytes, 1 << 20)
        self.buf = cuda.device_array(2 * l2 // 4, dtype=np.int32)
        self.stream = stream
        self.calls = 0
        self.grid = (self.buf.size + 255) // 256

    def __call__(self) -> None:
        self.calls += 1
        _scribble[self.grid, 256, self.stream](self.buf, np.int32(self.calls))


def why_untimed() -> str | None:
    """Why this back-end cannot time (the simulator runs kernels as Python threads), or None."""
    return BACKEND.untimed


def _require_gpu() -> None:
    if (why := why_untimed()) is not None:
        raise TimingUnavailable(why)


def time_launchers(launchers: Sequence[Callable[[], None]], *, reps: int = 30, warmup: int = 3,
                   flush: bool = True, stream=0) -> list[Timing]:
    """Time several launchers interleaved (rep by rep), so drift hits them all alike.

    Each launcher is a zero-argument callable that enqueues its work on `stream`.
    """
    _require_gpu()
    if flush:
        flusher = L2Flusher(stream)
    else:
        cell = cuda.to_device(np.zeros(1, np.float32), stream=stream)
        flusher = lambda: _spin[1, 1, stream](cell, 50_000)  # noqa: E731
    for launch in launchers:
        for _ in range(warmup):
            launch()
    samples = _interleaved(launchers, reps, [1] * len(launchers), flusher, stream)
    host = [host_us_per_call(launch, stream=stream) for launch in launchers]
    return [_summary(s, h) for s, h in zip(samples, host)]


def time_steady(launchers: Sequence[Callable[[], None]], *, reps: int = 10, batch_ms: float = 2.0,
                once_ms: Sequence[float] | None = None, stream=0) -> list[Timing]:
    """The steady state: each repetition times `passes` calls issued back to back (no flush, the host
    ahead of the GPU) and counts their mean; launchers interleaved rep by rep. `passes` per launcher
    fills about `batch_ms` of GPU time (from once_ms, its one-pass times; 10 when not given).
    host_us_per_call is left 0: time_launchers measures it."""
    _require_gpu()
    passes = [max(1, min(200, int(batch_ms / t))) if t and t > 0 else 10
              for t in (once_ms or [0.0] * len(launchers))]
    for launch in launchers:
        launch()
    return [_summary(s, 0.0) for s in _interleaved(launchers, reps, passes, None, stream)]


def _interleaved(launchers: Sequence[Callable[[], None]], reps: int, passes: Sequence[int],
                 before: Callable[[], None] | None, stream) -> list[list[float]]:
    """ms per pass of each launcher, rep by rep: `before` (a flush) ahead of the start event, then
    passes[k] calls back to back between the events."""
    cuda.synchronize()
    samples: list[list[float]] = [[] for _ in launchers]
    start, end = cuda.event(), cuda.event()
    for _ in range(reps):
        for k, launch in enumerate(launchers):
            if before is not None:
                before()
            start.record(stream)
            for _ in range(passes[k]):
                launch()
            end.record(stream)
            end.synchronize()
            samples[k].append(start.elapsed_time(end) / passes[k])
    return samples


def _summary(samples: list[float], host_us: float) -> Timing:
    q1, med, q3 = np.percentile(np.asarray(samples), [25, 50, 75])
    return Timing(float(med), float(q1), float(q3), len(samples), host_us, tuple(float(x) for x in samples))


def time_launcher(launch: Callable[[], None], **kwargs) -> Timing:
    return time_launchers([launch], **kwargs)[0]


def host_us_per_call(launch: Callable[[], None], calls: int = 20, stream=0) -> float:
    """Host wall time to issue one call (not to finish it), median of a few batches."""
    _require_gpu()
    batches = []
    for _ in range(3):
        cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            launch()
        batches.append((time.perf_counter() - t0) / calls * 1e6)
        cuda.synchronize()
    return float(np.median(batches))
