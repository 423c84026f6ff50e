"""Elementwise ops with numpy broadcasting, generated as loops with constant bounds and strides.

The C compiler vectorises the innermost loop (stride 1 or 0), so arithmetic needs no separate SIMD
kernel; float32 binary ops accept a fused epilogue (e.g. Add + Relu in residual blocks). Float32
transcendental functions (Sigmoid, Tanh, Gelu, Exp, Erf), which a compiler does not vectorise
through libm, call the target's f32-vact kernel (runtime_c/f32-vact) on SIMD targets; the generic
target keeps the libm loops.
"""

from __future__ import annotations

import numpy as np

from edgec.codegen import kernels
from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node
from edgec.codegen.ops import _par
from edgec.codegen.ops._util import act_expr, block, cty, epilogue_lines, flt, is_float, loop_nest, math_fn
from edgec.codegen.ops.conv import act_literal
from edgec.codegen.registry import register

ARITH = {"Add": "({a} + {b})", "Sub": "({a} - {b})", "Mul": "({a} * {b})", "Div": "({a} / {b})"}
COMPARE = {"Equal": "({a} == {b})", "Less": "({a} < {b})", "Greater": "({a} > {b})",
           "LessOrEqual": "({a} <= {b})", "GreaterOrEqual": "({a} >= {b})",
           "And": "({a} && {b})", "Or": "({a} || {b})", "Xor": "(!{a} != !{b})"}
VARIADIC = ("Max", "Min", "Sum", "Mean")


VECTOR_ISAS = ("avx512", "avx2", "neon")  # ISAs with an ec_simd_<isa>.h vocabulary and f32-vact kernel
VACT_OPS = {"Exp": "F32_VACT_EXP", "Erf": "F32_VACT_ERF"}
VACT_ACTS = ("sigmoid", "tanh", "gelu")  # fused activations with a transcendental function


def vector_isa(target) -> str | None:
    """Best vector-vocabulary ISA the target can run, or None (generic: scalar code)."""
    return next((i for i in kernels.ISA_USES.get(target.isa, ()) if i in VECTOR_ISAS), None)


def _vact_call(node: Node, ctx: EmitContext, op: str, act: str) -> str | None:
    """Call of the target's f32-vact kernel over the whole tensor, or None on the generic target."""
    t, y = node.inputs[0], node.outputs[0]
    isa = vector_isa(ctx.target)
    if isa is None or np.dtype(t.dtype) != np.float32 or t.size != y.size:
        return None
    ctx.require("f32-vact/f32-vact.h", f"f32-vact/f32-vact-{isa}.c")
    ctx.note(algo=f"vact-{isa}")
    # transcendental: a few times the work of a copy per element, so a quarter of the size pays
    if _par.split(ctx, _par.flat_items(y.size, VACT_BLOCK), 4 * y.size):
        # whole blocks of VACT_BLOCK elements (a multiple of every kernel's unroll): the same
        # elements go through the same vector code as in one call over the tensor
        return (f"{{\n    const size_t b_ = ec_b * {VACT_BLOCK}u, e_ = ec_e * {VACT_BLOCK}u < {y.size}u ? "
                f"ec_e * {VACT_BLOCK}u : {y.size}u;\n"
                f"    f32_vact__{isa}({op}, (ec_act){act}, e_ - b_, {ctx.ptr(t)} + b_, {ctx.ptr(y)} + b_);\n}}\n")
    return f"f32_vact__{isa}({op}, (ec_act){act}, {y.size}u, {ctx.ptr(t)}, {ctx.ptr(y)});\n"


VACT_BLOCK = 256


def _emit(node: Node, ctx: EmitContext, expr, operands=None) -> str:
    """Loop over the output computing expr(list of operand C values) per element."""
    y = node.outputs[0]
    operands = [t for t in node.inputs if t is not None] if operands is None else operands
    ptrs = [ctx.ptr(t) for t in operands]
    yp = ctx.ptr(y)
    use_ep = not node.epilogue.empty

    def body(idx, oidx):
        vals = [f"{p}[{i}]" for p, i in zip(ptrs, idx)]
        if not use_ep:
            return [f"{yp}[{oidx}] = ({cty(y)})({expr(vals)});"]
        return [f"float v = {expr(vals)};", *epilogue_lines(node, ctx, "v", oidx), f"{yp}[{oidx}] = v;"]
    work = y.size + sum(t.size for t in operands)
    return block(loop_nest(y.shape, operands, body, ctx=ctx, work=work))


