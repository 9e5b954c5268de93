"""Demo: a persistent consumer draining a host-fed queue, against one launch per request."""

from __future__ import annotations

import numpy as np

from ...backend import BACKEND
from . import LaunchPerRequest, PersistentConsumer, default_protocol, reference
from ...demos import Demo, DemoRequest
from .figures import HEADLINE_PAYLOAD, consumer_latency_cdf, consumer_throughput, headline_payload_bytes
from ...demos.common import opening, show_committed, write_measured


def table(records: list[dict]) -> str:
    """One row per mode and payload: the latency, measured with one producer thread, then the answers per
    second measured with each number of producer threads."""
    counts = sorted({r["producers"] for r in records})
    head = f"  {'mode':<15}{'payload':>8}  {'p50 us':>7} {'p99 us':>7}   " + "".join(
        f"{f'req/s, {k} prod.':>16}" for k in counts)
    lines = [head, "  " + "-" * (len(head) - 2)]
    for (mode, size) in dict.fromkeys((r["mode"], r["payload_bytes"]) for r in records):
        rows = {r["producers"]: r for r in records if (r["mode"], r["payload_bytes"]) == (mode, size)}
        one = rows[min(rows)]
        lines.append(f"  {mode:<15}{size:>6} B  {one['p50_us']:7.1f} {one['p99_us']:7.1f}   " + "".join(
            f"{rows[k]['throughput_rps']:>16,.0f}" if k in rows else f"{'-':>16}" for k in counts))
    return "\n".join(lines + [f"  (latency with {min(counts)} producer thread; throughput with each count)"])


def narrate(records: list[dict]) -> str:
    one = {(r["mode"], r["payload_bytes"]): r for r in records if r["producers"] == 1}
    size = headline_payload_bytes(records)  # the payload the README quotes
    mode = f"persistent-{default_protocol(size)}"  # what PersistentConsumer picks at this size
    other = "persistent-seq" if mode == "persistent-ll" else "persistent-ll"
    pers, launch, ideal = one[(mode, size)], one[("launch", size)], one[("ideal", size)]
    most = max(r["producers"] for r in records)
    tp = {r["mode"]: r["throughput_rps"] for r in records if r["producers"] == most and r["payload_bytes"] == size}
    return (f"With a {size // 1024} KiB payload, a request answered by the resident kernel ({mode}) takes "
            f"{pers['p50_us']:.1f} us (p50; p99 {pers['p99_us']:.1f} us; {other}: {one[(other, size)]['p50_us']:.1f} us) "
            f"against {launch['p50_us']:.1f} us for one launch per request: {launch['p50_us'] / pers['p50_us']:.1f}x. "
            f"A host write seen by the GPU and echoed back through the same API, the GPU doing nothing else "
            f"({ideal['protocol']} protocol), is {ideal['p50_us']:.1f} us. "
            f"With {most} producer threads the consumer answers {tp[mode]:,.0f} requests/s, "
            f"{tp[mode] / tp['launch']:.1f}x one launch per request.")


def run(request: DemoRequest) -> int:
    if not BACKEND.can_time:
        opening()
        rng = np.random.default_rng(0)
        w = rng.standard_normal(64).astype(np.float32)
        payloads = [rng.standard_normal(64).astype(np.float32) for _ in range(4)]
        print("On the simulator the consumer kernel runs on a Python thread (a simulated launch blocks its caller), "
              "with one block.")
        with PersistentConsumer(w, slots=2, idle_timeout_s=30) as c:
            got = [c.request(p, timeout=30) for p in payloads]
        base = LaunchPerRequest(w)
        ok = all(np.isclose(g, reference(p, w), rtol=1e-4, atol=1e-4) and
                 np.isclose(base(p)[0], reference(p, w), rtol=1e-4, atol=1e-4) for g, p in zip(got, payloads))
        print(f"{len(payloads)} requests through the persistent consumer and the one-launch baseline: "
              f"{'all correct' if ok else 'WRONG'}; consumer status {c.status()}")
        show_committed("consumer_h200.json", lambda doc: table(doc["records"]) + "\n" + narrate(doc["records"]),
                       request.out, "consumer")
        return 0 if ok else 1
    print(f"backend: {BACKEND.describe()}")
    from .bench import measure_consumer
    # the README's payload (1 KiB = 256 floats) only: every mode's latency and throughput in a few seconds
    records = measure_consumer(payload_floats=(HEADLINE_PAYLOAD // 4,), producers=(1, 4), requests=1000,
                               seconds=0.25)
    print(table(records))
    print(narrate(records))
    write_measured(request, records, {"latency": consumer_latency_cdf, "throughput": consumer_throughput})
    return 0


DEMO = Demo("consumer", "a persistent kernel serving a host-fed queue vs one launch per request", run, order=3,
            takes_size=False, writes_results_here=False)
