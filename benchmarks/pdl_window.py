"""Diagnostic (H200): how many host-launched PDL kernels of one stream run at once.

The PDL study (pdl_h200.json) kept a timeline of G = 32 large tensors: host-launched `pdl` ran its
members eight at a time (member k + 8 began as member k ended), `graph_pdl` all 32 at once, and
took less than half the time. Prediction: the eight is CUDA_DEVICE_MAX_CONNECTIONS, the number of
hardware work queues the driver gives a context (default 8): each kernel that launches early, before
the one ahead of it in the stream has finished, needs a queue of its own. If so, the window follows
the setting (4 -> 4, 16 -> 16, 32 -> 32) and a graph, whose edges the driver lays out itself, is
not limited by it.

Each setting runs in a child process (the driver reads the variable when it creates the context):
G = 32 large tensors, `pdl` and `graph_pdl`, the study's timing loop (kernels_lab.profile.pdl_bench).
Usage: python benchmarks/pdl_window.py OUT.json
"""

import json
import os
import subprocess
import sys

SETTINGS = (None, 4, 16, 32)  # None: the driver's default
G, SIZE_CLASS, VARIANTS = 32, "large", ("pdl", "graph_pdl")


def child() -> None:
    from kernels_lab.profile.pdl_bench import measure_pdl, members_at_once
    setting = os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")
    records = measure_pdl(groups=(G,), classes=(SIZE_CLASS,), reps=10, variants=VARIANTS)
    print(json.dumps([{**r, "kind": "pdl_window", "max_connections": int(setting) if setting else None,
                       "members_at_once": members_at_once(r["timeline"])} for r in records]))


def main(out: str) -> None:
    from kernels_lab.profile.results import dump, make_meta
    records = []
    for setting in SETTINGS:
        env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
        if setting is not None:
            env["CUDA_DEVICE_MAX_CONNECTIONS"] = str(setting)
        proc = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True,
                              timeout=300)
        if proc.returncode != 0:
            raise SystemExit(f"CUDA_DEVICE_MAX_CONNECTIONS={setting}: the child failed:\n{proc.stderr[-2000:]}")
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        for r in got:
            print(f"CUDA_DEVICE_MAX_CONNECTIONS={setting or 'default'}: {r['variant']:<9} "
                  f"{r['members_at_once']:>2} of {G} members at once, median end to end {r['e2e_us']:8.1f} us")
        records += got
    print(f"wrote {dump(make_meta(), records, out)}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        child()
    else:
        main(sys.argv[1])