def _binary_expr(op: str, node: Node):
    a_t = node.inputs[0]
    if op in ARITH:
        if op == "Div" and not is_float(a_t):
            return lambda v: f"({v[1]} != 0 ? {v[0]} / {v[1]} : 0)"
        return lambda v: ARITH[op].format(a=v[0], b=v[1])
    if op in COMPARE:
        return lambda v: COMPARE[op].format(a=v[0], b=v[1])
    if op == "Pow":
        e = node.inputs[1]
        if e.is_const and e.size == 1 and float(e.const.reshape(-1)[0]) == 2.0:
            return lambda v: f"({v[0]} * {v[0]})"
        if is_float(a_t):
            f = math_fn("pow", a_t)
            return lambda v: f"{f}({v[0]}, {v[1]})"
        return lambda v: f"pow((double){v[0]}, (double){v[1]})"
    if op == "PRelu":
        return lambda v: f"({v[0]} < 0 ? {v[1]} * {v[0]} : {v[0]})"
    if op == "Mod":
        if is_float(a_t):
            f = math_fn("fmod", a_t)
            if node.attr("fmod", 0):
                return lambda v: f"{f}({v[0]}, {v[1]})"
            # numpy-style: the result takes the divisor's sign
            return lambda v: f"({f}({v[0]}, {v[1]}) != 0 && (({f}({v[0]}, {v[1]}) < 0) != ({v[1]} < 0)) ? {f}({v[0]}, {v[1]}) + {v[1]} : {f}({v[0]}, {v[1]}))"
        if node.attr("fmod", 0) or a_t.dtype.kind == "u":
            return lambda v: f"({v[0]} % {v[1]})"
        return lambda v: f"(({v[0]} % {v[1]}) + ((({v[0]} % {v[1]}) != 0 && (({v[0]} < 0) != ({v[1]} < 0))) ? {v[1]} : 0))"
    if op == "BitShift":
        sh = "<<" if node.attr("direction") == "LEFT" else ">>"
        return lambda v: f"({v[0]} {sh} {v[1]})"
    raise KeyError(op)


@register("Add", "Sub", "Mul", "Div", epilogue=True, inplace=True)
def emit_arith(node: Node, ctx: EmitContext) -> str:
    if node.outputs[0].block:  # inside a channel-blocked region (codegen/layout.py)
        from edgec.codegen.layout import scale_operands
        from edgec.codegen.ops import nchwc
        if node.inputs[0].shape == node.inputs[1].shape == node.outputs[0].shape:
            return nchwc.emit_flat(node, ctx, _binary_expr(node.op, node), node.inputs[:2])
        return nchwc.emit_scale(node, ctx, *scale_operands(node))
    ctx.note(algo="elementwise")
    return _emit(node, ctx, _binary_expr(node.op, node))


@register("Pow", "PRelu", "Mod", "BitShift", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
          "And", "Or", "Xor", inplace=True)
def emit_binary(node: Node, ctx: EmitContext) -> str:
    ctx.note(algo="elementwise")
    return _emit(node, ctx, _binary_expr(node.op, node))


@register(*VARIADIC, inplace=True)
def emit_variadic(node: Node, ctx: EmitContext) -> str:
    t = node.inputs[0]
    n = len([x for x in node.inputs if x is not None])
    if node.op in ("Max", "Min"):
        cmp = ">" if node.op == "Max" else "<"

        def pick(v):
            acc = v[0]
            for x in v[1:]:
                # NaN propagates like numpy's maximum/minimum
                nan = f" || ({x} != {x})" if is_float(t) else ""
                acc = f"(({x} {cmp} {acc}){nan} ? {x} : {acc})"
            return acc
        return _emit(node, ctx, pick)
    scale = f" / ({cty(t)}){n}" if node.op == "Mean" else ""
    return _emit(node, ctx, lambda v: "(" + " + ".join(v) + ")" + scale)


