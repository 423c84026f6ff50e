"""Normalisations: LayerNormalization, InstanceNormalization, LRN, BatchNormalization left standalone
(inference form, folded to one scale and shift per channel at compile time)."""

from __future__ import annotations

import numpy as np

from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node
from edgec.codegen.ops import _par
from edgec.codegen.ops._util import block, epilogue_lines
from edgec.codegen.registry import register
from edgec.errors import EdgecError

HEADER = "f32-norm/f32-norm-scalar.h"


def _f32(node: Node):
    if node.inputs[0].dtype != np.float32:
        raise EdgecError(f"node {node.name} ({node.op}): only float32 is supported")


@register("LayerNormalization", inplace=True)
def emit_layernorm(node: Node, ctx: EmitContext) -> str:
    _f32(node)
    x, y = node.inputs[0], node.outputs[0]
    axis = node.attr("axis", -1) % len(x.shape)
    n = int(np.prod(x.shape[axis:], dtype=np.int64))
    rows = x.size // max(n, 1)
    scale = ctx.weight(f"ln:{node.name}:s", np.broadcast_to(_val(node, 1, 1.0), x.shape[axis:]).astype(np.float32))
    bias = "NULL"
    if node.input(2) is not None:
        bias = ctx.weight(f"ln:{node.name}:b", np.broadcast_to(_val(node, 2, 0.0), x.shape[axis:]).astype(np.float32))
    ctx.require(HEADER)
    ctx.note(algo="layernorm")
    eps = float(node.attr('epsilon', 1e-5))
    if _par.split(ctx, rows, 2 * x.size):  # rows are independent
        m, v = (_opt(ctx, node, i) for i in (1, 2))
        m, v = (p if p == "NULL" else f"{p} + ec_b" for p in (m, v))
        return (f"ec_f32_layernorm_scalar(ec_e - ec_b, {n}u, {eps!r}f, {ctx.ptr(x)} + ec_b * {n}u, {scale}, {bias}, "
                f"{ctx.ptr(y)} + ec_b * {n}u, {m}, {v});\n")
    return (f"ec_f32_layernorm_scalar({rows}u, {n}u, {eps!r}f, {ctx.ptr(x)}, "
            f"{scale}, {bias}, {ctx.ptr(y)}, {_opt(ctx, node, 1)}, {_opt(ctx, node, 2)});\n")


def _opt(ctx: EmitContext, node: Node, i: int) -> str:
    t = node.outputs[i] if i < len(node.outputs) else None
    return "NULL" if t is None else ctx.ptr(t)


def _val(node: Node, i: int, default: float) -> np.ndarray:
    t = node.input(i)
    if t is None:
        return np.array(default, np.float32)
    if not t.is_const:
        raise EdgecError(f"node {node.name} ({node.op}): scale/bias must be constants")
    return t.const


@register("InstanceNormalization", inplace=True)
def emit_instnorm(node: Node, ctx: EmitContext) -> str:
    _f32(node)
    x, y = node.inputs[0], node.outputs[0]
    planes, c = x.shape[0] * x.shape[1], x.shape[1]
    hw = x.size // max(planes, 1)
    s = ctx.weight(f"in:{node.name}:s", _val(node, 1, 1.0).astype(np.float32).reshape(-1))
    b = ctx.weight(f"in:{node.name}:b", _val(node, 2, 0.0).astype(np.float32).reshape(-1))
    ctx.require(HEADER)
    ctx.note(algo="instnorm")
    eps = float(node.attr('epsilon', 1e-5))
    if _par.split(ctx, planes, 2 * x.size):
        return f"ec_f32_instnorm_range(ec_b, ec_e, {c}u, {hw}u, {eps!r}f, {ctx.ptr(x)}, {s}, {b}, {ctx.ptr(y)});\n"
    return (f"ec_f32_instnorm_scalar({planes}u, {c}u, {hw}u, {eps!r}f, {ctx.ptr(x)}, "
            f"{s}, {b}, {ctx.ptr(y)});\n")


@register("LRN")
def emit_lrn(node: Node, ctx: EmitContext) -> str:
    _f32(node)
    x, y = node.inputs[0], node.outputs[0]
    hw = x.size // max(x.shape[0] * x.shape[1], 1)
    a, b, k = (float(node.attr(n, d)) for n, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    ctx.require(HEADER)
    ctx.note(algo="lrn", macs=x.size * int(node.attr("size")))
    return (f"ec_f32_lrn_scalar({x.shape[0]}u, {x.shape[1]}, {hw}u, {int(node.attr('size'))}, {a!r}f, {b!r}f, "
            f"{k!r}f, {ctx.ptr(x)}, {ctx.ptr(y)});\n")


@register("BatchNormalization", inplace=True, epilogue=True)
def emit_batchnorm(node: Node, ctx: EmitContext) -> str:
    """y = x * k[c] + t[c]; k, t folded from scale, bias, mean, var at compile time."""
    _f32(node)
    if node.attr("training_mode", 0):
        raise EdgecError(f"node {node.name} (BatchNormalization): training mode is not supported")
    x, y = node.inputs[0], node.outputs[0]
    gamma, beta, mean, var = (_val(node, i, 0.0).astype(np.float64) for i in range(1, 5))
    k = gamma / np.sqrt(var + float(node.attr("epsilon", 1e-5)))
    t = beta - mean * k
    c = x.shape[1] if len(x.shape) > 1 else 1
    inner = x.size // max(x.shape[0] * c, 1)
    kp = ctx.weight(f"bn:{node.name}:k", k.astype(np.float32))
    tp = ctx.weight(f"bn:{node.name}:t", t.astype(np.float32))
    xp, yp = ctx.ptr(x), ctx.ptr(y)
    ctx.note(algo="batchnorm")
    planes = x.size // max(inner, 1)
    if _par.split(ctx, planes, 2 * x.size):  # planes (n, c) are independent
        head = ["for (size_t p = ec_b; p < ec_e; p++)", f"    for (size_t i = 0; i < {inner}u; i++) {{",
                f"        const size_t c = p % {c}u, o = p * {inner}u + i;"]
    else:
        head = [f"for (size_t n = 0; n < {x.shape[0]}u; n++)", f"    for (size_t c = 0; c < {c}u; c++)",
                f"        for (size_t i = 0; i < {inner}u; i++) {{",
                f"            size_t o = (n * {c}u + c) * {inner}u + i;"]
    ind = " " * (len(head[-1]) - len(head[-1].lstrip()))
    lines = head + [ind + f"float v = {xp}[o] * {kp}[c] + {tp}[c];"]
    lines += [ind + ln for ln in epilogue_lines(node, ctx, "v", "o")]
    lines += [ind + f"{yp}[o] = v;", ind[:-4] + "}"]
    return block(lines)
