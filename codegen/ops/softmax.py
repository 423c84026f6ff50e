"""Softmax / LogSoftmax along one axis (opset >= 13 semantics) via runtime_c/f32-softmax.

SIMD targets call the vector kernel of their ISA (f32-softmax-<isa>.c: vector max, exp + sum and
scale, along rows when the axis is innermost, else across inner columns); the generic target uses
the scalar reference header."""

from __future__ import annotations

import numpy as np

from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node
from edgec.codegen.ops import _par
from edgec.codegen.ops._util import block
from edgec.codegen.ops.elementwise import vector_isa
from edgec.codegen.registry import register
from edgec.errors import EdgecError


@register("Softmax", "LogSoftmax", inplace=True)
def emit_softmax(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    if x.dtype.kind != "f" or x.dtype.name in ("float16", "bfloat16"):
        raise EdgecError(f"node {node.name} ({node.op}): only float32/float64 are supported")
    r = max(len(x.shape), 1)
    axis = node.attr("axis", -1) % r
    shape = x.shape or (1,)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    if x.dtype != np.float32:
        return _double(node, ctx, outer, shape[axis], inner)
    isa = vector_isa(ctx.target)
    fn = f"f32_softmax__{isa}" if isa is not None else "ec_f32_softmax_scalar"
    if isa is not None:
        ctx.require("f32-softmax/f32-softmax.h", f"f32-softmax/f32-softmax-{isa}.c")
        ctx.note(algo=f"softmax-{isa}")
    else:
        ctx.require("f32-softmax/f32-softmax-scalar.h")
        ctx.note(algo="softmax")
    log, per = int(node.op == 'LogSoftmax'), shape[axis] * inner
    # exp per element: a few copies' worth of work; outer slices are independent
    if _par.split(ctx, outer, 4 * x.size):
        return f"{fn}(ec_e - ec_b, {shape[axis]}u, {inner}u, {log}, {ctx.ptr(x)} + ec_b * {per}u, {ctx.ptr(y)} + ec_b * {per}u);\n"
    return f"{fn}({outer}u, {shape[axis]}u, {inner}u, {log}, {ctx.ptr(x)}, {ctx.ptr(y)});\n"


def _double(node: Node, ctx: EmitContext, outer: int, n: int, inner: int) -> str:
    """float64 softmax as a generated loop (rare: attention graphs that upcast)."""
    xp, yp = ctx.ptr(node.inputs[0]), ctx.ptr(node.outputs[0])
    log = node.op == "LogSoftmax"
    fin = f"{yp}[b + i * {inner}u] = {xp}[b + i * {inner}u] - m - log(s);" if log else \
        f"{yp}[b + i * {inner}u] = exp({xp}[b + i * {inner}u] - m) / s;"
    return block([f"for (size_t o = 0; o < {outer}u; o++)", f"    for (size_t j = 0; j < {inner}u; j++) {{",
                  f"        size_t b = o * {n * inner}u + j;", f"        double m = {xp}[b], s = 0.0;",
                  f"        for (size_t i = 1; i < {n}u; i++) m = {xp}[b + i * {inner}u] > m ? {xp}[b + i * {inner}u] : m;",
                  f"        for (size_t i = 0; i < {n}u; i++) s += exp({xp}[b + i * {inner}u] - m);",
                  f"        for (size_t i = 0; i < {n}u; i++) {fin}", "    }"])
