"""Every number the README quotes, computed from the committed results files (figures/data/).

One function per quoted number (or group of numbers quoted together), each reading the
results file it names; `readme_blocks()` assembles the README's measured table and its figure
captions from them, and `render_readme()` rewrites the text between the README's markers

    <!-- numbers:begin NAME -->  ...  <!-- numbers:end NAME -->

`benchmarks/render_figures.py` runs it with the figures; tests/test_readme_numbers.py fails
when the README says anything else. A number in the README outside those markers is a bug.
"""

from __future__ import annotations

import functools
import math
import re
import statistics
import textwrap
from pathlib import Path
from typing import Any, Callable

from . import results
from .plots import HEADLINE_PAYLOAD  # the consumer payload the README quotes and the latency figure draws

DATA = Path(__file__).resolve().parents[2] / "figures" / "data"
PDL_G, PDL_CLASS = 32, "tiny"  # the PDL configuration the README quotes


@functools.lru_cache(maxsize=None)
def load(name: str, data: Path = DATA) -> dict[str, Any]:
    return results.load(Path(data) / name)


def _records(name: str, data: Path, kind: str | None = None) -> list[dict[str, Any]]:
    return [r for r in load(name, data)["records"] if r.get("kind") == kind]


def _pow2(n: int) -> str:
    k = int(n).bit_length() - 1
    return f"2^{k}" if n == 1 << k else f"{n:,}"


def _k(x: float) -> str:
    return f"{x / 1000:.1f}k"


# -- the elementwise chain at 2^28 (elementwise_h200.json, `kernels-lab demo elementwise`) -------

ELEMENTWISE = "elementwise_h200.json"


def elementwise(data: Path = DATA) -> dict[str, Any]:
    by = {r["variant"]: r for r in _records(ELEMENTWISE, data)}
    ceiling = load(ELEMENTWISE, data)["meta"]["ceiling_GBs"]
    un, fu = by["unfused"], by["fused"]
    return {
        "n": _pow2(fu["n"]),
        "bytes_ratio": un["bytes_model"] / fu["bytes_model"],
        "time_ratio": un["time_ms"] / fu["time_ms"],
        "ceiling": ceiling,
        "GBs": {v: r["GBs"] for v, r in by.items()},
        "of_ceiling": {v: r["GBs"] / ceiling for v, r in by.items()},
    }


# -- the sweep 2^12..2^27 with Nsight Compute (profile_elementwise_h200.json) --------------------

PROFILE = "profile_elementwise_h200.json"


def ncu_vs_plan(data: Path = DATA) -> dict[str, Any]:
    recs = [r for r in _records(PROFILE, data) if r.get("bytes_dram_read") is not None]
    diffs = sorted(((r["bytes_dram_read"] + r["bytes_dram_write"]) / r["bytes_model"] - 1 for r in recs), key=abs)
    return {"n": _pow2(recs[0]["n"]), "variants": len(recs), "closest": diffs[0], "farthest": diffs[-1]}


def sweep_fit(data: Path = DATA) -> dict[str, Any]:
    recs = [r for r in _records(PROFILE, data) if r.get("model_error") is not None]
    errors = [abs(r["model_error"]) for r in recs]
    fit = recs[0]
    return {"lo": _pow2(min(r["n"] for r in recs)), "hi": _pow2(max(r["n"] for r in recs)), "points": len(recs),
            "kernel_us": fit["model_fixed_kernel_us"], "launch_us": fit["model_launch_us"],
            "latency_ns": fit.get("model_latency_ns") or 0.0,
            "within_pct": 5 * math.ceil(max(errors) * 100 / 5), "mean_pct": 100 * statistics.mean(errors)}


# -- the launch ladder (ladder_h200.json, `kernels-lab bench launch`) ---------------------------

LADDER = "ladder_h200.json"


def ladder(data: Path = DATA) -> dict[str, dict[str, float]]:
    return {r["path"]: r for r in _records(LADDER, data, "launch")}


# -- the persistent consumer (consumer_h200.json, consumer_polls_h200.json) ---------------------

CONSUMER, POLLS = "consumer_h200.json", "consumer_polls_h200.json"


