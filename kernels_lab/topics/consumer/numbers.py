"""The numbers the README quotes about the persistent consumer (consumer_h200.json, consumer_polls_h200.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import default_protocol  # the protocol the consumer picks at a payload
from .figures import HEADLINE_PAYLOAD  # the payload the README quotes and the latency figure draws

from ...profile.numbers import DATA, kilo, records

CONSUMER, POLLS = "consumer_h200.json", "consumer_polls_h200.json"


def consumer(data: Path = DATA, payload: int = HEADLINE_PAYLOAD) -> dict[str, Any]:
    mode = f"persistent-{default_protocol(payload)}"
    recs = [r for r in records(CONSUMER, data, "consumer") if r["payload_bytes"] == payload]
    one = {r["mode"]: r for r in recs if r["producers"] == 1}
    most = max(r["producers"] for r in recs)
    rps = {r["mode"]: r["throughput_rps"] for r in recs if r["producers"] == most}
    bare = next(r for r in records(POLLS, data, "consumer_poll")
                if r["protocol"] == default_protocol(payload) and r["mode"] == "raw echo"
                and r["payload_bytes"] == payload)
    return {"payload": payload, "mode": mode, "p50": one[mode]["p50_us"], "p99": one[mode]["p99_us"],
            "gpu_us": one[mode]["gpu_us_p50"], "launch_p50": one["launch"]["p50_us"],
            "launch_p99": one["launch"]["p99_us"], "speedup": one["launch"]["p50_us"] / one[mode]["p50_us"],
            "bare_p50": bare["p50_us"], "bare_p99": bare["p99_us"], "producers": most,
            "rps": rps[mode], "launch_rps": rps["launch"], "rps_ratio": rps[mode] / rps["launch"]}


def consumer_polls(data: Path = DATA, payload: int = HEADLINE_PAYLOAD) -> dict[str, dict[str, Any]]:
    """The drawn breakdown (consumer_polls_h200.json) for the consumer's default protocol: mode -> record."""
    return {r["mode"]: r for r in records(POLLS, data, "consumer_poll")
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


def rows(data: Path = DATA) -> list[tuple[str, str]]:
    c = consumer(data)
    kib = f"{c['payload'] // 1024} KiB"
    return [
        (f"persistent consumer round trip ({c['mode']}), {kib} payload, p50 / p99 (the GPU's own share "
         f"{c['gpu_us']:.2f} us; `{CONSUMER}`: the breakdown figure below is a run of its own)",
         f"{c['p50']:.2f} / {c['p99']:.2f} us"),
        ("one launch per request, same job, p50 / p99", f"{c['launch_p50']:.1f} / {c['launch_p99']:.1f} us "
                                                        f"({c['speedup']:.1f}x the consumer)"),
        ("the bare protocol (host writes, GPU answers, host sees it), p50 / p99",
         f"{c['bare_p50']:.1f} / {c['bare_p99']:.1f} us"),
        (f"answers per second with {c['producers']} producer threads: persistent / launch per request ({kib})",
         f"{kilo(c['rps'])} / {kilo(c['launch_rps'])} ({c['rps_ratio']:.1f}x)"),
    ]


BLOCKS = {"consumer-caption": consumer_caption}
