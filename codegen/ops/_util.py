"""Helpers shared by the op emitters: activation expressions, epilogues, broadcast loops."""

from __future__ import annotations

import math

import numpy as np

from edgec.codegen.emit import EmitContext, c_type
from edgec.codegen.ir import Node, Tensor


def flt(x: float) -> str:
    """A float literal C accepts for any finite or infinite value."""
    x = float(x)
    if math.isnan(x):
        return "NAN"
    if math.isinf(x):
        return "INFINITY" if x > 0 else "-INFINITY"
    return repr(x) + "f" if "e" in repr(x) or "." in repr(x) else repr(x) + ".0f"


def act_expr(act: str | None, p: dict, v: str) -> str:
    """C expression applying a fused activation to float variable v."""
    if act is None:
        return v
    if act == "relu":
        return f"({v} > 0.0f ? {v} : 0.0f)"
    if act == "clip":
        lo, hi = flt(p.get("min", -3.4e38)), flt(p.get("max", 3.4e38))
        # min(max(v, lo), hi): when lo > hi every value becomes hi, as ONNX says
        return f"(({v} < {lo} ? {lo} : {v}) > {hi} ? {hi} : ({v} < {lo} ? {lo} : {v}))"
    if act == "leaky_relu":
        return f"({v} >= 0.0f ? {v} : {flt(p.get('alpha', 0.01))} * {v})"
    if act == "sigmoid":
        return f"(1.0f / (1.0f + expf(-{v})))"
    if act == "hard_sigmoid":
        a, b = flt(p.get("alpha", 0.2)), flt(p.get("beta", 0.5))
        return f"fmaxf(0.0f, fminf(1.0f, {a} * {v} + {b}))"
    if act == "hard_swish":
        return f"({v} * fmaxf(0.0f, fminf(1.0f, {v} * (1.0f / 6.0f) + 0.5f)))"
    if act == "silu":
        return f"({v} / (1.0f + expf(-{v})))"
    if act == "tanh":
        return f"tanhf({v})"
    if act == "gelu":
        return f"(0.5f * {v} * (1.0f + erff({v} * 0.70710678118654752f)))"
    raise ValueError(f"unknown activation {act}")


def epilogue_lines(node: Node, ctx: EmitContext, v: str, idx: str) -> list[str]:
    """Statements updating float v (at flat output index idx) with node's fused residual/activation."""
    ep = node.epilogue
    lines = []
    res = f"{ctx.ptr(ep.residual)}[{idx}]" if ep.residual is not None else None
    if res and ep.residual_before_act:
        lines.append(f"{v} += {res};")
    if ep.act:
        lines.append(f"{v} = {act_expr(ep.act, ep.act_params, v)};")
    if res and not ep.residual_before_act:
        lines.append(f"{v} += {res};")
    return lines


def strides(shape) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def bcast_strides(in_shape, out_shape) -> list[int]:
    """Element strides of an input broadcast to out_shape (0 on broadcast dims)."""
    pad = (1,) * (len(out_shape) - len(in_shape)) + tuple(in_shape)
    st = strides(pad)
    return [0 if d == 1 and o != 1 else s for d, o, s in zip(pad, out_shape, st)]


