"""Measured DRAM traffic per kernel from Nsight Compute, run as a subprocess.

    ncu --clock-control none --csv --print-units base \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
        python -m kernels_lab.instrument.ncu WORKLOAD N VARIANT...
        python -m kernels_lab.profile.ncu_lines WORKLOAD N LINE...   (a study's lines too: layernorm's v2)

The child (this module's __main__, or the harness's for a study's numbered versions) runs each variant once, bracketed by marker kernels, so
the parent can tell which launches belong to which variant. numba's mangled kernel names are
mapped back to Python names. When ncu is absent or fails, the caller is told why and carries on.
Writes still in L2 at kernel end are not counted by ncu: use sizes well past L2.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass

from ..core import Size

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum")
MARKER = "ncu_variant_marker"

_UNIT_SCALE = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
               "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0,
               "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


class NcuError(RuntimeError):
    """ncu is absent, failed, timed out, or printed nothing we can read."""


@dataclass(frozen=True)
class KernelMetrics:
    kernel: str          # the Python name
    grid: str
    block: str
    dram_read: float     # bytes
    dram_write: float    # bytes
    time_s: float


def python_name(kernel_name: str) -> str:
    """numba's kernel symbol (mangled or demangled) -> the Python function name."""
    name = kernel_name.strip()
    if name.startswith("_Z"):
        parts, rest = [], name[3:]
        while rest and rest[0].isdigit():
            length = int(re.match(r"\d+", rest).group())
            digits = len(str(length))
            parts.append(rest[digits:digits + length])
            rest = rest[digits + length:]
        return parts[-1] if parts else name
    # demangled: kernels_lab::bias_add_vec4[v2,cw51...](Array<float, 1, C, ...>, ...)
    name = re.split(r"[\[(]", name, maxsplit=1)[0]
    return name.split("::")[-1].strip()


def parse_csv(text: str) -> list[KernelMetrics]:
    """Parse `ncu --csv` output (rows per metric) into one record per kernel launch."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not lines:
        raise NcuError("ncu printed no CSV rows (was any kernel profiled?)")
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    need = {"ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"}
    if not rows or not need <= set(rows[0]):
        raise NcuError(f"ncu CSV lacks the columns {sorted(need)}")
    launches: dict[str, dict] = defaultdict(dict)
    order: list[str] = []
    for row in rows:
        lid = row["ID"]
        if lid not in launches:
            order.append(lid)
        entry = launches[lid]
        entry["kernel"] = python_name(row["Kernel Name"])
        entry["grid"], entry["block"] = row.get("Grid Size", ""), row.get("Block Size", "")
        value = float(row["Metric Value"].replace(",", "")) if row["Metric Value"] not in ("", "n/a") else 0.0
        entry[row["Metric Name"]] = value * _UNIT_SCALE.get(row["Metric Unit"].strip().lower(), 1.0)
    return [KernelMetrics(e["kernel"], e["grid"], e["block"], e.get(METRICS[0], 0.0), e.get(METRICS[1], 0.0),
                          e.get(METRICS[2], 0.0)) for e in (launches[i] for i in order)]


def section_metrics(text: str) -> dict[str, dict[str, float | str]]:
    """Every metric of an `ncu --csv --section ...` run, as printed: {Python kernel name: {metric name: value}}
    (a number as a float, in the unit ncu printed; text such as a cache policy kept as text). The marker kernels
    are left out; a kernel launched twice keeps its last launch's values. '#' lines (the command and the device,
    in a committed file), ncu's own '==' lines and the program's output are skipped: only CSV rows, as parse_csv
    reads them."""
    kept = "".join(line for line in text.splitlines(True) if line.startswith('"'))
    found: dict[str, dict[str, float | str]] = {}
    for row in csv.DictReader(io.StringIO(kept)):
        if MARKER in row["Kernel Name"] or not row["Metric Name"]:  # a marker; a rule's row with no metric
            continue
        value = row["Metric Value"].replace(",", "")
        try:
            number: float | str = float(value)
        except ValueError:
            number = row["Metric Value"]
        found.setdefault(python_name(row["Kernel Name"]), {})[row["Metric Name"]] = number
    if not found:
        raise NcuError("the ncu CSV holds no kernel's metrics (was any kernel profiled?)")
    return found


def split_by_variant(kernels: list[KernelMetrics], variants: list[str]) -> dict[str, list[KernelMetrics]]:
    """Marker launches separate the variants, in the order the child ran them."""
    groups: list[list[KernelMetrics]] = []
    for k in kernels:
        if k.kernel == MARKER:
            groups.append([])
        elif groups:
            groups[-1].append(k)
    if len(groups) != len(variants):
        raise NcuError(f"expected {len(variants)} variant groups in the ncu output, found {len(groups)}")
    return dict(zip(variants, groups))


CHILD = "kernels_lab.instrument.ncu"


def measure(workload: str, size: Size, variants: list[str], timeout_s: float = 300,
            child: str = CHILD) -> dict[str, list[KernelMetrics]]:
    """Run the child (a module run with -m that ends in run_marked) under ncu; DRAM bytes and time per kernel,
    grouped by variant."""
    ncu = shutil.which("ncu")
    if ncu is None:
        raise NcuError("ncu (Nsight Compute) is not on PATH: measured DRAM bytes are skipped")
    cmd = [ncu, "--clock-control", "none", "--csv", "--print-units", "base", "--metrics", ",".join(METRICS),
           sys.executable, "-m", child, workload, str(size), *variants]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              env={**os.environ, "KERNELS_LAB_BACKEND": "gpu"})
    except subprocess.TimeoutExpired:
        raise NcuError(f"ncu timed out after {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        raise NcuError(f"ncu exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-800:]}")
    return split_by_variant(parse_csv(proc.stdout), variants)


def run_marked(workload, size: Size, variants: list) -> None:
    """Each variant (an object with bind) once on one set of inputs, after a marker kernel, so the parent can
    tell the launches apart."""
    import numpy as np

    from ..arrays import poisoned, to_device
    from ..runtime import cuda

    @cuda.jit
    def ncu_variant_marker(x):
        x[0] = 1

    inputs = to_device(workload.make_inputs(size, np.random.default_rng(0)))
    flag = cuda.device_array(1, np.int32)
    for variant in variants:
        launch = variant.bind(inputs, poisoned(workload.output_specs(size)))
        ncu_variant_marker[1, 1](flag)
        launch()
        cuda.synchronize()


def _child(argv: list[str]) -> int:
    from ..core import get_workload
    workload = get_workload(argv[0])
    unknown = [n for n in argv[2:] if n not in workload.variants]
    if unknown:
        raise SystemExit(f"{workload.name} has no variant {unknown}; variants: {sorted(workload.variants)} "
                         "(a study's numbered versions: python -m kernels_lab.profile.ncu_lines)")
    run_marked(workload, workload.parse_size(argv[1]), [workload.variant(n) for n in argv[2:]])
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
