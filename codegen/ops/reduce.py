"""Reductions (ReduceMean/Sum/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp) and ArgMax/ArgMin,
generated as loops: kept dims outside, reduced dims inside, all bounds constant."""

from __future__ import annotations

import numpy as np

from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node
from edgec.codegen.ops import _par
from edgec.codegen.ops._util import block, cty, strides
from edgec.codegen.registry import register
from edgec.errors import EdgecError

# op -> (init, accumulate(acc, v), finish(acc, n))
REDUCE = {
    "ReduceSum": ("0", "{a} += {v}", "{a}"),
    "ReduceMean": ("0", "{a} += {v}", "{a} / {n}"),
    "ReduceMax": ("-INFINITY", "{a} = ({v} > {a} || {v} != {v}) ? {v} : {a}", "{a}"),
    "ReduceMin": ("INFINITY", "{a} = ({v} < {a} || {v} != {v}) ? {v} : {a}", "{a}"),
    "ReduceProd": ("1", "{a} *= {v}", "{a}"),
    "ReduceL1": ("0", "{a} += fabs((double){v})", "{a}"),
    "ReduceL2": ("0", "{a} += (double){v} * {v}", "sqrt({a})"),
    "ReduceSumSquare": ("0", "{a} += (double){v} * {v}", "{a}"),
    "ReduceLogSum": ("0", "{a} += {v}", "log({a})"),
    "ReduceLogSumExp": ("0", "{a} += exp((double){v})", "log({a})"),
}


def reduce_axes(node: Node) -> list[int] | None:
    """Axes from the attribute (opset < 18) or the second input; None means all (or none, see noop)."""
    x = node.inputs[0]
    r = len(x.shape)
    axes = node.attr("axes")
    t = node.input(1)
    if t is not None:
        if not t.is_const:
            raise EdgecError(f"node {node.name} ({node.op}): axes must be known at compile time")
        axes = [int(v) for v in t.const.reshape(-1)]
    if not axes:
        if node.attr("noop_with_empty_axes", 0):
            return []
        return list(range(r))
    return sorted(a % r for a in axes)


def _loops(x_shape, axes, body_red, pre, post, ctx: EmitContext | None = None):
    """Kept dims k*, reduced dims r*; returns C lines with x index expression `xi`, output index `oi`.
    With ctx, outputs (kept positions) are split among threads when the input is large enough; each
    output is still reduced in one order by one thread."""
    xs = strides(x_shape)
    kept = [i for i in range(len(x_shape)) if i not in axes]
    ks = strides([x_shape[i] for i in kept])
    nout = int(np.prod([x_shape[i] for i in kept], dtype=np.int64))
    if kept and ctx is not None and _par.split(ctx, nout, int(np.prod(x_shape, dtype=np.int64))):
        lines = ["for (size_t q_ = ec_b; q_ < ec_e; q_++)"]
        pre = [f"const long k{j} = (long)(q_ / {s}u % {x_shape[d]}u);" for j, (d, s) in enumerate(zip(kept, ks))] + pre
        pad = ""
    else:
        lines = [f"{'    ' * j}for (long k{j} = 0; k{j} < {x_shape[d]}; k{j}++)" for j, d in enumerate(kept)]
        pad = "    " * len(kept)
    oi = " + ".join(f"k{j} * {s}" for j, s in enumerate(ks)) or "0"
    lines += [pad + "{"] + [pad + "    " + p.replace("@OI", oi) for p in pre]
    red = [f"{pad}    {'    ' * j}for (long r{j} = 0; r{j} < {x_shape[d]}; r{j}++)" for j, d in enumerate(axes)]
    xi = " + ".join([f"k{j} * {xs[d]}" for j, d in enumerate(kept)] + [f"r{j} * {xs[d]}" for j, d in enumerate(axes)]) or "0"
    lines += red + [pad + "    " + "    " * len(axes) + body_red.replace("@XI", xi)]
    lines += [pad + "    " + p.replace("@OI", oi) for p in post] + [pad + "}"]
    return lines


@register(*REDUCE)
def emit_reduce(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    axes = reduce_axes(node)
    xp, yp = ctx.ptr(x), ctx.ptr(y)
    if not axes:
        return f"memcpy({yp}, {xp}, {x.nbytes}u);\n"
    init, acc, fin = REDUCE[node.op]
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    acc_t = "double"
    if x.dtype.kind not in "fc":
        acc = acc.replace(" || {v} != {v}", "")
    body = acc.format(a="acc", v=f"{xp}[@XI]") + ";"
    ctx.note(algo="reduce", macs=x.size)
    return block(_loops(x.shape, axes, body, [f"{acc_t} acc = {init};"],
                        [f"{yp}[@OI] = ({cty(y)})({fin.format(a='acc', n=n)});"], ctx))


@register("ArgMax", "ArgMin")
def emit_argmax(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    axis = node.attr("axis", 0) % len(x.shape)
    last = int(node.attr("select_last_index", 0))
    cmp = ">" if node.op == "ArgMax" else "<"
    cmp = cmp + "=" if last else cmp
    xp, yp = ctx.ptr(x), ctx.ptr(y)
    body = f"{{ {cty(x)} v = {xp}[@XI]; if (best < 0 || v {cmp} bv) {{ bv = v; best = r0; }} }}"
    ctx.note(algo="argreduce")
    return block(_loops(x.shape, [axis], body, [f"{cty(x)} bv = 0;", "long best = -1;"],
                        [f"{yp}[@OI] = (int64_t)best;"], ctx))
