"""Demo: PDL, graphs and a grouped kernel for a group of small kernels between unknown work
(lesson 06 tells the same story, in the same words)."""

from __future__ import annotations

import warnings

from . import rules as pdl_rules
from ...backend import BACKEND
from . import workload as pdl
from ...demos import Demo, DemoRequest
from .figures import pdl_summary, pdl_timeline
from ...demos.common import heading, show_committed, write_measured


RULES = (
    "PDL lets a kernel launched with the attribute start before the kernel before it has finished. The trigger\n"
    "(griddepcontrol.launch_dependents) is a hint: the next kernel may launch once every block has triggered or\n"
    "exited. Only griddepcontrol.wait promises that the kernel before has completed and its writes are visible.\n"
    "For a group of G kernels between an earlier and a later kernel that are not ours, three rules, the\n"
    "attribute set on every launch:\n"
    "  1. the first member waits before it reads (only it can start before the earlier kernel is done);\n"
    "  2. all but the last trigger (the later kernel may not wait: it must launch after the last member);\n"
    "  3. every member after the first waits once more at its end: PDL orders launches, not completions,\n"
    "     and without this wait the last member can end while an earlier, longer one still writes.")


def _early(r: dict) -> str:
    start = r["consumer_start_minus_group_end_us"]
    when = f"{-start:.1f} us BEFORE the group ended" if start < 0 else f"{start:.1f} us after the group ended"
    return f"the later kernel started {when}" + (f"; wrong values: {r['wrong_output']}" if r["wrong_output"] else "")


def narrate(records: list[dict]) -> str:
    lines = []
    for g in sorted({r["G"] for r in records}):
        for cls in ("tiny", "large"):
            by = {r["variant"]: r for r in records if r["G"] == g and r["size_class"] == cls}
            if "plain" not in by:
                continue
            plain = by["plain"]
            parts = ", ".join(f"{v} {by[v]['e2e_us']:.0f} us ({plain['e2e_us'] / by[v]['e2e_us']:.2f}x)"
                              for v in pdl.VARIANTS if v in by)
            lines.append(f"G={g} {cls}: {parts}; the host spent {plain['host_us']:.0f} us issuing the plain launches")
            for v in pdl.WRONG:
                if v in by and (by[v]["consumer_start_minus_group_end_us"] < 0 or by[v]["wrong_output"]):
                    lines.append(f"   {v} (labelled wrong): {_early(by[v])}")
    lines.append("A graph removes the host's cost per launch and keeps stream order; graph + PDL also overlaps the "
                 "members; the grouped kernel (one launch, block t quantizes tensor t) has no boundary at all.")
    return "\n".join(lines)


def run(request: DemoRequest) -> int:
    print(f"backend: {BACKEND.describe()}")
    print(RULES)
    for g in (1, 2, 4):
        print(f"  G={g}: (wait, trigger, order) per member = {pdl.pdl_switches(g)}")
    print("  the first two rules alone, G=4, judged (kernels_lab/topics/pdl/rules.py):")
    for f in pdl_rules.findings(pdl.pdl_switches(4, "unordered")):
        print(f"    {f.kind}: {f.message}")
    if not BACKEND.can_time:
        heading("Run here, on numba's CUDA simulator: the correct variants' values; no timings, and PDL's "
                "instructions do nothing there (no overlap)")
        group = pdl.Group([7, 300, 45])
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            bad = {v: pdl.check(group, pdl.run_once(group, v)) for v in pdl.VARIANTS}
        for message in sorted({str(w.message) for w in said}):
            print(f"  note: {message}")
        print("  the correct variants: " + ", ".join(f"{v}: {'right' if p is None else p}" for v, p in bad.items()))
        show_committed("pdl_h200.json", lambda doc: narrate(doc["records"]), request.out, "pdl")
        return 0 if all(p is None for p in bad.values()) else 1
    from .bench import measure_pdl
    records = measure_pdl(groups=(8, 32), classes=("tiny", "large"), reps=10)  # 20 reps: 15.6 s on the H200
    print(narrate(records))
    write_measured(request, records, {"timeline": pdl_timeline, "e2e": pdl_summary})
    return 0


DEMO = Demo("pdl", "a group of small kernels: plain, PDL, graph, graph+PDL, grouped; with a timeline", run, order=6,
            takes_size=False, writes_results_here=False)