def consumer(data: Path = DATA, payload: int = HEADLINE_PAYLOAD) -> dict[str, Any]:
    from ..consumer import default_protocol  # the protocol the consumer picks at this payload
    mode = f"persistent-{default_protocol(payload)}"
    recs = [r for r in _records(CONSUMER, data, "consumer") if r["payload_bytes"] == payload]
    one = {r["mode"]: r for r in recs if r["producers"] == 1}
    most = max(r["producers"] for r in recs)
    rps = {r["mode"]: r["throughput_rps"] for r in recs if r["producers"] == most}
    bare = next(r for r in _records(POLLS, data, "consumer_poll")
                if r["protocol"] == default_protocol(payload) and r["mode"] == "raw echo"
                and r["payload_bytes"] == payload)
    return {"payload": payload, "mode": mode, "p50": one[mode]["p50_us"], "p99": one[mode]["p99_us"],
            "gpu_us": one[mode]["gpu_us_p50"], "launch_p50": one["launch"]["p50_us"],
            "launch_p99": one["launch"]["p99_us"], "speedup": one["launch"]["p50_us"] / one[mode]["p50_us"],
            "bare_p50": bare["p50_us"], "bare_p99": bare["p99_us"], "producers": most,
            "rps": rps[mode], "launch_rps": rps["launch"], "rps_ratio": rps[mode] / rps["launch"]}


# -- the PDL study (pdl_h200.json, `kernels-lab bench pdl`) ------------------------------------

PDL = "pdl_h200.json"
PDL_ORDER = ("plain", "pdl", "graph", "graph_pdl", "grouped")
PDL_LABEL = {"plain": "plain", "pdl": "PDL", "graph": "graph", "graph_pdl": "graph+PDL", "grouped": "grouped"}


def pdl(data: Path = DATA, g: int = PDL_G, size_class: str = PDL_CLASS) -> dict[str, Any]:
    by = {r["variant"]: r for r in _records(PDL, data, "pdl") if r["G"] == g and r["size_class"] == size_class}
    return {"G": g, "class": size_class, "e2e": {v: by[v]["e2e_us"] for v in PDL_ORDER},
            "host": {v: by[v]["host_us"] for v in PDL_ORDER},
            "gap": {v: by[v]["gap_us"] for v in ("graph", "graph_pdl")}}


def pdl_timeline(data: Path = DATA, size_class: str = "large", g: int = 8) -> dict[str, Any]:
    """The drawn configuration of figures/pdl_h200_timeline_CLASS.png (G = 8): the one with stamps."""
    recs = [r for r in _records(PDL, data, "pdl")
            if r.get("timeline") and r["size_class"] == size_class and r["G"] == g]
    by = {r["variant"]: r for r in recs}
    def early_us(tl):  # as the figure draws it: the group's last end minus the consumer's start, this run
        return max(s["end_us"] for s in tl[1:-1]) - tl[-1]["start_us"]
    return {"G": recs[0]["G"], "class": size_class, "e2e": {v: by[v]["e2e_us"] for v in PDL_ORDER if v in by},
            "early": {v: early_us(r["timeline"]) for v, r in by.items()
                      if not r.get("correct_set", True) and early_us(r["timeline"]) > 0}}


# -- the README's blocks -------------------------------------------------------------------------

