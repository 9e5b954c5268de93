"""Diagnostic (H200): which poll load, and how much of a round trip is the host's code.

For each poll kind ('acquire', 'relaxed'), 1 KiB payloads, one producer, 2000 requests:
  raw echo   the host writes seq and spins on the answer word, no API bookkeeping, no job
  api echo   submit() + result() with the consumer in echo mode (no job)
  api job    submit() + result() with the dot product
p50 / p99 of the host round trip and the GPU's own p50 (seen -> answer stored).
Usage: python benchmarks/consumer_polls.py OUT.json
"""

import sys
import time

import numpy as np

from kernels_lab.hostwait import wait_for_mark
from kernels_lab.patterns.consumer import PersistentConsumer, Ticket
from kernels_lab.profile.results import dump, make_meta


def stats(samples, gpu):
    us = np.asarray(samples) * 1e6
    return {"p50_us": float(np.median(us)), "p99_us": float(np.percentile(us, 99)),
            "gpu_us_p50": float(np.median(gpu)) / 1e3 if gpu else None}


def main(path):
    rng = np.random.default_rng(0)
    size, n = 256, 2000
    w = rng.standard_normal(size).astype(np.float32)
    payloads = [rng.standard_normal(size).astype(np.float32) for _ in range(n)]
    rows = []
    for poll in ("acquire", "relaxed"):
        for mode in ("raw echo", "api echo", "api job"):
            c = PersistentConsumer(w, slots=64, blocks=4, echo=mode != "api job", poll=poll).start()
            lat, gpu = [], []
            if mode == "raw echo":  # the protocol alone: tickets in order, no payload, no bookkeeping
                seq, addr = c._seq, c._answer_address
                for t in range(n + 50):
                    slot = t % c.slots
                    t0 = time.perf_counter()
                    seq[slot] = t + 1
                    while not wait_for_mark(addr + 8 * slot, t + 1):
                        pass
                    if t >= 50:
                        lat.append(time.perf_counter() - t0)
                        gpu.append(c.gpu_span_ns(Ticket(t, slot)))
                c.stop(drain=False)  # nothing went through the API: nothing to drain
            else:
                for k, p in enumerate(payloads[:50] + payloads):
                    t0 = time.perf_counter()
                    tk = c.submit(p, timeout=5)
                    value = c.result(tk, timeout=5)
                    if k >= 50:
                        lat.append(time.perf_counter() - t0)
                        gpu.append(c.gpu_span_ns(tk))
                if mode == "api job":
                    want = float(payloads[-1].astype(np.float64) @ w.astype(np.float64))
                    assert abs(value - want) < 1e-3 * max(1, abs(want)), (value, want)
                c.stop()
            row = {"kind": "consumer_poll", "poll": poll, "mode": mode, "payload_bytes": 4 * size, **stats(lat, gpu)}
            print(row, flush=True)
            rows.append(row)
    dump(make_meta(f"python benchmarks/consumer_polls.py {path}", None), rows, path)


if __name__ == "__main__":
    main(sys.argv[1])