@register("Where", inplace=False)
def emit_where(node: Node, ctx: EmitContext) -> str:
    return _emit(node, ctx, lambda v: f"({v[0]} ? {v[1]} : {v[2]})")


def _unary_expr(node: Node):
    op, t = node.op, node.inputs[0]
    f = lambda name: math_fn(name, t)  # noqa: E731
    one = "1.0f" if np.dtype(t.dtype) == np.float32 else "1.0"
    a = lambda k, d: flt(node.attr(k, d)) if np.dtype(t.dtype) == np.float32 else repr(float(node.attr(k, d)))  # noqa
    unsigned = np.dtype(t.dtype).kind in "ub"
    table = {
        "Abs": lambda v: v if unsigned else f"({v} < 0 ? -{v} : {v})", "Neg": lambda v: f"(-{v})",
        "Sqrt": lambda v: f"{f('sqrt')}({v})", "Exp": lambda v: f"{f('exp')}({v})", "Log": lambda v: f"{f('log')}({v})",
        "Reciprocal": lambda v: f"({one} / {v})", "Floor": lambda v: f"{f('floor')}({v})",
        "Ceil": lambda v: f"{f('ceil')}({v})", "Round": lambda v: f"{f('nearbyint')}({v})",
        "Sign": lambda v: f"({v} > 0)" if unsigned else f"(({v} > 0) - ({v} < 0))", "Erf": lambda v: f"{f('erf')}({v})",
        "Sin": lambda v: f"{f('sin')}({v})", "Cos": lambda v: f"{f('cos')}({v})", "Tan": lambda v: f"{f('tan')}({v})",
        "Asin": lambda v: f"{f('asin')}({v})", "Acos": lambda v: f"{f('acos')}({v})", "Atan": lambda v: f"{f('atan')}({v})",
        "Sinh": lambda v: f"{f('sinh')}({v})", "Cosh": lambda v: f"{f('cosh')}({v})",
        "Asinh": lambda v: f"{f('asinh')}({v})", "Acosh": lambda v: f"{f('acosh')}({v})",
        "Atanh": lambda v: f"{f('atanh')}({v})", "Not": lambda v: f"(!{v})",
        "IsNaN": lambda v: f"isnan({v})", "Softsign": lambda v: f"({v} / ({one} + {f('fabs')}({v})))",
        "Softplus": lambda v: f"{f('log1p')}({f('exp')}({v}))",
        "Elu": lambda v: f"({v} >= 0 ? {v} : {a('alpha', 1.0)} * ({f('exp')}({v}) - {one}))",
        "Celu": lambda v: f"({f('fmax')}(0, {v}) + {f('fmin')}(0, {a('alpha', 1.0)} * ({f('exp')}({v} / {a('alpha', 1.0)}) - {one})))",
        "Selu": lambda v: f"({a('gamma', 1.0507009873554805)} * ({v} > 0 ? {v} : {a('alpha', 1.6732632423543772)} * ({f('exp')}({v}) - {one})))",
        "ThresholdedRelu": lambda v: f"({v} > {a('alpha', 1.0)} ? {v} : 0)",
        "Mish": lambda v: f"({v} * {f('tanh')}({f('log1p')}({f('exp')}({v}))))",
    }
    if op == "IsInf":
        pos, neg = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
        return lambda v: f"(({pos} && {v} == INFINITY) || ({neg} && {v} == -INFINITY))"
    return table[op]


UNARY = ("Abs", "Neg", "Sqrt", "Exp", "Log", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Erf", "Sin", "Cos",
         "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Not", "IsNaN", "IsInf",
         "Softsign", "Softplus", "Elu", "Celu", "Selu", "ThresholdedRelu", "Mish")