def measured_table(data: Path = DATA) -> str:
    e, nc, sw, lad, c, p = (elementwise(data), ncu_vs_plan(data), sweep_fit(data), ladder(data), consumer(data),
                            pdl(data))
    host = [lad[f"numba dispatch, {k} array arg{'s' if k != 1 else ''}"]["host_us_per_launch"] for k in (0, 1, 4)]
    pre = lad["pre-bound cuda.core launch, 4 array args"]["host_us_per_launch"]
    graph = lad["CUDA graph replay, 4 array args"]["device_us_per_boundary"]
    step = lad["persistent kernel, one grid-sync step"]["device_us_per_boundary"]
    kib = f"{c['payload'] // 1024} KiB"
    rows = [
        ("copy ceiling (the better of driver memcpy and a 16-byte copy kernel, same run)",
         f"{e['ceiling']:.0f} GB/s"),
        (f"fused chain, 16-byte accesses / 4-byte accesses / persistent grid-stride ({e['n']} elements)",
         " / ".join(f"{e['GBs'][v]:.0f}" for v in ("fused", "fused_naive", "persistent")) + " GB/s"),
        (f"unfused / fused time, against planned bytes {e['bytes_ratio']:.2f}x", f"{e['time_ratio']:.2f}x"),
        (f"Nsight Compute DRAM bytes vs plan at {nc['n']} elements (all {nc['variants']} variants)",
         f"{nc['closest']:+.1%} to {nc['farthest']:+.1%}".replace("+-", "-")),
        (f"sweep {sw['lo']}..{sw['hi']}, model vs measured median, {sw['points']} points (fitted: kernel "
         f"{sw['kernel_us']:.1f} us, launch {sw['launch_us']:.0f} us, DRAM latency {sw['latency_ns']:.0f} ns)",
         f"all within {sw['within_pct']}%, mean {sw['mean_pct']:.1f}%"),
        ("host us per launch: numba dispatch 0 / 1 / 4 array args", " / ".join(f"{h:.1f}" for h in host) + " us"),
        ("pre-bound cuda.core launch (arguments flattened once), 4 args", f"{pre:.1f} us"),
        ("CUDA graph replay, device us per kernel boundary", f"{graph:.2f} us"),
        ("persistent kernel, one grid-sync step", f"{step:.2f} us"),
        (f"persistent consumer round trip ({c['mode']}), {kib} payload, p50 / p99 (the GPU's own share "
         f"{c['gpu_us']:.2f} us; `{CONSUMER}`: the breakdown figure below is a run of its own)",
         f"{c['p50']:.2f} / {c['p99']:.2f} us"),
        ("one launch per request, same job, p50 / p99", f"{c['launch_p50']:.1f} / {c['launch_p99']:.1f} us "
                                                        f"({c['speedup']:.1f}x the consumer)"),
        ("the bare protocol (host writes, GPU answers, host sees it), p50 / p99",
         f"{c['bare_p50']:.1f} / {c['bare_p99']:.1f} us"),
        (f"answers per second with {c['producers']} producer threads: persistent / launch per request ({kib})",
         f"{_k(c['rps'])} / {_k(c['launch_rps'])} ({c['rps_ratio']:.1f}x)"),
        (f"{p['G']} {p['class']} quantize kernels between producer and consumer, end to end (in brackets: the "
         f"host's time to enqueue it all): " + " / ".join(PDL_LABEL[v] for v in PDL_ORDER),
         " / ".join(f"{p['e2e'][v]:.0f} ({p['host'][v]:.0f})" for v in PDL_ORDER) + " us"),
        ("gap per boundary inside the group, from the kernels' own stamps: graph / graph+PDL (negative: overlap)",
         f"{p['gap']['graph']:.2f} / {p['gap']['graph_pdl']:.2f} us"),
    ]
    return "\n".join(["| what | figure |", "| --- | --- |", *(f"| {a} | {b} |" for a, b in rows)])


def elementwise_caption(data: Path = DATA) -> str:
    e = elementwise(data)
    return (f"*`out = alpha * gelu(x + b)` on {e['n']} float32 elements, NVIDIA H200: fusing three kernels cuts "
            f"the traffic {e['bytes_ratio']:.2f}x and the time {e['time_ratio']:.2f}x; the fused kernel with "
            f"16-byte accesses moves {e['GBs']['fused']:.0f} GB/s, {e['of_ceiling']['fused']:.0%} of the "
            f"{e['ceiling']:.0f} GB/s copy ceiling measured in the same run, where the one-element-per-thread "
            f"version reaches {e['of_ceiling']['fused_naive']:.0%} (`figures/data/{ELEMENTWISE}`).*")


def sweep_caption(data: Path = DATA) -> str:
    sw = sweep_fit(data)
    return (f"*Median device time against n, {sw['lo']}..{sw['hi']} elements, cold L2 (points, quartile bars) and "
            f"the model (lines): every one of the {sw['points']} points within {sw['within_pct']}% of the model, "
            f"mean {sw['mean_pct']:.1f}% (`figures/data/{PROFILE}`).*")


