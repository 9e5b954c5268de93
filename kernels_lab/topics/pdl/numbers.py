"""The numbers the README quotes about the PDL study (pdl_h200.json, `kernels-lab bench pdl`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...profile.numbers import DATA, records

PDL_G, PDL_CLASS = 32, "tiny"  # the PDL configuration the README quotes


PDL = "pdl_h200.json"


PDL_ORDER = ("plain", "pdl", "graph", "graph_pdl", "grouped")


PDL_LABEL = {"plain": "plain", "pdl": "PDL", "graph": "graph", "graph_pdl": "graph+PDL", "grouped": "grouped"}


def pdl(data: Path = DATA, g: int = PDL_G, size_class: str = PDL_CLASS) -> dict[str, Any]:
    by = {r["variant"]: r for r in records(PDL, data, "pdl") if r["G"] == g and r["size_class"] == size_class}
    return {"G": g, "class": size_class, "e2e": {v: by[v]["e2e_us"] for v in PDL_ORDER},
            "host": {v: by[v]["host_us"] for v in PDL_ORDER},
            "gap": {v: by[v]["gap_us"] for v in ("graph", "graph_pdl")}}


def pdl_timeline(data: Path = DATA, size_class: str = "large", g: int = 8) -> dict[str, Any]:
    """The drawn configuration of figures/pdl_h200_timeline_CLASS.png (G = 8): the one with stamps."""
    recs = [r for r in records(PDL, data, "pdl")
            if r.get("timeline") and r["size_class"] == size_class and r["G"] == g]
    by = {r["variant"]: r for r in recs}
    def early_us(tl):  # as the figure draws it: the group's last end minus the consumer's start, this run
        return max(s["end_us"] for s in tl[1:-1]) - tl[-1]["start_us"]
    return {"G": recs[0]["G"], "class": size_class, "e2e": {v: by[v]["e2e_us"] for v in PDL_ORDER if v in by},
            "early": {v: early_us(r["timeline"]) for v, r in by.items()
                      if not r.get("correct_set", True) and early_us(r["timeline"]) > 0}}


def pdl_caption(data: Path = DATA) -> str:
    t = pdl_timeline(data)
    e = t["e2e"]
    early = " and ".join(f"that of {v} {us:.0f} us" for v, us in t["early"].items())
    return (f"*G = {t['G']} {t['class']} tensors, one row per kernel, from the kernels' own %globaltimer stamps: "
            f"plain launches end to end {e['plain']:.0f} us, PDL {e['pdl']:.0f} us, graph+PDL {e['graph_pdl']:.0f} "
            f"us, one grouped kernel {e['grouped']:.0f} us (medians of many runs; the bars are one run). "
            f"The variants marked WRONG are wrong: in the run drawn, the consumer of each starts before the "
            f"group has finished, {early} (`figures/data/{PDL}`).*")


def rows(data: Path = DATA) -> list[tuple[str, str]]:
    p = pdl(data)
    return [
        (f"{p['G']} {p['class']} quantize kernels between producer and consumer, end to end (in brackets: the "
         f"host's time to enqueue it all): " + " / ".join(PDL_LABEL[v] for v in PDL_ORDER),
         " / ".join(f"{p['e2e'][v]:.0f} ({p['host'][v]:.0f})" for v in PDL_ORDER) + " us"),
        ("gap per boundary inside the group, from the kernels' own stamps: graph / graph+PDL (negative: overlap)",
         f"{p['gap']['graph']:.2f} / {p['gap']['graph_pdl']:.2f} us"),
    ]


BLOCKS = {"pdl-caption": pdl_caption}