@register(*UNARY, inplace=True)
def emit_unary(node: Node, ctx: EmitContext) -> str:
    ctx.note(algo="elementwise")
    if node.op in VACT_OPS:
        call = _vact_call(node, ctx, VACT_OPS[node.op], act_literal(None, {}))
        if call is not None:
            return call
    return _emit(node, ctx, lambda v: _unary_expr(node)(v[0]), operands=[node.inputs[0]])


@register("Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Gelu", "Clip", inplace=True)
def emit_activation(node: Node, ctx: EmitContext) -> str:
    """Standalone activation (when no producer could take it as an epilogue)."""
    from edgec.codegen.fuse import activation_of

    t = node.inputs[0]
    act = activation_of(node)
    if node.outputs[0].block:  # inside a channel-blocked region (codegen/layout.py)
        from edgec.codegen.ops import nchwc
        return nchwc.emit_act(node, ctx, act)
    if act is not None and np.dtype(t.dtype) == np.float32:
        return _emit_act(node, ctx, act)
    return _emit_generic_act(node, ctx)


def _emit_act(node: Node, ctx: EmitContext, act) -> str:
    if act[0] in VACT_ACTS:
        call = _vact_call(node, ctx, "F32_VACT_ACT", act_literal(*act))
        if call is not None:
            return call
    t, y = node.inputs[0], node.outputs[0]
    xp, yp = ctx.ptr(t), ctx.ptr(y)
    lo, hi = "0", f"{y.size}u"
    if _par.split(ctx, _par.flat_items(y.size, VACT_BLOCK), 2 * y.size):
        lo, hi = f"ec_b * {VACT_BLOCK}u", f"(ec_e * {VACT_BLOCK}u < {y.size}u ? ec_e * {VACT_BLOCK}u : {y.size}u)"
    body = [f"for (size_t i = {lo}; i < {hi}; i++) {{", f"    float x = {xp}[i];",
            f"    {yp}[i] = {act_expr(act[0], act[1], 'x')};", "}"]
    return block(body)


def _emit_generic_act(node: Node, ctx: EmitContext) -> str:
    """Non-float32 dtypes, Gelu tanh approximation, Clip with runtime bounds."""
    t = node.inputs[0]
    f = lambda name: math_fn(name, t)  # noqa: E731
    if node.op == "Clip":
        lo, hi = node.input(1), node.input(2)
        lo_v = f"{ctx.ptr(lo)}[0]" if lo is not None else None
        hi_v = f"{ctx.ptr(hi)}[0]" if hi is not None else None

        def clip(v):
            e = v[0]
            if lo_v:
                e = f"({e} < {lo_v} ? {lo_v} : {e})"
            if hi_v:
                e = f"({e} > {hi_v} ? {hi_v} : {e})"
            return e
        return _emit(node, ctx, clip, operands=[t])
    if node.op == "Gelu":
        call = _vact_call(node, ctx, "F32_VACT_GELU_TANH", act_literal(None, {}))
        if call is not None:
            return call
        k = "0.7978845608028654"
        return _emit(node, ctx, lambda v: f"(0.5 * {v[0]} * (1 + {f('tanh')}({k} * ({v[0]} + 0.044715 * {v[0]} * {v[0]} * {v[0]}))))",
                     operands=[t])
    exprs = {"Relu": lambda v: f"({v} > 0 ? {v} : 0)",
             "LeakyRelu": lambda v: f"({v} >= 0 ? {v} : {node.attr('alpha', 0.01)!r} * {v})",
             "Sigmoid": lambda v: f"(1 / (1 + {f('exp')}(-{v})))", "Tanh": lambda v: f"{f('tanh')}({v})",
             "HardSigmoid": lambda v: f"{f('fmax')}(0, {f('fmin')}(1, {node.attr('alpha', 0.2)!r} * {v} + {node.attr('beta', 0.5)!r}))",
             "HardSwish": lambda v: f"({v} * {f('fmax')}(0, {f('fmin')}(1, {v} / 6 + 0.5)))"}
    return _emit(node, ctx, lambda v: exprs[node.op](v[0]), operands=[t])
