"""Layernorm's study (`kernels-lab bench layernorm`): every variant and the cluster kernel's numbered versions
(v1 to v5, v8: cluster.py; v10, v11: onchip.py; `cluster` is v9) at four shapes against torch's F.layer_norm,
eager and torch.compile'd, beside the copy ceiling; (group `long`) the rows past fused's MAX_COLS, where only
`unfused` and the cluster kernels run; (group `staged`) the same rows for staged.py's v6 and v7 beside `cluster`
and v3, their code. Lesson 08 and
figures/layernorm_{h100,h200}_shapes.png quote it. Useful bytes: one read and one write of x (8 per element, for
every line and anchor: gamma and beta are 2 x cols floats, noise at these shapes)."""

from __future__ import annotations

from typing import Any

from ...profile.anchors import torch_anchor
from ...profile.study import Group, Study, version
from .cluster import CLUSTER_V1, CLUSTER_V2, CLUSTER_V3, CLUSTER_V4, CLUSTER_V5, CLUSTER_V8
from .onchip import CLUSTER_V10, CLUSTER_V11
from .staged import CLUSTER_V6, CLUSTER_V7
from .workload import EPS, WORKLOAD as W

SHAPES = tuple(W.size(rows=r, cols=c) for r, c in ((65536, 1024), (16384, 4096), (8192, 8192), (16384, 1000)))
# rows one block cannot hold (past fused's MAX_COLS): where `cluster` is meant to pay; 256 MiB of x each
LONG = tuple(W.size(rows=r, cols=c) for r, c in ((2048, 32768), (1024, 65536), (512, 131072)))
VERSIONS = ("v1", "v2", "v3", "v4", "v5", "v8", "v10", "v11")  # the cluster kernel's, beside `cluster` (v9)
LONG_LINES = ("unfused", "cluster") + VERSIONS + ("torch.layer_norm", "torch.compile")
STAGED_LINES = ("cluster", "v3", "v6", "v7", "torch.layer_norm", "torch.compile")  # staged.py's (v3's code)
SHAPES_LINES = tuple(W.variants) + VERSIONS + ("torch.layer_norm", "torch.compile")
CHECK_ROWS = 67  # odd: a row-per-warp layout's last block is partly idle


def _layer_norm(torch, t, size):
    return torch.nn.functional.layer_norm(t["x"], (size.cols,), t["gamma"], t["beta"], EPS)


STUDY = Study(
    W,
    groups=(Group("shapes", SHAPES, lines=SHAPES_LINES), Group("long", LONG, lines=LONG_LINES),
            Group("staged", LONG, lines=STAGED_LINES)),
    versions=(version("v1", CLUSTER_V1, "cluster's first kernel: two exchanges a row, stores one float at a time"),
              version("v2", CLUSTER_V2, "v1 with 16-byte stores and gamma/beta loads (softmax's cluster kernel "
                      "stores 16 bytes)"),
              version("v3", CLUSTER_V3, "one exchange a row of (count, mean, M2), 16-byte stores; every element "
                      "tested against the row's ends (`cluster` before v9)"),
              version("v4", CLUSTER_V4, "v3 holding 16 floats a thread: no spill"),
              version("v5", CLUSTER_V5, "v4 with 1536 resident threads an SM asked of the compiler"),
              version("v6", CLUSTER_V6, "v3 with each slice staged in shared memory by asynchronous "
                      "copies, the next row's in flight during this row's exchange (staged.py)"),
              version("v7", CLUSTER_V7, "v6 reading its stage once into registers: one shared read an element"),
              version("v8", CLUSTER_V8, "v3 with no per-element test for the threads whose vectors all "
                      "lie inside the row"),
              version("v10", CLUSTER_V10, "`cluster` (v9) keeping gamma and beta in shared memory across rows, a "
                      "grid of resident clusters striding over them (onchip.py)"),
              version("v11", CLUSTER_V11, "v10 with 1024 resident threads an SM asked: 64 registers, no spill")),
    useful_bytes=lambda size: 8 * size.elements,
    check_size=lambda size: size.replace(rows=CHECK_ROWS),
    check_sizes=(W.size(rows=5, cols=67), W.size(rows=3, cols=516)),
    anchors=(torch_anchor("torch.layer_norm", "torch.nn.functional.layer_norm, eager", _layer_norm),
             torch_anchor("torch.compile", "F.layer_norm through torch.compile", _layer_norm, compiled=True)),
    rows_axis="rows",
    reps=20,
    about="unfused, fused, persistent and cluster at four shapes, and the long rows only cluster and unfused hold, "
          "against torch",
)


V9_REGISTERED = "2026-12-08T00:55"  # commit 0682f64: `cluster` runs v9; the runs before it call v3 `cluster`
RENAMED = {"cluster": ("v3", "cluster_v3", False), "v9": ("cluster", "cluster", True)}  # (line, variant, registered)


def named_today(doc: dict[str, Any]) -> dict[str, Any]:
    """A layernorm results file with its lines named as today: in a run made before v9 was registered, `cluster`
    is v3 (now unregistered) and v9, where it was timed, is `cluster`. Later runs, and other studies' files, are
    returned as they are."""
    if doc["meta"].get("study") != "layernorm" or doc["meta"].get("date", "") >= V9_REGISTERED:
        return doc
    return {**doc, "records": [{**r, **dict(zip(("line", "variant", "registered"), RENAMED[r["line"]]))}
                               if r.get("line") in RENAMED else r for r in doc["records"]]}
