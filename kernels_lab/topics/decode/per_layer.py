"""The variants of a chain of layers that launch a kernel (or three) per layer, for decode's dense chain and
block_chain's banded one: unfused (the topic's matvec, then decode's bias and GELU kernels), fused (the topic's
layer kernel, bias and GELU in its epilogue), graph (those launches replayed from a CUDA graph) and graph_pdl
(as graph, each layer's weights loaded before griddepcontrol.wait).

A topic brings its Buffers (flat W, bias, x, acts, out and `chain`; `layers`, `hidden`, `geo.tiles`,
`geo.threads`; `kernels` with matvec, layer and layer_pdl) and the launch of one layer's tiles."""

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


@dataclass(frozen=True)
class PerLayer:
    """topic: its name (in warnings and graph names); buffers(inputs, outputs, stream); kernels(size);
    tile(size, kernel, bias): one layer's tiles of `kernel` as a launch, its bytes with or without the bias."""

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
            k = self.kernels(size)
            return Plan((self.tile(size, k.layer_pdl if pdl and BACKEND.runs_griddepcontrol else k.layer, True),)
                        * size.layers)
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