def collapse(out_shape, in_strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Merge adjacent dims that every operand walks contiguously; drops size-1 dims."""
    dims = [d for d in out_shape]
    sts = [list(s) for s in in_strides]
    keep = [i for i, d in enumerate(dims) if d != 1]
    dims = [dims[i] for i in keep]
    sts = [[s[i] for i in keep] for s in sts]
    i = len(dims) - 1
    while i > 0:
        if all(s[i - 1] == s[i] * dims[i] for s in sts):
            dims[i - 1] *= dims[i]
            for s in sts:
                s[i - 1] = s[i]
                del s[i]
            del dims[i]
        i -= 1
    return dims, sts


def _split_head(dims: list[int], ctx: EmitContext | None, work: int, ity: str) -> tuple[int, list[str]]:
    """With ctx, when the op has the work (ops/_par.py): the leading dims flattened into one range
    [ec_b, ec_e) the pool splits (enough of them for 8 chunks, keeping an inner loop to vectorise).
    Returns (number of dims the head covers, its lines); (0, []) leaves every loop as it is."""
    if ctx is None or not dims:
        return 0, []
    from edgec.codegen.ops import _par

    k, items = 1, dims[0]
    while items < _par.CHUNKS and k < len(dims) - 1:
        items *= dims[k]
        k += 1
    if not _par.split(ctx, items, work):
        return 0, []
    lines = ["for (size_t q_ = ec_b; q_ < ec_e; q_++) {"]
    inner = 1
    for j in reversed(range(k)):
        div = f" / {inner}u" if inner > 1 else ""
        mod = f" % {dims[j]}u" if j > 0 else ""
        lines.append(f"    const {ity} i{j} = ({ity})(q_{div}{mod});")
        inner *= dims[j]
    return k, lines


def loop_nest(out_shape, operands: list[Tensor | None], body, indent: str = "", ctx: EmitContext | None = None,
              work: int = 0) -> list[str]:
    """Nested loops over out_shape; body(idx_exprs, out_idx) -> lines, idx per operand (broadcast).
    With ctx: split among threads when the op moves `work` floats or more (see _split_head)."""
    if 0 in tuple(out_shape):
        return ["/* empty tensor: nothing to compute */"]
    out_st = strides(out_shape)
    ins = [bcast_strides(t.shape, out_shape) if t is not None else [0] * len(out_shape) for t in operands]
    dims, sts = collapse(out_shape, [out_st] + ins)
    h, lines = _split_head(dims, ctx, work, "size_t")
    vars_ = [f"i{k}" for k in range(len(dims))]
    for k, d in enumerate(dims):
        if k >= h:
            lines.append(f"{'    ' * (k - h + (1 if h else 0))}for (size_t {vars_[k]} = 0; {vars_[k]} < {d}u; {vars_[k]}++)")
    if h < len(dims):
        lines[-1:] = [lines[-1] + " {"] if lines else []

    def index(st):
        parts = [f"{v}" if s == 1 else f"{v} * {s}u" for v, s in zip(vars_, st) if s != 0]
        return " + ".join(parts) or "0"

    depth = len(dims) - h + (1 if h else 0)
    pad = "    " * depth if dims else ""
    inner = body([index(s) for s in sts[1:]], index(sts[0]))
    lines += [pad + ln for ln in inner]
    if dims:
        lines.append("    " * (depth - 1) + "}")
    if 0 < h < len(dims):
        lines.append("}")
    return lines


def cty(t: Tensor) -> str:
    return c_type(t.dtype)


def is_float(t: Tensor) -> bool:
    return np.dtype(t.dtype).kind == "f"


def math_fn(name: str, t: Tensor) -> str:
    """libm function for t's dtype: expf for float32, exp for float64."""
    return name + ("f" if np.dtype(t.dtype) == np.float32 else "")


def const_scalar(t: Tensor | None):
    """The single value of a constant tensor, else None."""
    if t is None or not t.is_const or t.size != 1:
        return None
    return t.const.reshape(-1)[0].item()


def block(lines: list[str]) -> str:
    return "{\n" + "\n".join("    " + ln for ln in lines) + "\n}\n"


def full_loops(shape, body_lines: list[str], ctx: EmitContext | None = None, work: int = 0) -> list[str]:
    """Plain nested loops i0..iN over shape (no collapsing) around body_lines (split as loop_nest's)."""
    if 0 in tuple(shape):
        return ["/* empty tensor: nothing to compute */"]
    h, lines = _split_head(list(shape), ctx, work, "long")
    lines += [f"{'    ' * (k - h + (1 if h else 0))}for (long i{k} = 0; i{k} < {d}; i{k}++)"
              for k, d in enumerate(shape) if k >= h]
    pad = "    " * (len(shape) - h + (1 if h else 0))
    return lines + [pad + "{"] + [pad + "    " + b for b in body_lines] + [pad + "}"] + (["}"] if h else [])


def strided_loops(out_shape, in_strides: list[list[int]], body, bases: list[int] | None = None,
                  ctx: EmitContext | None = None, work: int = 0) -> list[str]:
    """Like loop_nest but with explicit per-operand element strides (may be negative) and base offsets."""
    if 0 in tuple(out_shape):
        return ["/* empty tensor: nothing to compute */"]
    out_st = strides(out_shape)
    dims, sts = collapse(out_shape, [out_st] + [list(s) for s in in_strides])
    bases = bases or [0] * len(in_strides)
    vars_ = [f"i{k}" for k in range(len(dims))]
    h, lines = _split_head(dims, ctx, work, "long")
    lines += [f"{'    ' * (k - h + (1 if h else 0))}for (long {vars_[k]} = 0; {vars_[k]} < {d}; {vars_[k]}++)"
              for k, d in enumerate(dims) if k >= h]

    def index(st, base=0):
        parts = [v if s == 1 else f"{v} * {s}" for v, s in zip(vars_, st) if s != 0]
        if base:
            parts.insert(0, str(base))
        return " + ".join(parts) or "0"
    pad = "    " * (len(dims) - h + (1 if h else 0))
    inner = body([index(s, b) for s, b in zip(sts[1:], bases)], index(sts[0]))
    return lines + [pad + "{"] + [pad + "    " + ln for ln in inner] + [pad + "}"] + (["}"] if h else [])
