"""Lesson 04's cluster exercise (cluster_combine): the blocks of a cluster combine their partial (max, sum) pairs
through distributed shared memory, written by the student.

    @cuda.jit(device=True)
    def cluster_combine(pair_m, pair_d):   # -> (M, D) of the whole cluster, in every thread of every block
        # pair_m[0], pair_d[0]: this block's (max, sum of exp(x - max)), in its shared memory; the caller wrote
        # them (thread 0, then cuda.syncthreads()) and, once this returns, may overwrite them (the next row) or
        # leave (its shared memory is gone)

The student reads every block's pair with dsmem_load(pair_m, 0, rank) for rank 0 .. cluster_size() - 1, after a
cluster barrier (the pairs are written), combines them with the online rule m = max(m1, m2),
s = s1 exp(m1 - m) + s2 exp(m2 - m), and waits at a cluster barrier again before returning (no block overwrites
or leaves while another still reads its pair). ClusterJudge grades it for `kernels-lab grade` and the lesson's
check: one case, runs of the same probe kernel on the same pairs (2 clusters each of 2, 3 and 4 blocks):

  plain      the probe's own cluster barriers before and after the call: only the combine is judged  -> COMBINE
  late       the probe has no barrier before the call, and the blocks write their pairs late, rank r
             r / (k-1) x LATE_NS late (late_reversed: (k-1-r) / (k-1) x LATE_NS): a combine that reads
             a peer's pair without waiting reads the poison (NaN) still there, whichever peer it
             reads early (a lower rank's early read of a higher one shows in late, the other way
             round in late_reversed)                                                                -> WAITS
  overwrite  the probe has no barrier after the call: thread 0 poisons its pair as soon as the call
             returns; on the simulator DSMEM loads of rank r are delayed r x STAGGER_S
             (clusters.staggered_loads; overwrite_reversed: (k-1-r) x STAGGER_S), so without a
             barrier after the reads a later rank reads a pair the first has already poisoned (rank
             0's, or in overwrite_reversed rank k-1's). A GPU's schedule is not made certain, so
             the PTX decides too, a barrier.cluster.wait after the last ld.shared::cluster          -> HOLDS
The probe goes through numba's compiler on every back-end (on the simulator in a child, grading.api.Probe):
a combine it rejects earns nothing, and the simulator's HOLDS reads the same PTX a GPU's does.
WAITS and HOLDS judge the same outcome as plain (the same values, or the same error, whichever thread raised
it): a combine that is wrong loses COMBINE only, and a combine that takes no barrier when it needs none is not
blamed for it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import numpy as np

from ...backend import BACKEND
from ...clusters import STAGGERS_LOADS, cluster_launcher, cluster_sync, staggered_loads
from ...core import Case, Exercise
from ...intrinsics import globaltimer, nanosleep
from ...runtime import cuda
from . import workload as sm

COMBINE, WAITS, HOLDS = ("combines every block's pair", "waits for every pair before reading",
                         "keeps its pair until every block has read it")
CLUSTERS = (2, 3, 4)               # blocks per cluster of the probes; two clusters each
THREADS = BACKEND.size(gpu=64, simulator=8)  # per block: every thread of every block calls the combine
LATE_NS = BACKEND.size(gpu=2_000_000, simulator=400_000_000)  # the latest writer's delay (the simulator's threads
STAGGER_S = 0.02                   # start slowly on two busy cores); the simulator's DSMEM delay per rank
# the probe's runs; overwrite_reversed only where loads can be staggered (the simulator: a GPU's PTX decides)
RUNS = ("plain", "late", "late_reversed", "overwrite") + (("overwrite_reversed",) if STAGGERS_LOADS else ())
POISON = np.float32(np.nan)
_jit, _to_device, _synchronize = cuda.jit, cuda.to_device, cuda.synchronize  # bound once (the simulator swaps
                                                                              # this module's cuda during a launch)


@lru_cache(maxsize=None)
def _probe(combine: Any, before: bool, after: bool) -> Any:
    """Block b writes pairs[b] as its pair (delays[b] ns late), calls combine in every thread, stores what it
    returned and poisons its pair at once (after the cluster barrier when `after`)."""
    def cluster_combine_probe(pairs_m, pairs_d, out_m, out_d, delays):
        pair_m = cuda.shared.array(1, np.float32)
        pair_d = cuda.shared.array(1, np.float32)
        t, b = cuda.threadIdx.x, cuda.blockIdx.x
        if t == 0:
            pair_m[0], pair_d[0] = POISON, POISON
        cluster_sync()  # every block has started (and holds the poison) before any reads its memory
        if t == 0:
            late_ns = delays[b]
            if late_ns > 0:  # this block writes late
                start = globaltimer()
                while globaltimer() - start < late_ns:  # bounded by the clock
                    nanosleep(1000)
            pair_m[0], pair_d[0] = pairs_m[b], pairs_d[b]
        cuda.syncthreads()
        if before:
            cluster_sync()
        m, d = combine(pair_m, pair_d)
        out_m[b * cuda.blockDim.x + t], out_d[b * cuda.blockDim.x + t] = m, d
        if after:
            cluster_sync()
        cuda.syncthreads()
        if t == 0:
            pair_m[0], pair_d[0] = POISON, POISON  # the next row's pair, or a block that has left
    return BACKEND.coresident(_jit(cluster_combine_probe))


def _pairs(k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two clusters of k blocks: maxima far apart (-60 .. 60), so that a sum not rescaled is far off, and sums
    of exp(x - max) between 1 and 50, as a block's are."""
    rng = np.random.default_rng(seed + k)
    return (rng.uniform(-60, 60, 2 * k).astype(np.float32), rng.uniform(1, 50, 2 * k).astype(np.float32))


