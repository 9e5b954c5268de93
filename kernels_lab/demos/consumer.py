"""Demo: a persistent consumer draining a host-fed queue, against one launch per request."""

from __future__ import annotations

import argparse

import numpy as np

from ..consumer import LaunchPerRequest, PersistentConsumer, default_protocol, reference
from ..profile import plots, results
from ..runtime import ON_GPU, device_facts
from . import Demo, committed_results, show_committed

TAKES_SIZE = False  # fixed configurations: the CLI refuses --n / --size for this demo


def narrate(records: list[dict]) -> str:
    one = {(r["mode"], r["payload_bytes"]): r for r in records if r["producers"] == 1}
    size = plots.middle_payload_bytes(records)
    mode = f"persistent-{default_protocol(size)}"  # what PersistentConsumer picks at this size
    other = "persistent-seq" if mode == "persistent-ll" else "persistent-ll"
    pers, launch, ideal = one[(mode, size)], one[("launch", size)], one[("ideal", size)]
    most = max(r["producers"] for r in records)
    tp = {r["mode"]: r["throughput_rps"] for r in records if r["producers"] == most and r["payload_bytes"] == size}
    return (f"With a {size // 1024} KiB payload, a request answered by the resident kernel ({mode}) takes "
            f"{pers['p50_us']:.1f} us (p50; p99 {pers['p99_us']:.1f} us; {other}: {one[(other, size)]['p50_us']:.1f} us) "
            f"against {launch['p50_us']:.1f} us for one launch per request: {launch['p50_us'] / pers['p50_us']:.1f}x. "
            f"A host write seen by the GPU and back (through the same API) is {ideal['p50_us']:.1f} us. "
            f"With {most} producer threads the consumer answers {tp[mode]:,.0f} requests/s, "
            f"{tp[mode] / tp['launch']:.1f}x one launch per request.")


def run(args: argparse.Namespace) -> int:
    print(f"backend: {device_facts().describe()}")
    if not ON_GPU:
        rng = np.random.default_rng(0)
        w = rng.standard_normal(64).astype(np.float32)
        payloads = [rng.standard_normal(64).astype(np.float32) for _ in range(4)]
        print("On the simulator the consumer kernel runs on a Python thread (a simulated launch blocks its caller), "
              "with one block; timings are not available.")
        with PersistentConsumer(w, slots=2, idle_timeout_s=30) as c:
            got = [c.request(p, timeout=30) for p in payloads]
        base = LaunchPerRequest(w)
        ok = all(np.isclose(g, reference(p, w), rtol=1e-4, atol=1e-4) and
                 np.isclose(base(p)[0], reference(p, w), rtol=1e-4, atol=1e-4) for g, p in zip(got, payloads))
        print(f"{len(payloads)} requests through the persistent consumer and the one-launch baseline: "
              f"{'all correct' if ok else 'WRONG'}; consumer status {c.status()}")
        made = show_committed("consumer_h200.json", args.out.parent, "consumer")
        if (path := committed_results("consumer_h200.json")) is not None:
            print(narrate(results.load(path)["records"]))
        print("\n".join(f"wrote {m}" for m in made))
        return 0 if ok else 1
    from ..profile.consumer_bench import measure_consumer
    records = measure_consumer(payload_floats=(256, 1024, 4096), producers=(1, 4), requests=1000, seconds=0.3)
    for r in records:
        print(f"  {r['mode']:<14} {r['payload_bytes']:>6} B  {r['producers']} producer(s)  p50 {r['p50_us']:7.1f} us  "
              f"p99 {r['p99_us']:7.1f} us  {r['throughput_rps']:>10,.0f} req/s")
    print(narrate(records))
    meta = results.make_meta(args.command_line, None)
    results.dump(meta, records, args.json)
    made = [plots.consumer_latency_cdf(records, meta, args.out),
            plots.consumer_throughput(records, meta, args.out.with_name(args.out.stem + "_throughput.png"))]
    print(f"wrote {args.json}, " + ", ".join(map(str, made)))
    return 0


DEMO = Demo("consumer", "a persistent kernel serving a host-fed queue vs one launch per request", run, order=3)
