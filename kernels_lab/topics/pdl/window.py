"""Diagnostic (H200): how many host-launched PDL kernels of one stream run at once.

The PDL study (pdl_h200.json) kept a timeline of G = 32 large tensors: host-launched `pdl` ran its
members eight at a time (member k + 8 began as member k ended), `graph_pdl` all 32 at once, and
took less than half the time. Prediction: the eight is CUDA_DEVICE_MAX_CONNECTIONS, the number of
hardware work queues the driver gives a context (default 8): each kernel that launches early, before
the one ahead of it in the stream has finished, needs a queue of its own. If so, the window follows
the setting (1 -> 1, 4 -> 4, 16 -> 16, 32 -> 32) and a graph, whose edges the driver lays out itself,
is not limited by it.

Control, so that a window that does not move is not a setting the driver ignored: stream a launches
two spinning one-block kernels A1 -> A2, then stream b one, B1. With one hardware queue B1 sits behind
A2, which waits for A1: B1 begins about one spin after A1 (a false dependency); with several queues
it begins beside A1.

Each setting runs in a child process (the driver reads the variable when it creates the context):
a G = 32 group of large tensors (sizes drawn as the study draws them, not the study's own), `pdl` and
`graph_pdl`, the study's timing loop (kernels_lab.topics.pdl.bench), then the control.
Usage: python -m kernels_lab.topics.pdl.window OUT.json
"""

import json
import os
import subprocess
import sys

SETTINGS = (None, 1, 4, 16, 32)  # None: the driver's default
G, SIZE_CLASS, VARIANTS = 32, "large", ("pdl", "graph_pdl")
SPIN_US = 300
CHILD_S = 300


def streams_control() -> float:
    """Microseconds from A1's start to B1's start (median of 5), as the module's docstring says."""
    import numpy as np

    from kernels_lab.intrinsics import globaltimer
    from kernels_lab.runtime import cuda

    @cuda.jit
    def spin(stamps, k, ns):
        t0 = globaltimer()
        while globaltimer() - t0 < ns:  # bounded: ends ns after it began
            pass
        if cuda.threadIdx.x == 0:
            stamps[k] = t0

    stamps = cuda.to_device(np.zeros(3, np.uint64))
    a, b = cuda.stream(), cuda.stream()
    spin[1, 32](stamps, 0, 1000)  # compile before timing
    cuda.synchronize()
    delays = []
    for _ in range(5):
        for k, stream in ((0, a), (1, a), (2, b)):  # A1, A2 on stream a, then B1 on stream b
            spin[1, 32, stream](stamps, k, SPIN_US * 1000)
        cuda.synchronize()
        s = stamps.copy_to_host().astype(np.int64)
        delays.append((s[2] - s[0]) / 1e3)
    return float(np.median(delays))


def child() -> None:
    from kernels_lab.topics.pdl.bench import TIMELINES_KEPT, measure_pdl, members_at_once
    assert (G, SIZE_CLASS) in TIMELINES_KEPT, "the study keeps no timeline for this group: add it to TIMELINES_KEPT"
    setting = os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")
    records = measure_pdl(groups=(G,), classes=(SIZE_CLASS,), reps=10, variants=VARIANTS)
    control = streams_control()
    print(json.dumps([{**r, "kind": "pdl_window", "max_connections": int(setting) if setting else None,
                       "members_at_once": members_at_once(r["timeline"]), "control_b1_after_a1_us": control,
                       "control_spin_us": SPIN_US}
                      for r in records]))


def main(out: str) -> None:
    from kernels_lab.profile.results import dump, make_meta
    records = []
    for setting in SETTINGS:
        env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
        if setting is not None:
            env["CUDA_DEVICE_MAX_CONNECTIONS"] = str(setting)
        try:
            proc = subprocess.run([sys.executable, "-m", __spec__.name, "--child"], env=env, capture_output=True, text=True,
                                  timeout=CHILD_S)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"CUDA_DEVICE_MAX_CONNECTIONS={setting}: the child did not finish within {CHILD_S} s")
        if proc.returncode != 0:
            raise SystemExit(f"CUDA_DEVICE_MAX_CONNECTIONS={setting}: the child failed:\n{proc.stderr[-2000:]}")
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        for r in got:
            print(f"CUDA_DEVICE_MAX_CONNECTIONS={setting or 'default'}: {r['variant']:<9} "
                  f"{r['members_at_once']:>2} of {G} members at once, median end to end {r['e2e_us']:8.1f} us; "
                  f"control: B1 began {r['control_b1_after_a1_us']:.1f} us after A1")
        records += got
    print(f"wrote {dump(make_meta(), records, out)}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        child()
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        raise SystemExit(__doc__)
