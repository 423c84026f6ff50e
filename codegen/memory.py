"""Arena planning from tensor liveness.

Every activation that is not a graph input/output lives in one arena, sized by its stored bytes
(a channel-blocked tensor's padded channels included). Tensors are grouped
into buffers: a view (Reshape & co) shares its input's buffer, an in-place elementwise op
shares its input's buffer when that input dies there, and a channel Concat's inputs marked by
mark_inplace_concats live inside its output (each written in place, the Concat copies nothing), and a
layer whose fused residual dies there may write over it (mark_residual_outputs).
Each buffer lives from the layer that first writes it to the layer that last reads it; buffers
are placed largest first at the lowest offset that overlaps no buffer alive at the same time.
Layer scratch lives one layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgec.codegen import registry
from edgec.codegen.ir import Graph, Tensor

ALIGN = 64
# a float32 layer whose fused residual (added before the activation) dies there: RES_CANDIDATE when the output
# may take the residual's buffer, RES_TAKEN once its emitter chose a kernel that accumulates onto the output
RES_ATTR = "ec_residual_inplace"
RES_CANDIDATE, RES_TAKEN = 1, 2


@dataclass
class Buffer:
    size: int
    start: int
    end: int
    members: list = field(default_factory=list)  # tensor names or "scratch:<id>"
    offset: int = -1
    where: tuple = ("arena", 0)                 # ("arena", off) | ("in", k) | ("out", k)
    parent: "Buffer | None" = None              # a Concat input's buffer lives inside its output's
    rel: int = 0                                # ... at this byte offset


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
    def __init__(self, g: Graph, residual_joins=(RES_TAKEN,)):
        self.g = g
        self.residual_joins = residual_joins  # RES_ATTR values whose output joins the residual's buffer
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
            if t is node.outputs[0] and node.attr(RES_ATTR) in self.residual_joins:
                r = node.epilogue.residual
                if not self._residual_ok(i, node, t):
                    raise AssertionError(f"internal: {node.name} cannot write over its residual {r.name}")
                self._join(t, self.group[id(r)])
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

    def nest_concats(self) -> None:
        """Put the buffers of the inputs mark_inplace_concats chose inside their Concat's output buffer
        (node order: an inner Concat's buffer has its whole lifetime before an outer one takes it in)."""
        for n in self.g.nodes:
            flags = n.attr(INPLACE_ATTR)
            if n.op != "Concat" or not flags:
                continue
            yb, off = self.group[id(n.outputs[0])], 0
            for x, nested in zip(n.inputs, flags):
                xb = self.group[id(x)]
                if nested:
                    if xb.where[0] != "arena" or xb.parent is not None or xb is yb or xb.size > yb.size - off:
                        raise AssertionError(f"internal: Concat {n.name} input {x.name} cannot be nested")
                    xb.parent, xb.rel = yb, off
                    yb.start, yb.end = min(yb.start, xb.start), max(yb.end, xb.end)
                off += x.nbytes

    def _residual_ok(self, i, node, t) -> bool:
        r = node.epilogue.residual
        b = self.group.get(id(r)) if r is not None and not r.is_const else None
        return (b is not None and node.epilogue.residual_before_act and t.dtype == r.dtype == np.float32
                and not any(x is r for x in node.inputs)  # read as the conv's input too: not overwritable
                and self._inplace_ok(i, node, r, t, b))

    def _inplace_ok(self, i, node, src, t, b) -> bool:
        if (b.where[0] != "arena" or b.end != i or t.nbytes != src.nbytes or t.dtype.itemsize != src.dtype.itemsize
                or t.block != src.block):
            return False
        return all(o is src or self.group.get(id(o)) is not b for o in node.operands())


INPLACE_ATTR = "ec_inplace_inputs"  # per input of a Concat: written straight into the output


def mark_residual_outputs(g: Graph) -> None:
    """Mark the layers that may write their output over their fused residual (before emission: the emitter takes
    the offer where its kernel can accumulate onto the output, codegen/ops/conv.py). The layer then reads and writes
    one tensor in place instead of reading the residual and write-allocating a fresh output, which costs a read of
    every output line from L3 (ResNet-50's 56x56 1x1 layers with a residual: 1.2-1.5x onnxruntime's time, whose
    NCHWc conv sums into the residual's buffer). The residual must die at the layer, live in the arena, and have
    the output's size, type and layout; the output must not be a graph output or written inside a Concat's."""
    nested = set()
    for n in g.nodes:
        for x, flag in zip(n.inputs, n.attr(INPLACE_ATTR) or []):
            if flag:
                nested.add(id(x))
    p = _Planner(g, residual_joins=(RES_CANDIDATE, RES_TAKEN))
    for i, n in enumerate(g.nodes):
        n.attrs.pop(RES_ATTR, None)
        y = n.outputs[0] if n.outputs else None
        if (n.op == "Conv" and y is not None and n.epilogue.residual is not None and id(y) not in nested
                and id(y) not in p.group and p._residual_ok(i, n, y)):
            n.attrs[RES_ATTR] = RES_CANDIDATE
        p.visit(i, n)


def mark_inplace_concats(g: Graph) -> None:
    """Choose the channel Concat inputs that are written straight into the Concat's output: a Concat whose
    rows are whole tensors (every dimension before the axis 1), not a graph output; an input that an ordinary
    layer (not a view) writes, that nothing else reads, at a 64-byte aligned offset (kernels may assume aligned
    tensors). The emitter copies only the others. Channel-blocked (NCHWc) Concats too: with one image and every
    input but the last whole blocks, the output's blocks are its inputs' blocks one after the other, so an input
    lives at the sum of the stored sizes before it (SqueezeNet's fire modules: the copies were 7% of its
    blocked time)."""
    uses: dict[int, int] = {}
    producer: dict[int, object] = {}
    for n in g.nodes:
        for t in n.operands():
            uses[id(t)] = uses.get(id(t), 0) + 1
        for t in n.outputs:
            if t is not None:
                producer[id(t)] = n
    boundary = {id(t) for t in list(g.inputs) + list(g.outputs)}
    for n in g.nodes:
        n.attrs.pop(INPLACE_ATTR, None)
        y = n.outputs[0] if n.outputs else None
        if n.op != "Concat" or y is None or id(y) in boundary or not y.shape:
            continue
        axis = n.attr("axis", 0) % len(y.shape)
        if any(d != 1 for d in y.shape[:axis]) or any(x is None for x in n.inputs):
            continue
        if y.block and (axis != 1 or any(x.block != y.block for x in n.inputs)
                        or any(x.shape[1] % y.block for x in n.inputs[:-1])):
            continue
        flags, off, seen = [], 0, set()
        for x in n.inputs:
            prod = producer.get(id(x))
            spec = registry.get(prod.op) if prod is not None else None
            flags.append(not x.is_const and id(x) not in boundary and x.block == y.block and x.dtype == y.dtype
                         and uses.get(id(x)) == 1 and id(x) not in seen and prod is not None
                         and spec is not None and not spec.view and off % ALIGN == 0)
            seen.add(id(x))
            off += x.nbytes
        if any(flags):
            n.attrs[INPLACE_ATTR] = flags


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
    p.nest_concats()
    arena = [b for b in p.buffers if b.where[0] == "arena" and b.parent is None]
    _place(arena)

    def place_nested(b: Buffer) -> int:
        if b.parent is not None and b.offset < 0:
            b.offset = place_nested(b.parent) + b.rel
        return b.offset
    for b in p.buffers:
        if b.where[0] == "arena":
            b.where = ("arena", place_nested(b))
    arena = [b for b in p.buffers if b.where[0] == "arena" and b.parent is None]
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
