"""The staged cluster kernels' pipeline depth and layout, beside `cluster` (an exploration, run through the study
harness: every line checked against float64 before and after timing).

    python3 benchmarks/staged_probe.py OUT softmax|layernorm      (a GPU: writes OUT/{softmax,layernorm}_staged.json)

Lines: the registered `cluster`, v20 (softmax) or v6 (layernorm), and that kernel with three stages (s3), with
4 chunks a thread in 16 KB stages (c4: more, smaller blocks), both (c4s3), four stages (c4s4), and a cluster per
row (percluster: no row ahead, the control). figures/data/staged_probe_*_h100.json were written by this script
(then .gpu/probe_staged.py, before the dynamic shared memory opt-in fix: c4s3 failed to launch at 48 KB).
"""

from __future__ import annotations

import dataclasses
import sys

from kernels_lab.profile.study import Group, run_study, version
from kernels_lab.rows import pow2_at_least
from kernels_lab.topics.layernorm import staged as layernorm_staged
from kernels_lab.topics.layernorm.study import STUDY as LAYERNORM
from kernels_lab.topics.softmax import cluster as scl
from kernels_lab.topics.softmax import split as sp
from kernels_lab.topics.softmax import staged as softmax_staged
from kernels_lab.topics.softmax.study import STUDY as SOFTMAX


def four_chunks(cols: int) -> scl.ClusterShape | None:
    """Slices of 1024 vectors (16 KB), 4 a thread, up to 16 blocks a row."""
    vectors = sp._row_vectors(cols)
    slices = min(16, pow2_at_least(-(-vectors // 1024)))
    return scl.cluster_shape(cols, slices=slices, threads=min(1024, pow2_at_least(-(-vectors // (slices * 4)))))


def variants(base, bind):
    def line(name, what, layout=None, **options):
        def bound(inputs, outputs, stream=0):
            return bind(inputs, outputs, stream, shape=layout(inputs["x"].shape[1]) if layout else None, **options)
        return version(name, dataclasses.replace(base, name=f"{base.name}_{name}", bind=bound), what)
    return (line("s3", "3 stages (two rows in flight)", stages=3),
            line("c4", "4 chunks a thread, 16 KB stages", four_chunks),
            line("c4s3", "4 chunks, 3 stages", four_chunks, stages=3),
            line("c4s4", "4 chunks, 4 stages", four_chunks, stages=4),
            line("percluster", "a cluster per row (no row ahead)", clusters=1 << 30))


def main(out: str, which: str) -> None:
    study, first, variant, bind = ((SOFTMAX, "v20", softmax_staged.STAGED, softmax_staged.bind_staged)
                                   if which == "softmax" else
                                   (LAYERNORM, "v6", layernorm_staged.CLUSTER_V6, layernorm_staged.bind_staged))
    shapes = ((4096, 32768), (8192, 50257), (4096, 131072)) if which == "softmax" else \
        ((2048, 32768), (1024, 65536), (512, 131072))
    extra = variants(variant, bind)
    base = ("cluster",) if which == "softmax" else ("cluster", "v3")  # layernorm's v6 is v3's code, staged
    lines = base + (first,) + tuple(line.name for line in extra) + ("torch.compile",)
    probe = dataclasses.replace(study, versions=study.versions + extra, reps=10, groups=(
        Group("probe", tuple(study.workload.size(rows=r, cols=c) for r, c in shapes), lines=lines),))
    run_study(probe, f"{out}/{which}_staged.json", command=f"python3 benchmarks/staged_probe.py OUT {which}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
