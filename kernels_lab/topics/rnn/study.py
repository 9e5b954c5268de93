"""The RNN's study (`kernels-lab bench rnn`): h_t = tanh(W h_{t-1} + u_t), every variant at hidden 1024 and 2048,
batch 1, 4 and 32, 512 steps, against torch; lesson 05, the demo's committed table and figures/rnn_h100_*.png
quote it.

Lines: the registered variants (unfused, fused, graph, persistent and its barrier comparison); at batch 4 also
the persistent kernel's numbered tilings (rnn.TILINGS, llm.c dev/cuda style) with the registered barrier; and
anchors: torch.nn.RNN (cuDNN; tanh, no bias, identity input weights so that u is the input projection: cuDNN
also pays that T x batch x hidden^2 GEMM), an eager loop of addmm + tanh, and that loop captured in a torch CUDA
graph (TF32 off: float32, as ours). Every record has us_per_step and tflops (2 hidden^2 batch flops per step);
a persistent line also its tiling, blocks, registers and local memory per thread (local > 0: W spilled).
Useful bytes: W once, u read and h written once.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from ...backend import BACKEND
from ...core import Size
from ...profile.anchors import torch_cuda
from ...profile.study import Anchor, Group, Line, Study, version
from . import workload as rnn
from .demo import per_step

W = rnn.WORKLOAD
STEPS = 512
TILING_BATCH = 4  # the tilings are compared at this batch
SIZES = tuple(W.size(hidden=h, batch=b, steps=STEPS) for h in (1024, 2048) for b in (TILING_BATCH, 1, 32))


# the numbered tilings other than the registered one; the simulator runs them with 64-thread blocks, as it runs
# the registered one (rnn.default_tiling): every thread is a Python thread there
TILINGS = {k: dataclasses.replace(t, threads=BACKEND.size(gpu=t.threads, simulator=64))
           for k, t in rnn.TILINGS.items() if k != rnn.GPU_TILING}
TILING_LINES = tuple(
    version(k, rnn.persistent_variant(f"persistent_{k}", rnn.PERSISTENT_BARRIER, t, about=f"{k}: {t.about}"), t.about,
            fits=lambda size: size.batch == TILING_BATCH)
    for k, t in TILINGS.items())


def describe(line: Line, size: Size) -> dict[str, Any]:
    """A persistent line's tiling, barrier, blocks, and its compiled kernel's registers and local memory."""
    if line.variant.pattern != "persistent":
        return {}
    tiling = TILINGS.get(line.name) or rnn.default_tiling()
    barrier = rnn.PERSISTENT_VARIANTS.get(line.name, rnn.PERSISTENT_BARRIER)
    lay = rnn.make_layout(size.hidden, size.batch, tiling, rnn.max_resident_blocks(tiling))
    found = {"barrier": barrier, "blocks": lay.blocks, "threads": tiling.threads,
             "tiling": dataclasses.asdict(tiling)}
    compiled = list(getattr(rnn.persistent_kernel(lay, barrier), "overloads", {}).values())  # none on the simulator
    if compiled:
        found.update(regs_per_thread=compiled[0].regs_per_thread,
                     local_bytes_per_thread=compiled[0].local_mem_per_thread)
    return found


# -- anchors -----------------------------------------------------------------------------------------

def _tensors(dev_in: dict[str, Any]):
    torch = torch_cuda()
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # float32, as ours
    return torch, torch.as_tensor(dev_in["W"], device="cuda"), torch.as_tensor(dev_in["u"], device="cuda")


def _eager_loop(torch, weights, u, size: Size):
    """(the loop, its output): z = u_t + h_{t-1} W^T (rows of h are batch columns), h_t = tanh(z)."""
    out, z, h0 = torch.empty_like(u), torch.empty_like(u[0]), torch.zeros_like(u[0])
    weights_t = weights.t().contiguous()

    def eager():
        h = h0
        for t in range(size.steps):
            torch.addmm(u[t], h, weights_t, out=z)
            torch.tanh(z, out=out[t])
            h = out[t]
    return eager, out


def _make_eager(dev_in: dict[str, Any], size: Size):
    torch, weights, u = _tensors(dev_in)
    eager, out = _eager_loop(torch, weights, u, size)
    return eager, lambda: {"h": out}


def _make_graph(dev_in: dict[str, Any], size: Size):
    torch, weights, u = _tensors(dev_in)
    eager, out = _eager_loop(torch, weights, u, size)
    graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        eager()  # warm up (cuBLAS picks its kernels) outside the capture
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        eager()
    # a graph keeps no reference to the tensors it captured: `eager` holds z, h0 and weights_t, which were
    # allocated before the capture; dropped, their memory went back to torch's pool and the next anchor's
    # tensors were put there, read and overwritten by every replay (both anchors wrong, on an H100)
    return functools.partial(_replay, graph, eager), lambda: {"h": out}


def _replay(graph, *keep_alive) -> None:
    graph.replay()


def _make_cudnn(dev_in: dict[str, Any], size: Size):
    torch, weights, u = _tensors(dev_in)
    cudnn = torch.nn.RNN(size.hidden, size.hidden, nonlinearity="tanh", bias=False).to("cuda")
    with torch.no_grad():
        cudnn.weight_ih_l0.copy_(torch.eye(size.hidden, device="cuda"))  # x_t = u_t: the input projection is given
        cudnn.weight_hh_l0.copy_(weights)
    h0, held = torch.zeros_like(u[0])[None], {}

    def run():
        with torch.no_grad():
            held["h"] = cudnn(u, h0)[0]
    return run, lambda: dict(held)


ANCHORS = (
    Anchor("torch_eager", "addmm + tanh per step, eager", _make_eager, launches=2 * STEPS),
    Anchor("torch_graph", "the eager loop captured in a torch CUDA graph", _make_graph, launches=2 * STEPS),
    Anchor("torch_cudnn", "torch.nn.RNN (cuDNN), identity input weights: includes a T x batch x hidden^2 input GEMM",
           _make_cudnn, launches=1),
)

STUDY = Study(
    W,
    groups=(Group("sizes", SIZES),),
    useful_bytes=lambda size: 4 * size.hidden ** 2 + 8 * size.steps * size.batch * size.hidden,
    check_size=lambda size: size.replace(steps=64),
    check_sizes=(W.size(hidden=13, batch=TILING_BATCH, steps=2),),
    reps=20,
    versions=TILING_LINES,
    anchors=ANCHORS,
    describe=describe,
    derive=per_step,
    meta=lambda: {"steps": STEPS, "persistent_barrier": rnn.PERSISTENT_BARRIER, "tiling": rnn.GPU_TILING,
                  "tilings": {k: t.about for k, t in rnn.TILINGS.items()}},
    about="per-step launches against one persistent kernel and its tilings, against torch and cuDNN",
)
