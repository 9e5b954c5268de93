"""One PTX scanner for every check that reads a listing (lesson 06's read before griddepcontrol.wait, lesson
07's release / acquire rules): its instructions, what each does to memory, and the paths between them.

    listing(ptx) -> Listing        the first kernel's instructions (labels resolved), each classified:
                                   Instr.mem is a MemOp (load / store / atomic / fence / barrier) or None
    Listing.reaching(transfer, s0) the states that reach each instruction along every path of its control flow
                                   (a state is anything hashable; transfer(instr, state) -> the next state)
    Listing.in_loop(i)             whether instruction i can run again (a path leads from it back to it)
    first_load_before(ptx, marker) the first global load above the first line holding `marker`

Only what the rules need is modelled: guarded branches go both ways, `bra` / `bra.uni` one way, `ret` /
`exit` nowhere; loads and stores of parameters, shared, local and constant memory are not memory here
(numba's array accesses are generic `ld.f32` or `ld.global.f32`); `fence.proxy` orders nothing a kernel's
loads see. Scope: gpu / sys (wide) against cta / cluster (the block's or cluster's only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Hashable

_NOT_GLOBAL = (".param", ".shared", ".local", ".const")
_SEMANTICS = ("acquire", "release", "acq_rel", "relaxed", "volatile", "sc")
_BARRIERS = ("bar", "barrier")


@dataclass(frozen=True)
class MemOp:
    """kind: load, store, atomic, fence, barrier; sem: weak (a plain access), relaxed (volatile too), acquire,
    release, acq_rel, sc; wide: gpu or system scope (not cta / cluster); dtype: the access's type suffix."""

    kind: str
    sem: str
    wide: bool
    dtype: str


@dataclass(frozen=True)
class Instr:
    index: int          # its line in the listing's body
    text: str
    opcode: str         # e.g. ld.acquire.gpu.global.s32
    guarded: bool       # @%p / @!%p in front
    target: str | None  # a branch's label
    mem: MemOp | None


def _mem(opcode: str) -> MemOp | None:
    parts = opcode.split(".")
    head = parts[0]
    wide = not any(s in parts for s in ("cta", "cluster"))
    dtype = parts[-1] if len(parts) > 1 else ""
    if head in ("ld", "ldu", "st") and not any(k in opcode for k in _NOT_GLOBAL):
        sem = next((s for s in _SEMANTICS if s in parts), "weak")
        return MemOp("store" if head == "st" else "load", "relaxed" if sem == "volatile" else sem, wide, dtype)
    if head in ("atom", "red"):
        return MemOp("atomic", next((s for s in _SEMANTICS if s in parts), "relaxed"), wide, dtype)
    if head == "membar" or (head == "fence" and "proxy" not in parts):
        return MemOp("fence", "sc" if head == "membar" or len(parts) < 2 else parts[1], wide, "")
    if head in _BARRIERS and len(parts) > 1:  # bar.sync, barrier.sync.aligned, bar.warp.sync, bar.red...
        return MemOp("barrier", "", False, "")
    return None


@dataclass(frozen=True)
class Listing:
    instrs: tuple[Instr, ...]
    labels: dict[str, int]   # label -> the index in instrs of the instruction after it

    def successors(self, i: int) -> list[int]:
        ins, nxt = self.instrs[i], [i + 1] if i + 1 < len(self.instrs) else []
        head = ins.opcode.split(".")[0]
        if head in ("ret", "exit", "trap"):
            return [] if not ins.guarded else nxt
        if head == "bra" and ins.target in self.labels:
            jump = [self.labels[ins.target]]
            return jump + nxt if ins.guarded else jump
        return nxt

    def reaching(self, transfer: Callable[[Instr, Hashable], Hashable], initial: Hashable) -> list[set]:
        """The states arriving at each instruction, over every path from the first (a fixed point: states are
        finite wherever transfer's are)."""
        arriving: list[set] = [set() for _ in self.instrs]
        if not self.instrs:
            return arriving
        todo = [(0, initial)]
        while todo:
            i, state = todo.pop()
            if state in arriving[i]:
                continue
            arriving[i].add(state)
            after = transfer(self.instrs[i], state)
            todo += [(j, after) for j in self.successors(i)]
        return arriving

    def in_loop(self, i: int) -> bool:
        seen, todo = set(), list(self.successors(i))
        while todo:
            j = todo.pop()
            if j == i:
                return True
            if j not in seen:
                seen.add(j)
                todo += self.successors(j)
        return False

    def loops(self) -> bool:
        return any(self.in_loop(i) for i, ins in enumerate(self.instrs) if ins.target is not None)


def _body(ptx: str) -> list[str]:
    """The lines of the first kernel (.entry) or, for a fragment without one, every line."""
    lines = [ln.split("//")[0].strip() for ln in ptx.splitlines()]
    start = next((i for i, ln in enumerate(lines) if ln.startswith(".entry") or " .entry " in ln), None)
    if start is None:
        return lines
    body = lines[start:]
    opened = next((i for i, ln in enumerate(body) if ln.startswith("{")), 0)
    depth, end = 0, len(body)
    for i, ln in enumerate(body[opened:], opened):
        depth += ln.count("{") - ln.count("}")
        if depth == 0 and i > opened:
            end = i
            break
    return body[opened + 1:end]


def listing(ptx: str) -> Listing:
    instrs: list[Instr] = []
    labels: dict[str, int] = {}
    for ln in _body(ptx):
        if not ln or ln.startswith((".", "{", "}")):
            continue
        if re.fullmatch(r"[$\w]+:", ln):
            labels[ln[:-1]] = len(instrs)
            continue
        guard = re.match(r"@!?%\w+\s+", ln)
        words = ln[guard.end() if guard else 0:].replace(";", " ").replace(",", " ").split()
        if not words:
            continue
        opcode = words[0]
        target = words[-1] if opcode.split(".")[0] == "bra" and len(words) > 1 else None
        instrs.append(Instr(len(instrs), ln, opcode, guard is not None, target, _mem(opcode)))
    return Listing(tuple(instrs), labels)


def first_load_before(ptx: str, marker: str) -> str | None:
    """The first global load above the first instruction holding `marker` (None: no such load, or no marker).
    Listing order is execution order only where the marker is an asm statement with a memory clobber (the
    compiler moves no load across it), as griddepcontrol.wait is."""
    found = listing(ptx)
    at = next((ins.index for ins in found.instrs if marker in ins.text), None)
    if at is None:
        return None
    return next((ins.text for ins in found.instrs[:at] if ins.mem and ins.mem.kind == "load"), None)
