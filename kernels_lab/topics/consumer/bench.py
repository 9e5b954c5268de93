"""Round-trip latency and throughput: persistent consumer against one launch per request.

Modes, all serving the same dot-product job from payloads in mapped host memory:
  ideal           the persistent consumer in echo mode, 'seq' protocol: a host write (one word)
                  seen by the GPU, and its answer back
  persistent-ll   the persistent consumer doing the job, 'll' protocol (marks in the payload words)
  persistent-seq  the same with the 'seq' protocol (a seq word, then the payload)
  launch          one dot_kernel launch (numba dispatch) and a synchronize per request
  batch8          one launch per 8 requests (throughput: 8 answers per launch; latency: the batch's)
Latency: one producer, requests back to back, p50 / p90 / p99 of the host round trip, and for
the persistent modes the GPU's own share (gpu_us_p50: %globaltimer from seeing the request to
answering it); the rest is the host's code and the PCIe bus.
Throughput: 1, 2, 4 producer threads for a fixed time, answers per second.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable

import numpy as np

from . import LaunchPerRequest, PersistentConsumer, reference
from ...backend import BACKEND
from ...instrument.timing import TimingUnavailable
from ...profile.runs import Bench


MODES = ("ideal", "persistent-ll", "persistent-seq", "launch", "batch8")
PERSISTENT_PROTOCOLS = {"ideal": "seq", "persistent-ll": "ll", "persistent-seq": "seq"}


def _percentiles(samples_s: list[float]) -> dict[str, Any]:
    us = np.asarray(samples_s) * 1e6
    p50, p90, p99 = np.percentile(us, [50, 90, 99])
    # 101 quantiles keep the shape of the distribution for the CDF plot without every sample
    return {"p50_us": float(p50), "p90_us": float(p90), "p99_us": float(p99),
            "latency_quantiles_us": [float(q) for q in np.percentile(us, np.linspace(0, 100, 101))]}


def _latency(call: Callable[[np.ndarray], Any], payloads: list[np.ndarray], warmup: int = 50,
             after: Callable[[], None] | None = None) -> list[float]:
    """Host round trips of back-to-back requests; `after` runs outside the timed region."""
    for p in payloads[:warmup]:
        call(p)
    out = []
    for p in payloads:
        t0 = time.perf_counter()
        call(p)
        out.append(time.perf_counter() - t0)
        if after:
            after()
    return out


def _throughput(call: Callable[[np.ndarray], Any], payload: np.ndarray, producers: int, seconds: float,
                answers_per_call: int) -> float:
    counts = [0] * producers
    errors: list[BaseException] = []
    stop = time.perf_counter() + seconds

    def worker(k: int) -> None:
        try:
            while time.perf_counter() < stop and not errors:
                call(payload)
                counts[k] += answers_per_call
        except BaseException as e:  # noqa: BLE001  (re-raised in the caller's thread below)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(producers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return sum(counts) / (time.perf_counter() - t0)


def measure_consumer(payload_floats=(256, 1024, 4096), producers=(1, 2, 4), requests: int = 2000,
                     seconds: float = 0.5, blocks: int = 4, seed: int = 0) -> list[dict[str, Any]]:
    if not BACKEND.can_time:
        raise TimingUnavailable("round-trip latencies in microseconds need a GPU")
    rng = np.random.default_rng(seed)
    records = []
    for size in payload_floats:
        w = rng.standard_normal(size).astype(np.float32)
        payloads = [rng.standard_normal(size).astype(np.float32) for _ in range(requests)]
        for mode in MODES:
            print(f"consumer benchmark: {mode}, payload {4 * size} B", file=sys.stderr, flush=True)
            gpu_ns: list[int] = []
            after: Callable[[], None] | None = None
            if mode in PERSISTENT_PROTOCOLS:
                server = PersistentConsumer(w, slots=64, blocks=blocks, echo=(mode == "ideal"),
                                            protocol=PERSISTENT_PROTOCOLS[mode]).start()

                def call(p, s=server):
                    return s.request(p, timeout=5)

                def record_gpu_span(s=server):  # one producer: the last ticket is the one just answered
                    gpu_ns.append(s.gpu_span_ns(s.last_ticket))
                after = record_gpu_span
                answers, close = 1, server.stop
            else:
                batch = 8 if mode == "batch8" else 1
                base = LaunchPerRequest(w, batch=batch)

                def call(p, b=base, k=batch):
                    return b(np.tile(p, k))
                answers, close = batch, (lambda: None)
            if mode != "ideal":  # correctness first, on fresh inputs
                got = np.atleast_1d(call(payloads[0]))[0]
                want = reference(payloads[0], w)
                if not np.isclose(got, want, rtol=1e-3, atol=1e-3):
                    raise RuntimeError(f"consumer benchmark: {mode} answered {got}, expected {want}")
            lat = _percentiles(_latency(call, payloads, after=after))
            if gpu_ns:  # the GPU's share: from seeing the request to its answer leaving
                lat["gpu_us_p50"] = float(np.median(gpu_ns)) / 1e3
            for k in producers:
                rps = _throughput(call, payloads[1], k, seconds, answers)
                records.append({"kind": "consumer", "mode": mode, "payload_bytes": 4 * size, "producers": k,
                                "throughput_rps": rps, "requests": requests, **lat,
                                "protocol": PERSISTENT_PROTOCOLS.get(mode)})
            close()
    return records


BENCH = Bench("the persistent consumer's latency and throughput against one launch per request", measure_consumer)  # `kernels-lab bench consumer`
