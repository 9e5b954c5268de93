"""Wrong submissions made from a lesson's solution by named mutations, instead of hand-copied files: each is the
solution with a few exact replacements, each of which must match exactly once (a solution that changed fails
loudly here, never a fixture silently gone stale). tests/sources.submission serves them by name;
benchmarks/grade_decode.sh writes them out (python3 tests/mutations.py FOLDER) to grade them on a GPU."""

from __future__ import annotations

import sys
from pathlib import Path

from kernels_lab.lessons import solution_source

_WAIT_READ = "load_acquire_gpu(counters, layer) >= tiles"
_SIGNAL_ADD = "add_release_gpu(counters, layer, 1)"
_LOOP = ("    spins = 0\n    while spins <= spin_limit:\n        if load_acquire_gpu(counters, layer) >= tiles:  "
         "# re-read every time; later reads see the stores\n            return True\n        nanosleep(32)\n"
         "        spins += 1\n    return False")

# name -> (exercise, what is wrong (the file's first line), the replacements)
MUTANTS: dict[str, tuple[str, str, tuple[tuple[str, str], ...]]] = {
    "decode_count_short": ("decode_protocol", "wait compares with tiles - 1: True one tile early",
                           ((_WAIT_READ, "load_acquire_gpu(counters, layer) >= tiles - 1"),)),
    "decode_count_past": ("decode_protocol", "wait compares with > tiles: never True at the count itself",
                          ((_WAIT_READ, "load_acquire_gpu(counters, layer) > tiles"),)),
    "decode_wrong_counter": ("decode_protocol", "wait reads the counter of the layer before (layer - 1)",
                             ((_WAIT_READ, "load_acquire_gpu(counters, layer - 1) >= tiles"),)),
    "decode_unbounded": ("decode_protocol", "wait never gives up (no spin_limit): a count that never comes hangs "
                         "the megakernel", ((_LOOP, "    while load_acquire_gpu(counters, layer) < tiles:\n"
                                                   "        nanosleep(32)\n    return True"),)),
    "decode_read_once": ("decode_protocol", "wait reads the counter once, with an acquire, and no loop: False when "
                         "the last tile comes a moment later, long before spin_limit + 1 polls",
                         ((_LOOP, f"    return {_WAIT_READ}"),)),
    "decode_signal_adds_two": ("decode_protocol", "signal adds 2: a layer looks done when half its tiles are",
                               ((_SIGNAL_ADD, "add_release_gpu(counters, layer, 2)"),)),
    "decode_signal_rejected": ("decode_protocol", "wrong only for a GPU: signal converts a string (int(\"1\")), "
                               "which the simulator runs as Python and numba's compiler rejects; only signal's "
                               "compiled check is lost, the wait beside it judged on its own",
                               ((_SIGNAL_ADD, "add_release_gpu(counters, layer, int(\"1\"))"),)),
    "decode_wait_rejected": ("decode_protocol", "wrong only for a GPU: wait converts a string (int(\"0\")), which "
                             "the simulator runs as Python and numba's compiler rejects; only wait's compiled check "
                             "is lost, its probes run on the simulator, the signal beside it judged on its own",
                             (("    spins = 0\n", "    spins = int(\"0\")\n"),)),
}


def mutant(name: str) -> str:
    """The source of the mutant `name`: its exercise's solution with its replacements, its problem said first."""
    exercise, why, replacements = MUTANTS[name]
    source = solution_source(exercise)
    for old, new in replacements:
        if source.count(old) != 1:
            raise ValueError(f"mutant {name}: {old!r} occurs {source.count(old)} times in the solution of {exercise} "
                             f"(once is needed): update tests/mutations.py")
        source = source.replace(old, new)
    return f"# {exercise}, wrong: {why}.\n{source}"


if __name__ == "__main__":  # python3 tests/mutations.py FOLDER: every mutant as FOLDER/NAME.py
    folder = Path(sys.argv[1])
    for name in MUTANTS:
        (folder / f"{name}.py").write_text(mutant(name))
