"""Wrong submissions made from a lesson's solution by named mutations, instead of hand-copied files: each is the
solution with a few exact replacements, each of which must match exactly once (a solution that changed fails
loudly here, never a fixture silently gone stale). tests/sources.submission serves them by name; the GPU scripts
(benchmarks/grade_decode.sh, grade_adversarial.sh, h200.sh) write them out (python3 tests/mutations.py FOLDER)."""

from __future__ import annotations

import sys
from pathlib import Path

from kernels_lab.lessons import solution_source

_WAIT_READ = "load_acquire_gpu(counters, layer) >= tiles"
_SIGNAL_ADD = "add_release_gpu(counters, layer, 1)"
_LOOP = ("    spins = 0\n    while spins <= spin_limit:\n        if load_acquire_gpu(counters, layer) >= tiles:  "
         "# re-read every time; later reads see the stores\n            return True\n        nanosleep(32)\n"
         "        spins += 1\n    return False")

# softmax (lesson 04): its shared arrays, its block-wide trees (the max, then the sum), a warp's butterfly
_ROW_BUF = "    row_buf = cuda.shared.array(MAX_COLS, np.float32)   # the row, read from global memory once\n"
_PART = "    part = cuda.shared.array(MAX_THREADS, np.float32)   # one partial result per thread\n"
_TREE = ("    part[t] = {v}\n    cuda.syncthreads()\n    step = nt // 2\n    while step > 0:\n        if t < step:\n"
         "            {op}\n        cuda.syncthreads()\n        step //= 2\n    {v} = part[0]\n")
_MAX_TREE = (_TREE.format(v="m", op="part[t] = max(part[t], part[t + step])")
             + "    cuda.syncthreads()  # everyone has read the max before part is reused\n")
_SUM_TREE = _TREE.format(v="s", op="part[t] += part[t + step]")
_SHUFFLES = "    k = 16\n    while k > 0:\n        {op}\n        k //= 2\n"
# cluster_combine (lesson 04) started from an empty pair instead of rank 0's
_CLUSTER_IMPORTS = ("from kernels_lab.clusters import cluster_size, cluster_sync, dsmem_load\n",
                    "from kernels_lab.clusters import cluster_size, cluster_sync, dsmem_load\n"
                    "from kernels_lab.reduce import LOWEST\n")
_CLUSTER_EMPTY_PAIR = ("    m = dsmem_load(pair_m, 0, 0)\n    s = dsmem_load(pair_d, 0, 0)\n",
                       "    m, s = LOWEST, np.float32(0)\n")
_CLUSTER_FIRST = "    cluster_sync()  # every block's pair is written\n"
_CLUSTER_FIRST_READ = "    m = dsmem_load(pair_m, 0, 0)\n    s = dsmem_load(pair_d, 0, 0)\n"

