"""Int8 layout pass: the blocked layout between convolutions, on targets whose GEMMs have _c4 forms.

The blocked int8 layout (NCHW4c with a 16-pixel pitch, runtime_c/q8-gemm/q8-gemm.h) is exactly the packed input of a
1x1 convolution: a conv that reads it skips its packing (ResNet-50's int8 build spent 3-5% of an inference packing
1x1 inputs and copying 3x3 inputs into their padded form, more on two threads, where a thread packs bytes the other
wrote). Tensors that must share a layout form a group: a one-table lookup's input and output (EcQLut: bytewise), a
MaxPool's (q8-maxpool-c4.c: the window over 4-channel pixels), a one-image channel Concat's inputs and output (their
planes follow one another: in place as in NCHW, codegen/memory.py), a conv's output and its fused residual (the Add
runs on the stored bytes). A group is blocked when each of its tensors is a 4-D int8 activation with a writer that
can write it blocked (a QLinearConv through a GEMM with a _c4 form, quant.blocked_io, or the group's lookup, pool or
Concat) and only readers that can read it so (QLinearConvs whose input it is: 1x1 without padding, or kxk on the
channel-lane GEMM; the group's lookups, pools, Concats and Adds). No reorders are inserted: a tensor any other node
reads (average pools, dequantization, per-channel tables, graph outputs) keeps its group NCHW, and so do the tensors
of convs a tuning record covers (their variant was measured in NCHW, and a forced one may not read the layout).
layout=nchw (EDGEC_LAYOUT) turns it off.
"""

from __future__ import annotations

from edgec.codegen.ir import Graph, Node, Tensor

Q8_BLOCK = 4


def _lut(n: Node) -> bool:
    return n.op == "EcQLut" and n.inputs[1] is not None and n.inputs[1].size == 256


def _pool(n: Node) -> bool:
    x = n.inputs[0]
    return n.op == "EcQMaxPool" and x is not None and len(x.shape) == 4 and x.shape[1] % Q8_BLOCK == 0


def _concat(n: Node) -> bool:
    y, xs = n.outputs[0], n.inputs
    return (n.op == "Concat" and len(y.shape) == 4 and y.shape[0] == 1 and n.attr("axis", 0) % 4 == 1 and
            all(x is not None and len(x.shape) == 4 and x.shape[1] % Q8_BLOCK == 0 for x in xs) and
            len({id(x) for x in xs}) == len(xs))


def assign(g: Graph, target, mode: str = "auto") -> Graph:
    """Mark the int8 activations to store blocked (Tensor.block = 4); the emitters read the marks."""
    from edgec.codegen.layout import _tuned
    from edgec.codegen.ops.quant import blocked_io
    if mode == "nchw":
        return g
    convs = [n for n in g.nodes if n.op == "QLinearConv"]
    io = {id(n): (False, False) if _tuned(n) else blocked_io(n, target) for n in convs}
    if not any(w for _, w in io.values()):
        return g
    users, prod = g.consumers(), g.producers()
    boundary = {id(t) for t in list(g.inputs) + list(g.outputs)}
    parent: dict[int, int] = {}

    def find(t: Tensor) -> int:
        k = id(t)
        while parent.get(k, k) != k:
            k = parent[k]
        return k

    def union(a: Tensor, b: Tensor) -> None:
        parent[find(a)] = find(b)

    for n in g.nodes:
        if _lut(n) or _pool(n):
            union(n.inputs[0], n.outputs[0])
        elif _concat(n):
            for x in n.inputs:
                union(x, n.outputs[0])
        elif n.op == "QLinearConv" and n.epilogue.residual is not None:
            union(n.outputs[0], n.epilogue.residual)

    def writes(t: Tensor) -> bool:
        p = prod.get(id(t))
        return p is not None and ((p.op == "QLinearConv" and io[id(p)][1]) or _lut(p) or _pool(p) or _concat(p))

    def reads(u: Node, t: Tensor) -> bool:
        if u.op == "QLinearConv":
            if u.epilogue.residual is t:  # the fused Add's other operand (grouped with the output)
                return u.inputs[0] is not t
            return u.inputs[0] is t and io[id(u)][0] and all(v is not t for v in u.inputs[1:])
        return ((_lut(u) or _pool(u)) and u.inputs[0] is t) or _concat(u)

    tensors = {id(t): t for n in g.nodes for t in n.outputs if t is not None}
    members: dict[int, list[Tensor]] = {}
    for t in tensors.values():
        members.setdefault(find(t), []).append(t)
    for n in g.nodes:  # grouped tensors nothing produces (graph inputs) join their groups, which they veto
        for t in n.operands():
            if id(t) not in tensors and id(t) in parent:
                members.setdefault(find(t), []).append(t)
    for group in members.values():
        if all(id(t) not in boundary and not t.is_const and not t.block and len(t.shape) == 4 and
               t.dtype.itemsize == 1 and writes(t) and users.get(id(t)) and all(reads(u, t) for u in users[id(t)])
               for t in group):
            for t in group:
                t.block = Q8_BLOCK
    return g
