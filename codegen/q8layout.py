"""Int8 layout pass: the blocked layout between convolutions, on targets whose GEMMs have _c4 forms.

The blocked int8 layout (NCHW4c with a 16-pixel pitch, runtime_c/q8-gemm/q8-gemm.h) is exactly the packed input of a
1x1 convolution: a conv that reads it skips its packing (ResNet-50's int8 build spent 3-5% of an inference packing
1x1 inputs and copying 3x3 inputs into their padded form, more on two threads, where a thread packs bytes the other
wrote). A u8 activation is blocked when a QLinearConv writes it through a GEMM with a _c4 form and every reader reads
it in that layout: QLinearConvs whose input it is (1x1 without padding, or kxk on the channel-lane GEMM:
quant.blocked_io), and convs with a fused residual Add over it, which runs on the stored bytes, so such a conv's
output and its residual are blocked together or not at all. No reorders are inserted: a tensor any other node reads
(pools, tables, concats, dequantization, graph outputs) stays NCHW, and so do the tensors of convs a tuning record
covers (their variant was measured in NCHW, and a forced one may not read the layout). layout=nchw (EDGEC_LAYOUT)
turns it off.
"""

from __future__ import annotations

from edgec.codegen.ir import Graph

Q8_BLOCK = 4


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
    users, outs = g.consumers(), {id(t) for t in g.outputs}

    def reads(u, t) -> bool:
        if u.op != "QLinearConv":
            return False
        if u.epilogue.residual is t:  # the fused Add's other operand: constrained below
            return u.inputs[0] is not t
        return u.inputs[0] is t and io[id(u)][0] and all(v is not t for v in u.inputs[1:])

    chosen = set()
    for n in convs:
        y = n.outputs[0]
        if io[id(n)][1] and id(y) not in outs and len(y.shape) == 4 and not y.block and users.get(id(y)) and \
                all(reads(u, y) for u in users[id(y)]):
            chosen.add(id(y))
    changed = True
    while changed:  # a conv with a fused Add: its output and the residual in one layout
        changed = False
        for n in convs:
            r = n.epilogue.residual
            if r is not None and (id(r) in chosen) != (id(n.outputs[0]) in chosen):
                chosen.discard(id(r))
                chosen.discard(id(n.outputs[0]))
                changed = True
    for n in convs:
        if id(n.outputs[0]) in chosen:
            n.outputs[0].block = Q8_BLOCK
    return g