# name -> (exercise, what is wrong (the mutant's first line says it), the replacements)
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
    "decode_barrier_in_signal": ("decode_protocol", "signal calls cuda.syncthreads(), but only thread 0 of the block "
                                 "calls signal: the barrier waits for threads that never come to it (a GPU "
                                 "deadlocks, or the barrier meets the block's next one and the threads run out of "
                                 "step). The release add itself is right",
                                 ((_SIGNAL_ADD, f"cuda.syncthreads()\n    {_SIGNAL_ADD}"),)),
    "decode_no_fence": ("decode_protocol", "signal counts with a plain atomic add and no fence before it (numba's "
                        "atomics are relaxed). Another block may see the count before this block's stores of "
                        "x_{l+1}, and read stale values. The simulator's memory is coherent, so every run is right "
                        "there: only the PTX shows it", ((_SIGNAL_ADD, "cuda.atomic.add(counters, layer, 1)"),)),
    "decode_plain_load": ("decode_protocol", "wait polls counters[layer] with an ordinary load. Nothing between two "
                          "polls writes memory, so the compiler may hoist the load out of the loop (it does: the spin "
                          "becomes one read), and nothing orders the block's reads of x_l after it. Right on the "
                          "simulator, whose memory is coherent",
                          ((_WAIT_READ, "counters[layer] >= tiles"), ("        nanosleep(32)\n", ""))),
    "decode_no_poll": ("decode_protocol", "wait returns True without reading the counter. Where every layer ends "
                       "before the next begins (the simulator's table) the output is right by luck; on a GPU the "
                       "blocks read x_l before it is written", ((_LOOP, "    return True"),)),
    # lesson 01
    "fuse_no_bounds_guard": ("fuse_chain", "no bounds guard (if True): the last block's spare threads read and "
                             "write past the end", (("if i < out.size:", "if True:"),)),
    "fuse_wrong_index": ("fuse_chain", "adds x[i] to itself instead of b[i]: right only where x equals b (symmetric "
                         "inputs would hide it)", (("h = x[i] + b[i]", "h = x[i] + x[i]"),)),
    "fuse_global_temporary": ("fuse_chain", "the temporary goes through global memory (written to out, read back)",
                              (("        h = x[i] + b[i]              # stays in a register\n",
                                "        out[i] = x[i] + b[i]\n        h = out[i]\n"),)),
    # lesson 03
    "persistent_no_stride": ("persistent_chain", "the loop strides by out.size, not by the grid's size: a grid "
                             "smaller than n leaves the rest unwritten",
                             (("i += cuda.gridsize(1)", "i += out.size"),)),
    "block_sums_no_barrier": ("block_sums", "no barrier after the tile is written nor between the tree's steps: a "
                              "thread may read its partner's slot before it is written",
                              (("    cuda.syncthreads()\n    step = 32", "    step = 32"),
                               ("        cuda.syncthreads()\n", ""))),
    "block_sums_past_end": ("block_sums", "A deterministic bug: the last block reads past the end of x (no guard). "
                            "Not a race", (("x[i] if i < x.size else np.float32(0)", "x[i]"),)),
    "block_sums_transposed": ("block_sums", "A deterministic bug: block and thread swapped in the index (every "
                              "schedule agrees). Not a race",
                              (("i = cuda.blockIdx.x * 64 + t", "i = t * cuda.gridDim.x + cuda.blockIdx.x"),)),
    # lesson 04
    "softmax_max_from_zero": ("fused_softmax", "the running max starts at 0, not at -inf (the lowest float). Right "
                              "while a row has a positive element; on a row near -100 the \"max\" stays 0, every "
                              "exp(x - 0) underflows to 0 and the row is 0 / 0",
                              (("    m = LOWEST\n", "    m = np.float32(0)\n"),)),
    "softmax_skips_last_cols": ("fused_softmax", "tiles each row by the block's width and drops the last partial "
                                "tile: the last cols % blockDim.x columns of EVERY row are never written (holes in "
                                "the middle of the output, not one tail)",
                                (("    cols = x.shape[1]\n", "    cols = x.shape[1]\n    full = (cols // nt) * nt\n"),
                                 ("range(t, cols, nt):\n        out[row, j]",
                                  "range(t, full, nt):\n        out[row, j]"))),
    "softmax_no_max_subtraction": ("fused_softmax", "no max subtracted: exp(100) overflows float32",
                                   (("    m = LOWEST\n    for j in range(t, cols, nt):\n        v = x[row, j]\n"
                                     "        row_buf[j] = v\n        m = max(m, v)\n" + _MAX_TREE + "\n", ""),
                                    ("math.exp(row_buf[j] - m)", "math.exp(x[row, j])"))),
    "softmax_two_pass_global": ("fused_softmax", "x read from global memory three times (max, sum, output) instead "
                                "of staged once in shared memory: right values, the traffic budget lost",
                                ((_ROW_BUF, ""),
                                 ("        v = x[row, j]\n        row_buf[j] = v\n        m = max(m, v)\n",
                                  "        m = max(m, x[row, j])\n"),
                                 ("        e = math.exp(row_buf[j] - m)\n        row_buf[j] = e\n        s += e\n",
                                  "        s += math.exp(x[row, j] - m)\n"),
                                 ("row_buf[j] / s", "math.exp(x[row, j] - m) / s"))),
    "softmax_warp_reduce_only": ("fused_softmax", "a warp's shuffles taken for the block's reduction. Each warp "
                                 "reduces the max and the sum of ITS elements only: right with 32 threads a block, "
                                 "wrong with 64 (two warps, two different \"row sums\")",
                                 (("LOWEST = np.float32(-3.0e38)\n",
                                   "LOWEST = np.float32(-3.0e38)\nALL = 0xFFFFFFFF\n"), (_PART, ""),
                                  (_MAX_TREE, _SHUFFLES.format(op="m = max(m, cuda.shfl_xor_sync(ALL, m, k))")),
                                  (_SUM_TREE, _SHUFFLES.format(op="s += cuda.shfl_xor_sync(ALL, s, k)")))),
    "cluster_no_barrier_before": ("cluster_combine", "no cluster barrier before the reads (a peer may not have "
                                  "written its pair yet)",
                                  (("    cluster_sync()  # every block's pair is written\n", ""),)),
    "cluster_no_barrier_after": ("cluster_combine", "no cluster barrier after the reads (a block that returns may "
                                 "overwrite its pair, or leave, while another block still reads it)",
                                 (("    cluster_sync()  # nobody overwrites or leaves while another block still "
                                   "reads its pair\n", ""),)),
    "cluster_no_rescale": ("cluster_combine", "the sums added as they are (each is relative to its own block's max)",
                           (("s = s * math.exp(m - big) + s2 * math.exp(m2 - big)", "s = s + s2"),)),
    "cluster_ranks_from_one": ("cluster_combine", "the rank loop starts at 1 from the empty pair (rank 0's pair is "
                               "never read)", (_CLUSTER_IMPORTS, _CLUSTER_EMPTY_PAIR)),
    "cluster_ranks_past_end": ("cluster_combine", "the rank loop runs to cluster_size() inclusive (one block past "
                               "the cluster)", (_CLUSTER_IMPORTS, _CLUSTER_EMPTY_PAIR,
                                                ("range(1, cluster_size())", "range(cluster_size() + 1)"))),
    # found by an attack on the grader (12-07): each passed the check that should catch it
    "cluster_first_pair_before_barrier": ("cluster_combine", "rank 0's pair (where the fold starts) is read before "
                                          "the cluster barrier, the others after it",
                                          ((_CLUSTER_FIRST + _CLUSTER_FIRST_READ,
                                            _CLUSTER_FIRST_READ + _CLUSTER_FIRST),)),
    "cluster_last_rank_after_barrier": ("cluster_combine", "the last rank's pair is folded in after the closing "
                                        "cluster barrier: that block may already have overwritten it, or left",
                                        (("range(1, cluster_size())", "range(1, cluster_size() - 1)"),
                                         ("reads its pair\n    return m, s", "reads its pair\n"
                                          "    r = cluster_size() - 1\n    m2 = dsmem_load(pair_m, 0, r)\n"
                                          "    s2 = dsmem_load(pair_d, 0, r)\n    big = max(m, m2)\n"
                                          "    s = s * math.exp(m - big) + s2 * math.exp(m2 - big)\n"
                                          "    return big, s"))),
    "cluster_python_list": ("cluster_combine", "right as Python, refused by numba's compiler: the fold goes through "
                            "a Python list (it needs NRT, which CUDA kernels do not have)",
                            (("        m = big\n", "        m = [big][0]\n"),)),
    # lesson 05
    "rnn_transposed": ("rnn_step", "W is read transposed (W[j, i]): right only when W is symmetric",
                       (("W[i, j] * h", "W[j, i] * h"),)),
    "rnn_batch0_only": ("rnn_step", "every batch row is computed from batch row 0's sequence (u[t, 0] and "
                        "h[t-1, 0]): right when the batch has one sequence, wrong for every other row as soon as "
                        "there are two distinct ones",
                        (("z = u[t, b, i]", "z = u[t, 0, i]"), ("h[t - 1, b, j]", "h[t - 1, 0, j]"))),
    "rnn_holes_last_unit": ("rnn_step", "one thread per (batch row, unit), but the grid is sized for hidden - 1 "
                            "units per row: the last unit of every batch row of every step is never written (holes "
                            "spread through h, not one tail)",
                            (("k < batch * hidden", "k < batch * (hidden - 1)"), ("k // hidden", "k // (hidden - 1)"),
                             ("k % hidden", "k % (hidden - 1)"))),
    # lesson 06
    "pdl_first_does_not_wait": ("group_switches", "The first member does not wait: it may read the earlier kernel's "
                                "tensors before they are visible", (("(k == 0,", "(False,"),)),
    "pdl_every_member_waits": ("group_switches", "Every member waits at its start: right, but each member starts "
                               "only when the one before has finished (no overlap at any boundary)",
                               (("(k == 0,", "(True,"), ("k > 0)", "False)"))),
    "pdl_last_triggers": ("group_switches", "Every member triggers, the last one too: the later kernel, which does "
                          "not wait, may launch while the last member still writes", (("k < g - 1,", "True,"),)),
    "pdl_two_rules": ("group_switches", "The seed's two rules only: the first member waits, all but the last "
                      "trigger; no wait at the end (order), so the later kernel may read a tensor whose member still "
                      "runs", (("k > 0)", "False)"),)),
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
