"""The host's side of a kernel's bounded waits: one word in mapped memory where a block that gave up waiting
says so, instead of hanging. 0 while every wait was met; a block that gives up stores k + 1, k naming where
(rnn: the step whose barrier timed out; softmax split: the row; decode and block_chain: the layer waited for).
The host reads it with no copy and no sync, and a launcher refuses to launch again once it is set (that
launch's output is wrong): rnn, softmax split, decode's and block_chain's megakernels."""

from __future__ import annotations

import numpy as np

from .backend import BACKEND
from .runtime import cuda


class GiveUpWord:
    """`word`: the kernel's argument; at(): k where a block of an earlier launch gave up, or None."""

    def __init__(self) -> None:
        self.word = cuda.mapped_array(1, np.int32)
        self._host = BACKEND.host_view(self.word)
        self._host[0] = 0

    def at(self) -> int | None:
        stored = int(self._host[0])
        return stored - 1 if stored else None
