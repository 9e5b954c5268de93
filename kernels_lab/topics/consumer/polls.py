"""Diagnostic (H200): which queue protocol, and how much of a round trip is the host's code.

For each protocol ('ll', 'seq', 'seq-relaxed'), 1 KiB payloads, one producer, 2000 requests:
  raw echo   the host publishes and spins on the answer word in one compiled call, no API
             bookkeeping, no job (the kernel in echo mode)
  api echo   request() with the consumer in echo mode (no job)
  api job    request() with the dot product
p50 / p99 of the host round trip and the GPU's own p50 (seen -> answer stored).
And the host's copy of a payload into a queue row (publish_row, no GPU involved) into ordinary
memory, mapped memory (the queue's) and pinned memory, from a source in cache or not: does
writing into memory the GPU can read cost the host more than ordinary memory?
Usage: python -m kernels_lab.topics.consumer.polls OUT.json
"""

import sys
import time

import numpy as np

from kernels_lab.topics.consumer.hostpath import publish_row, word_address
from kernels_lab.topics.consumer import PROTOCOLS, PersistentConsumer
from kernels_lab.profile.results import dump, make_meta
from kernels_lab.backend import BACKEND
from kernels_lab.runtime import cuda


def stats(samples, gpu):
    us = np.asarray(samples) * 1e6
    return {"p50_us": float(np.median(us)), "p99_us": float(np.percentile(us, 99)),
            "gpu_us_p50": float(np.median(gpu)) / 1e3 if gpu else None}


def raw_round_trip(c, t, payload):
    """Publish ticket t and spin for its answer: the protocol alone (tickets in order, no API)."""
    while not c._put_and_wait(*c._queue, t % c.slots, payload, t + 1, c._answer, 1 << 20):
        pass


def host_copies(rng, slots=64, n=2000):
    seq = np.zeros(1, np.int32)
    seq_address = word_address(seq, 0)
    rows = []
    for size in (256, 1024, 4096):
        sources = [rng.standard_normal(size).astype(np.float32) for _ in range(n)]  # 2000 x: out of cache
        targets = {"numpy": np.zeros(slots * size, np.float32),
                   "mapped": BACKEND.host_view(cuda.mapped_array(slots * size, np.float32)),
                   "pinned": cuda.pinned_array(slots * size, np.float32)}
        for target, buf in targets.items():
            for source in ("hot", "cold"):
                times = []
                for k in range(n):
                    data = sources[0] if source == "hot" else sources[k]
                    t0 = time.perf_counter()
                    publish_row(buf, (k % slots) * size, data, seq_address, k)
                    times.append(time.perf_counter() - t0)
                us = float(np.median(times[100:])) * 1e6
                row = {"kind": "host_copy", "target": target, "source": source, "payload_bytes": 4 * size,
                       "us_p50": us, "GBs": 4 * size / us / 1e3}
                print(row, flush=True)
                rows.append(row)
    return rows


def main(path):
    rng = np.random.default_rng(0)
    size, n = 256, 2000
    w = rng.standard_normal(size).astype(np.float32)
    payloads = [rng.standard_normal(size).astype(np.float32) for _ in range(n)]
    rows = []
    for protocol in PROTOCOLS:
        for mode in ("raw echo", "api echo", "api job"):
            c = PersistentConsumer(w, slots=64, blocks=4, echo=mode != "api job", protocol=protocol).start()
            lat, gpu = [], []
            for k, p in enumerate(payloads[:50] + payloads):
                t0 = time.perf_counter()
                if mode == "raw echo":
                    raw_round_trip(c, k, p)
                else:
                    value = c.request(p, timeout=5)
                if k >= 50:
                    lat.append(time.perf_counter() - t0)
                    gpu.append(c.gpu_span_ns(k))
            if mode == "api job":
                want = float(payloads[-1].astype(np.float64) @ w.astype(np.float64))
                assert abs(value - want) < 1e-3 * max(1, abs(want)), (value, want)
            c.stop(drain=mode != "raw echo")  # raw tickets went around the API: nothing to drain
            row = {"kind": "consumer_poll", "protocol": protocol, "mode": mode, "payload_bytes": 4 * size,
                   **stats(lat, gpu)}
            print(row, flush=True)
            rows.append(row)
    rows += host_copies(rng)
    dump(make_meta(f"python -m kernels_lab.topics.consumer.polls {path}", None), rows, path)


if __name__ == "__main__":
    main(sys.argv[1])
