"""Results files: one JSON shape for every measurement, written with where and how it was made.

    {"schema": "kernels-lab/results/v1",
     "meta": {"backend", "device", "date", "command", "versions", "ceiling_GBs", ...},
     "records": [{"workload", "variant", "pattern", "n", "launches", "bytes_model",
                  "time_ms", "GBs", ...}]}

Later fields are added, never renamed or removed: bytes_traced, bytes_dram_read,
bytes_dram_write, time_ms_q1, time_ms_q3, host_us_per_launch; launch-ladder records carry
"kind": "launch", persistent-consumer records "kind": "consumer", its round-trip breakdown
"kind": "consumer_poll" (and the host's payload copies "kind": "host_copy"), PDL records
"kind": "pdl" (and "pdl_window": one PDL group under each CUDA_DEVICE_MAX_CONNECTIONS), kernel
timelines "kind": "timeline", a demo's wall time from the command line "kind": "demo_time", a block_chain
megakernel's %globaltimer stamps per tile "kind": "tile_stamps" (topics/block_chain/stamps.py), the ceilings
against the bytes of a pass "kind": "ceiling_size" (profile/ceiling_sizes.py), and a topic's
study (profile/study.py, `kernels-lab bench NAME`) "kind": "study" (REQUIRED_BY_KIND). A study record
names its three rates apart: GBs_model (the line's planned bytes), GBs_useful (the bytes the problem must
move) and GBs_weight (the weights' bytes); the older kinds' "GBs" is one of these, each file its own
(the meta's gbs_counts says which where it is not the plan's). One exception to the rule:
consumer_poll's "poll" became "protocol" on 2026-12-03, when poll kinds became queue protocols
(the one file with the old name was re-measured).
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ..errors import NotJson, read_json
from ..backend import BACKEND
from ..runtime import device_facts

SCHEMA = "kernels-lab/results/v1"
REQUIRED_META = ("backend", "device", "date", "command", "versions", "ceiling_GBs")
REQUIRED_RECORD = ("workload", "variant", "pattern", "n", "launches", "bytes_model", "time_ms", "GBs")
REQUIRED_BY_KIND = {  # records of other kinds than a variant measurement carry their own fields
    "launch": ("kind", "path", "host_us_per_launch"),
    "consumer": ("kind", "mode", "payload_bytes", "producers", "p50_us", "p99_us", "throughput_rps"),
    "pdl": ("kind", "variant", "G", "size_class", "e2e_us", "host_us", "gap_us"),
    "consumer_poll": ("kind", "protocol", "mode", "p50_us", "p99_us"),
    "host_copy": ("kind", "target", "source", "payload_bytes", "us_p50"),
    "timeline": ("kind", "workload", "variant", "n", "source", "spans"),
    "pdl_window": ("kind", "variant", "G", "size_class", "max_connections", "members_at_once", "e2e_us", "timeline"),
    "demo_time": ("kind", "demo", "wall_s", "rc"),
    "tile_stamps": ("kind", "workload", "line", "size", "phases_us", "done_us", "span_us", "pass_us"),
    "ceiling_size": ("kind", "what", "bytes", "time_ms", "time_ms_steady", "GBs", "GBs_steady"),
    "cluster_probe": ("kind", "workload", "cols", "rows", "version", "median_ms", "GBs", "of_ceiling", "vs_torch"),
    "study": ("kind", "workload", "group", "line", "variant", "registered", "pattern", "n", "size", "launches",
              "bytes_model", "bytes_useful", "bytes_weight", "checked", "time_ms", "time_ms_steady", "GBs_model",
              "GBs_useful", "GBs_weight"),
}
_PACKAGES = ("kernels-lab", "numba", "numba-cuda", "numpy", "llvmlite", "cuda-core", "cuda-bindings", "matplotlib")


class ResultsError(ValueError):
    """A results file that is not a kernels-lab v1 results file, or is damaged."""


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in _PACKAGES:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    if BACKEND.on_device:
        from ..runtime import cuda
        try:
            out["cuda_driver"] = ".".join(map(str, cuda.cudadrv.driver.driver.get_version()))
        except Exception:  # noqa: BLE001  (a version we cannot read is left out, not fatal)
            pass
    return out


def make_meta(command: str | None = None, ceiling_GBs: float | None = None, **extra: Any) -> dict[str, Any]:
    facts = device_facts()
    return {"backend": "gpu" if BACKEND.on_device else "simulator",
            "device": facts.describe(),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": command if command is not None else " ".join(sys.argv),
            "versions": versions(),
            "ceiling_GBs": ceiling_GBs,
            **extra}


def validate(doc: Any, source: str = "results") -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ResultsError(f"{source}: not a JSON object")
    if doc.get("schema") != SCHEMA:
        raise ResultsError(f"{source}: schema {doc.get('schema')!r}, expected {SCHEMA!r}")
    meta, records = doc.get("meta"), doc.get("records")
    if not isinstance(meta, dict) or not isinstance(records, list):
        raise ResultsError(f"{source}: needs a 'meta' object and a 'records' list")
    missing = [k for k in REQUIRED_META if k not in meta]
    if missing:
        raise ResultsError(f"{source}: meta lacks {', '.join(missing)}")
    for i, rec in enumerate(records):
        need = REQUIRED_BY_KIND.get(rec.get("kind"), REQUIRED_RECORD) if isinstance(rec, dict) else REQUIRED_RECORD
        if not isinstance(rec, dict) or any(k not in rec for k in need):
            lacking = [k for k in need if not isinstance(rec, dict) or k not in rec]
            raise ResultsError(f"{source}: record {i} lacks {', '.join(lacking)}")
    return doc


def dump(meta: dict[str, Any], records: list[dict[str, Any]], path: str | Path) -> Path:
    doc = validate({"schema": SCHEMA, "meta": meta, "records": records})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)  # never leave a half-written results file behind
    return path


def load(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if path.exists() and not path.is_file():  # a folder, or a FIFO that would block the read forever
        raise ResultsError(f"{path}: not a regular file, so not a results file")
    try:
        doc = read_json(path)
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such file") from None
    except NotJson as e:
        raise ResultsError(f"{path}: {e}, so not a results file") from None
    return validate(doc, str(path))
