"""Arena planning from tensor liveness.

Every activation that is not a graph input/output lives in one arena, sized by its stored bytes
(a channel-blocked tensor's padded channels included). Tensors are grouped
into buffers: a view (Reshape & co) shares its input's buffer, an in-place elementwise op
shares its input's buffer when that input dies there. Each buffer lives from the layer that
first writes it to the layer that last reads it; buffers are placed largest first at the
lowest offset that overlaps no buffer alive at the same time. Layer scratch lives one layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgec.codegen import registry
from edgec.codegen.ir import Graph, Tensor

ALIGN = 64


@dataclass
class Buffer:
    size: int
    start: int
    end: int
    members: list = field(default_factory=list)  # tensor names or "scratch:<id>"
    offset: int = -1
    where: tuple = ("arena", 0)                 # ("arena", off) | ("in", k) | ("out", k)


@dataclass
class Plan:
    buffers: list[Buffer]
    location: dict[int, tuple]       # id(tensor) -> ("arena", off) | ("in", k) | ("out", k)
    scratch_offsets: list[int]
    arena_bytes: int
    naive_bytes: int


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


class _Planner:
    def __init__(self, g: Graph):
        self.g = g
        self.group: dict[int, Buffer] = {}
        self.buffers: list[Buffer] = []
        self.last_use: dict[int, int] = {}
        for i, n in enumerate(g.nodes):
            for t in n.operands():
                self.last_use[id(t)] = i
        end = len(g.nodes)
        for k, t in enumerate(g.inputs):
            self._new(t, -1, ("in", k))
        for k, t in enumerate(g.outputs):
            if id(t) not in self.group:
                self._new(t, -1, ("out", k)).end = end

    def _new(self, t: Tensor, start: int, where=("arena", 0)) -> Buffer:
        b = Buffer(_align(t.nbytes), start, max(start, self.last_use.get(id(t), start)), [t.name], where=where)
        self.buffers.append(b)
        self.group[id(t)] = b
        return b

    def _join(self, t: Tensor, b: Buffer) -> None:
        b.members.append(t.name)
        b.size = max(b.size, _align(t.nbytes))
        b.end = max(b.end, self.last_use.get(id(t), b.end))
        self.group[id(t)] = b

    def visit(self, i: int, node) -> None:
        spec = registry.get(node.op)
        for t in node.outputs:
            if t is None or id(t) in self.group and self.group[id(t)].where[0] == "out":
                continue
            src = node.inputs[0] if node.inputs else None
            if t is node.outputs[0] and src is not None and not src.is_const and spec is not None:
                b = self.group.get(id(src))
                if spec.view and t.nbytes == src.nbytes and t.block == src.block:
                    self._join(t, b)
                    continue
                if spec.inplace and self._inplace_ok(i, node, src, t, b):
                    self._join(t, b)
                    continue
            self._new(t, i)

    def _inplace_ok(self, i, node, src, t, b) -> bool:
        if (b.where[0] != "arena" or b.end != i or t.nbytes != src.nbytes or t.dtype.itemsize != src.dtype.itemsize
                or t.block != src.block):
            return False
        return all(o is src or self.group.get(id(o)) is not b for o in node.operands())


def plan_memory(g: Graph, layer_scratch: list[list[int]] | None = None, scratch_sizes: list[int] | None = None) -> Plan:
    """Plan the arena; layer_scratch[i] lists the scratch ids of layer i, sized by scratch_sizes."""
    p = _Planner(g)
    for i, n in enumerate(g.nodes):
        p.visit(i, n)
    scratch_bufs = []
    for i, ids in enumerate(layer_scratch or []):
        for sid in ids:
            b = Buffer(_align(scratch_sizes[sid]), i, i, [f"scratch:{sid}"])
            scratch_bufs.append((sid, b))
            p.buffers.append(b)
    arena = [b for b in p.buffers if b.where[0] == "arena"]
    _place(arena)
    for b in arena:
        b.where = ("arena", b.offset)
    location = {k: b.where for k, b in p.group.items()}
    offsets = [0] * len(scratch_sizes or [])
    for sid, b in scratch_bufs:
        offsets[sid] = b.offset
    naive = sum(_align(t.nbytes) for n in g.nodes for t in n.outputs
                if t is not None and location.get(id(t), ("arena",))[0] == "arena")
    naive += sum(b.size for _, b in scratch_bufs)
    total = max((b.offset + b.size for b in arena), default=0)
    return Plan(p.buffers, location, offsets, total, naive)


def _place(bufs: list[Buffer]) -> None:
    """Largest first, lowest free offset among buffers alive at the same time."""
    placed: list[Buffer] = []
    for b in sorted(bufs, key=lambda b: (-b.size, b.start, b.end)):
        busy = sorted((o.offset, o.offset + o.size) for o in placed if o.start <= b.end and b.start <= o.end)
        off = 0
        for lo, hi in busy:
            if off + b.size <= lo:
                break
            off = max(off, hi)
        b.offset = off
        placed.append(b)
