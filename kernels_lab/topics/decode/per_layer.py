"""The variants of a chain of layers that launch a kernel (or three) per layer, written once for decode's dense
chain and block_chain's banded one: their plans and their launches.

    unfused     per layer: the topic's matvec (z = W_l x_l to memory), decode's bias kernel, decode's GELU kernel
    fused       per layer: the topic's layer kernel (bias and GELU in its epilogue), in stream order
    graph       the fused launches captured once in a CUDA graph and replayed
    graph_pdl   as graph, each layer launched with PDL (its weights load before griddepcontrol.wait)

A topic brings its Buffers (its checked arrays as flat vectors: W, bias, x, acts, out and `chain`; `layers`,
`hidden`, `geo.tiles`, `geo.threads`, and `kernels` with matvec, layer and layer_pdl) and its tile's launch.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ...backend import BACKEND, in_order
from ...core import KernelLaunch, Plan, Size, kernel_name
from ...runtime import cuda
from . import kernels as dk

F32 = 4


def layer_kernel(kernels: Any, pdl: bool) -> Any:
    """The fused layer kernel: its PDL form where graph_pdl asks and the back-end runs griddepcontrol."""
    return kernels.layer_pdl if pdl and BACKEND.runs_griddepcontrol else kernels.layer


@dataclass(frozen=True)
class PerLayer:
    """One topic's per-layer variants. topic: its name (in warnings and graph names); buffers(inputs, outputs,
    stream): its Buffers; kernels(size): its kernels for that size; tile(size, kernel, bias): the launch of one
    layer's tiles of `kernel`, its bytes with or without the bias."""

    topic: str
    buffers: Callable[..., Any]
    kernels: Callable[[Size], Any]
    tile: Callable[[Size, Any, bool], KernelLaunch]

    def plan_unfused(self, size: Size) -> Plan:
        matvec = self.tile(size, self.kernels(size).matvec, False)
        z = matvec.bytes_written // F32  # the activations the matvec writes, then the bias and GELU kernels
        grid = -(-z // dk.EW_BLOCK)
        return Plan((matvec,
                     KernelLaunch(kernel_name(dk.decode_bias), grid, dk.EW_BLOCK, 2 * F32 * z, F32 * z),
                     KernelLaunch(kernel_name(dk.decode_gelu), grid, dk.EW_BLOCK, F32 * z, F32 * z)) * size.layers)

    def plan_layers(self, pdl: bool) -> Callable[[Size], Plan]:
        def plan(size: Size) -> Plan:
            return Plan((self.tile(size, layer_kernel(self.kernels(size), pdl), True),) * size.layers)
        return plan

    def bind_unfused(self, inputs, outputs, stream=0):
        buf = self.buffers(inputs, outputs, stream)
        z = cuda.device_array(buf.out.size, np.float32, stream=stream)  # W x: through memory
        grid = -(-z.size // dk.EW_BLOCK)
        launches = []
        for l in range(buf.layers):
            last = l == buf.layers - 1
            launches += [BACKEND.launcher(buf.kernels.matvec, buf.geo.tiles, buf.geo.threads,
                                          (buf.W, buf.x, buf.acts, l, z), stream),
                         BACKEND.launcher(dk.decode_bias, grid, dk.EW_BLOCK, (z, buf.bias, l, buf.hidden), stream),
                         BACKEND.launcher(dk.decode_gelu, grid, dk.EW_BLOCK,
                                          (z, buf.out if last else buf.acts, 0 if last else l * z.size), stream)]
        return in_order(launches)

    def _layer_launches(self, inputs, outputs, stream, pdl: bool) -> list[Callable[..., None]]:
        buf = self.buffers(inputs, outputs, stream)
        if pdl and not BACKEND.runs_griddepcontrol:
            warnings.warn(f"{self.topic} graph_pdl: {BACKEND.pdl()[1]}; replaying plain launches instead",
                          stacklevel=3)
            pdl = False
        if not pdl:
            return [BACKEND.launcher(buf.kernels.layer, buf.geo.tiles, buf.geo.threads, (*buf.chain, l), stream)
                    for l in range(buf.layers)]
        # every layer waits before it reads x_l; all but the last trigger, so that whatever follows the
        # chain in the stream never starts before it has finished
        return [BACKEND.launcher(buf.kernels.layer_pdl, buf.geo.tiles, buf.geo.threads,
                                 (*buf.chain, l, np.int32(l < buf.layers - 1)), stream, pdl=True)
                for l in range(buf.layers)]

    def bind_fused(self, inputs, outputs, stream=0):
        return in_order(self._layer_launches(inputs, outputs, stream, pdl=False))

    def bind_graph(self, inputs, outputs, stream=0):
        return BACKEND.graph(self._layer_launches(inputs, outputs, stream, pdl=False), stream, f"{self.topic} graph")

    def bind_graph_pdl(self, inputs, outputs, stream=0):
        return BACKEND.graph(self._layer_launches(inputs, outputs, stream, pdl=True), stream,
                             f"{self.topic} graph_pdl")