def _launch(combine: Any, k: int, seed: int, run: str) -> dict[str, Any]:
    m, d = _pairs(k, seed)
    out_m = _to_device(np.full(2 * k * THREADS, POISON, np.float32))
    out_d = _to_device(np.full(2 * k * THREADS, POISON, np.float32))
    late, overwrite = run.startswith("late"), run.startswith("overwrite")
    reverse = run.endswith("_reversed")
    order = [(k - 1 - r if reverse else r) for r in np.arange(2 * k) % k]  # rank r of each of the two clusters
    delays = np.array([LATE_NS * o // (k - 1) if late else 0 for o in order], np.int64)
    kernel = _probe(combine, not late, not overwrite)
    launch = cluster_launcher(kernel, 2 * k, THREADS, k, (_to_device(m), _to_device(d), out_m, out_d,
                                                          _to_device(delays)))
    try:
        with staggered_loads(STAGGER_S if overwrite else 0.0, reverse):
            launch()
            _synchronize()
    except Exception as e:  # noqa: BLE001  (the student's code raised: judged, never the grader's failure)
        from ...grading.api import launch_failure
        failed = launch_failure(e, __file__)  # the simulator names the thread, which is not the outcome
        return {"k": k, **failed, "error": re.sub(r"tid=\[[^]]*\] ctaid=\[[^]]*\]: ", "", failed["error"])}
    return {"k": k, "m": out_m.copy_to_host().reshape(2 * k, THREADS).tolist(),
            "d": out_d.copy_to_host().reshape(2 * k, THREADS).tolist()}


def _ptx_of(kernel: Any) -> str | None:
    """The PTX numba compiled for a launched kernel (a GPU only: the simulator's kernels have no inspect_asm)."""
    inspect = getattr(kernel, "inspect_asm", None)
    if inspect is None:
        return None
    found = inspect()
    return "\n".join(found.values()) if isinstance(found, dict) else str(found)


def holds_in_ptx(ptx: str) -> str | None:
    """None when a cluster barrier wait follows the last DSMEM load in the overwrite probe's PTX (whose own
    code has no cluster barrier after the call); else what is missing."""
    loads = [i for i, line in enumerate(ptx.splitlines()) if "ld.shared::cluster" in line]
    if not loads:
        return "its PTX has no ld.shared::cluster: the pairs are not read through DSMEM"
    if not any("barrier.cluster.wait" in line for line in ptx.splitlines()[loads[-1]:]):
        return ("in its PTX no barrier.cluster.wait follows the last ld.shared::cluster: a block may overwrite its "
                "pair (or leave) while another block still reads it (a read of the block's own pair after the "
                "barrier would be safe, but the PTX does not say which rank a load reads: read your own pair as "
                "pair_m[0], pair_d[0])")
    return None


def _reference(k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """float64 (M, D) of each cluster, and its candidates of the usual mistakes (for the hint)."""
    m, d = (a.astype(np.float64).reshape(2, k) for a in _pairs(k, seed))
    big = m.max(axis=1, keepdims=True)
    return big[:, 0], (d * np.exp(m - big)).sum(axis=1)


def _mistake(k: int, seed: int, got_m: np.ndarray, got_d: np.ndarray) -> str:
    """What a wrong (M, D) of cluster 0 looks like (one of the usual mistakes, or nothing)."""
    m, d = (a.astype(np.float64).reshape(2, k)[0] for a in _pairs(k, seed))
    close = lambda a, b: bool(np.allclose(a, b, rtol=1e-4, atol=0))  # noqa: E731
    if close(got_m[:k], m) and close(got_d[:k], d):
        return ": every block returned its own pair: read the pair of every rank 0 .. cluster_size() - 1"
    if close(got_m[0], m.max()) and close(got_d[0], d.sum()):
        return (": the sums were added without rescaling; s = s1 exp(m1 - m) + s2 exp(m2 - m) with "
                "m = max(m1, m2)")
    for skipped, which in ((0, "rank 0"), (k - 1, f"the last rank ({k - 1})")):
        keep = np.arange(k) != skipped
        big = m[keep].max()
        if close(got_m[0], big) and close(got_d[0], (d[keep] * np.exp(m[keep] - big)).sum()):
            return f": {which} was left out: the ranks are 0 .. cluster_size() - 1"
    return ""


class ClusterJudge:
    """Grades cluster_combine (grading/grade.py, kind "data") and lessons.check: call, job, run, score as
    topics/decode/protocol.py's ProtocolJudge; the same checks and maximum on every back-end."""

    checks = (COMBINE, WAITS, HOLDS)

    def call(self, entry: Any) -> Any:
        from ...grading.api import defined_outside_kernels_lab, forbidden_import
        if not getattr(entry, "_device", False) and not getattr(entry, "targetoptions", {}).get("device"):
            raise TypeError(f"cluster_combine must be a @cuda.jit(device=True) function, got {type(entry).__name__}")
        if not defined_outside_kernels_lab(entry.py_func):
            raise TypeError(f"cluster_combine is kernels_lab's own ({entry.py_func.__module__}), not yours")
        if (refused := forbidden_import(entry)) is not None:
            raise TypeError(refused)
        return entry

    def job(self, case: Case) -> dict[str, Any]:
        return {"seed": case.seed, "about": f"the combine in clusters of {', '.join(map(str, CLUSTERS))} blocks"}

    def run(self, value: Any, job: dict[str, Any]) -> dict[str, Any]:
        from numba import types

        from ...grading.api import Probe, not_compiled, rejection, where_not_compiled
        f32 = types.Array(types.float32, 1, "C")
        # the simulator compiles nothing: the probe goes through numba's compiler in a child, as a GPU's launch
        # does, for its refusal and the PTX that HOLDS reads
        compiled = where_not_compiled({"probe": Probe(_probe, (value,), (f32, f32, f32, f32, types.Array(
            types.int64, 1, "C")), options=(True, False), cc=(9, 0))})
        if (refused := rejection(compiled)) is not None:
            return {"rejected": refused}
        ran: dict[str, Any] = {r: [_launch(value, k, job["seed"], r) for k in CLUSTERS] for r in RUNS}
        ran["ptx"] = compiled["probe"].get("ptx") if compiled else _ptx_of(_probe(value, True, False))
        ran["not_compiled"] = not_compiled(compiled)
        return ran

    def score(self, case: Case, job: dict[str, Any], got: Any) -> list[tuple[str, bool | None, str]]:
        if (why := got.data_failure(job["about"])) is not None:
            return [(c, False, why) for c in self.checks]
        from ...grading.api import refusal, refused
        ran = got.ran
        # nothing ran (on a GPU every launch failed to compile): no outcome to compare, and no barrier check passes
        if (words := refusal(ran, ran.get("plain", []), "the combine")) is not None:
            return refused(self.checks, words, "the combine")
        seed = job["seed"]
        ok, said = self._combine(ran["plain"], seed)
        return [(COMBINE, ok, said + ran.get("not_compiled", "")),
                (WAITS, *self._same(ran["plain"], [ran["late"], ran["late_reversed"]],
                                    [f"with the pairs written rank by rank, the last {LATE_NS / 1e6:g} ms late, "
                                     f"and no barrier of the probe's before the call",
                                     f"with the pairs written rank by rank from the last, rank 0's "
                                     f"{LATE_NS / 1e6:g} ms late, and no barrier of the probe's before the call"],
                                    "a pair was read before its block had written it (wait at a cluster barrier, "
                                    "cluster_sync, before the first dsmem_load), or a pair changed while another "
                                    "block read it")),
                (HOLDS, *self._holds(ran))]

    @staticmethod
    def _combine(plain: list[dict[str, Any]], seed: int) -> tuple[bool, str]:
        for p in plain:
            k = p["k"]
            if "error" in p:
                extra = (": the ranks are 0 .. cluster_size() - 1" if f"rank {k} of a cluster of {k}" in p["error"]
                         else "")
                return False, f"in a cluster of {k} blocks the combine raised {p['error']}{extra}"
            want_m, want_d = _reference(k, seed)
            got_m, got_d = (np.asarray(p[a], np.float64).reshape(2, k * THREADS) for a in ("m", "d"))
            for c in range(2):
                bad = ~(np.isclose(got_m[c], want_m[c], rtol=1e-5, atol=1e-5) &
                        np.isclose(got_d[c], want_d[c], rtol=1e-4, atol=1e-6))
                if bad.any():
                    i = int(np.argmax(bad))
                    rows = np.asarray(p["m"], np.float64)[:k, 0], np.asarray(p["d"], np.float64)[:k, 0]
                    return False, (f"in a cluster of {k} blocks (cluster {c}, thread {i % THREADS} of rank "
                                   f"{i // THREADS}) the combine returned ({got_m[c, i]:.6g}, {got_d[c, i]:.6g}), expected "
                                   f"({want_m[c]:.6g}, {want_d[c]:.6g})" + (_mistake(k, seed, *rows) if c == 0 else ""))
        return True, (f"(M, D) right against float64 in every thread of every block, clusters of "
                      f"{', '.join(str(p['k']) for p in plain)} blocks, two clusters each")

    @staticmethod
    def _same(plain: list[dict[str, Any]], others: list[list[dict[str, Any]]], hows: list[str],
              fix: str) -> tuple[bool, str]:
        """Each of the other runs against plain: the same values, or the same error whichever thread raised it."""
        for other, how in zip(others, hows):
            for p, o in zip(plain, other):
                same = _anyone(p.get("error")) == _anyone(o.get("error")) and ("error" in p or (
                    np.array_equal(np.asarray(p["m"]), np.asarray(o["m"]), equal_nan=True) and
                    np.array_equal(np.asarray(p["d"]), np.asarray(o["d"]), equal_nan=True)))
                if same:
                    continue
                if "error" in o:
                    return False, (f"in a cluster of {p['k']} blocks, {how}: {o['error']} (with the probe's "
                                   f"barriers: {p.get('error') or 'no error'}); {fix}")
                said = "different values" + (" (NaN: the poison of an unwritten pair)" if np.isnan(
                    np.asarray(o["m"] + o["d"], np.float64)).any() else "")
                return False, f"in a cluster of {p['k']} blocks, {how}: {said}; {fix}"
        return True, "the same outcome as with the probe's barriers, " + "; and ".join(hows)

    def _holds(self, ran: dict[str, Any]) -> tuple[bool, str]:
        how = "with each block's pair poisoned as soon as the call returns"
        hows = [how + (f" and rank r's DSMEM loads delayed r x {STAGGER_S * 1e3:g} ms" if STAGGERS_LOADS else "")]
        if STAGGERS_LOADS:
            hows.append(f"{how} and rank r's DSMEM loads delayed (k - 1 - r) x {STAGGER_S * 1e3:g} ms")
        fix = ("a block overwrote (or left) its pair while another block still read it: wait at a cluster "
               "barrier after the last dsmem_load, before returning")
        ok, said = self._same(ran["plain"], [ran[r] for r in RUNS if r.startswith("overwrite")], hows, fix)
        if ok and ran["ptx"] is not None:
            problem = holds_in_ptx(ran["ptx"])
            if problem is not None:
                return False, f"{problem}; {fix.split(': ', 1)[1]}"
            said += "; in its PTX a barrier.cluster.wait follows the last ld.shared::cluster"
        return ok, said


def _anyone(error: str | None) -> str | None:
    """An error without the thread and block it names: which one raised first varies from run to run."""
    return None if error is None else re.sub(r"(thread|block) \([\d, ]*\)", r"\1", error)


CLUSTER_JUDGE = ClusterJudge()

sm.WORKLOAD.add_exercise(Exercise(
    name="cluster_combine", workload="softmax", variant="cluster", lesson="04",
    title="combine the (max, sum) pairs of a cluster's blocks through distributed shared memory", kind="data",
    entry="cluster_combine",
    signature="@cuda.jit(device=True)\ndef cluster_combine(pair_m, pair_d):  # -> (M, D) of the cluster; "
              "pair_m[0], pair_d[0]: this block's pair in its shared memory",
    cases=(Case(sm.WORKLOAD.size(rows=1, cols=1), 81),), argument_order=("pair_m", "pair_d"),
    judge="kernels_lab.topics.softmax.cluster_exercise:CLUSTER_JUDGE",
    points={COMBINE: 4, WAITS: 3, HOLDS: 3}))