def consumer_polls(data: Path = DATA, payload: int = HEADLINE_PAYLOAD) -> dict[str, dict[str, Any]]:
    """The drawn breakdown (consumer_polls_h200.json) for the consumer's default protocol: mode -> record."""
    from ..consumer import default_protocol
    return {r["mode"]: r for r in _records(POLLS, data, "consumer_poll")
            if r["protocol"] == default_protocol(payload) and r["payload_bytes"] == payload}


def consumer_caption(data: Path = DATA) -> str:
    c, polls = consumer(data), consumer_polls(data)
    job, raw = polls["api job"], polls["raw echo"]
    protocol = c["mode"].removeprefix("persistent-")
    return (f"*A {c['payload'] // 1024} KiB request through the consumer's API ({protocol} protocol, one producer): "
            f"{job['p50_us']:.2f} us at the median in this figure's run ({c['p50']:.2f} us in the latency run of the "
            f"table above), of which the GPU's own work is {job['gpu_us_p50']:.2f} us; "
            f"the rest is the host's code and PCIe both ways (the bare protocol alone: {raw['p50_us']:.2f} us). "
            f"One launch per request takes {c['launch_p50']:.1f} us (`figures/data/{POLLS}`, "
            f"`figures/data/{CONSUMER}`).*")


def pdl_caption(data: Path = DATA) -> str:
    t = pdl_timeline(data)
    e = t["e2e"]
    early = " and ".join(f"that of {v} {us:.0f} us" for v, us in t["early"].items())
    return (f"*G = {t['G']} {t['class']} tensors, one row per kernel, from the kernels' own %globaltimer stamps: "
            f"plain launches end to end {e['plain']:.0f} us, PDL {e['pdl']:.0f} us, graph+PDL {e['graph_pdl']:.0f} "
            f"us, one grouped kernel {e['grouped']:.0f} us (medians of many runs; the bars are one run). "
            f"The variants marked WRONG are wrong: in the run drawn, the consumer of each starts before the "
            f"group has finished, {early} (`figures/data/{PDL}`).*")


def demo_times_caption(data: Path = DATA) -> str:
    """How long the demos take on the GPU, start to exit (benchmarks/demo_times.py), the slowest run of each."""
    doc = load("demo_times_h200.json", data)
    slowest: dict[str, float] = {}
    for r in doc["records"]:
        slowest[r["demo"]] = max(slowest.get(r["demo"], 0.0), r["wall_s"])
    name = max(slowest, key=slowest.get)
    return (f"On the {doc['meta']['device'].split(' (')[0]} ({doc['meta']['date'][:10]}) every demo ran in "
            f"{min(slowest.values()):.1f} to {slowest[name]:.1f} s from the command line, compiles included "
            f"(slowest: `{name}`; figures/demo_times_h200_seconds.png).")


BLOCKS: dict[str, Callable[[Path], str]] = {
    "elementwise-caption": elementwise_caption,
    "measured-table": measured_table,
    "sweep-caption": sweep_caption,
    "consumer-caption": consumer_caption,
    "pdl-caption": pdl_caption,
    "demo-times": demo_times_caption,
}
_BLOCK = re.compile(r"(<!-- numbers:begin (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- numbers:end (?P=name) -->)",
                    re.DOTALL)


def readme_blocks(data: Path = DATA) -> dict[str, str]:
    """Each block's text; captions wrapped to the README's line length (a table cannot be)."""
    out = {}
    for name, make in BLOCKS.items():
        text = make(data)
        out[name] = text if text.startswith("|") else textwrap.fill(text, width=104, break_on_hyphens=False,
                                                                    break_long_words=False)
    return out


def render_readme(text: str, data: Path = DATA) -> str:
    """`text` with every numbers block rewritten from the results files; every block must be there."""
    blocks = readme_blocks(data)
    found = {m.group("name") for m in _BLOCK.finditer(text)}
    unknown, missing = found - set(blocks), set(blocks) - found
    if unknown or missing:
        raise ValueError(f"README numbers blocks: unknown {sorted(unknown)}, missing {sorted(missing)}")
    return _BLOCK.sub(lambda m: m.group(1) + blocks[m.group("name")] + "\n" + m.group(4), text)


def readme_path() -> Path:
    return DATA.parents[1] / "README.md"
