"""fp16 models: weights stored as fp16, arithmetic in fp32.

`lower_fp16` (before lowering) turns an fp16 ONNX graph (float16 initializers, activations and Casts,
as onnxruntime's float16 converter makes them) into an fp32 graph, remembering which Conv / Gemm /
MatMul weights were fp16 (attribute ec_f16_weights). Their emitters then run behind a context
that stores every packed float32 weight array as fp16 in the weights blob and converts it back into
layer scratch at the start of the layer (F16C on x86, vcvt on Arm, portable C elsewhere). Weight bytes
halve; run time gains one conversion pass per layer. Only on targets with fp16 arithmetic
(aarch64-v82: Cortex-A76) do pointwise convs compute in fp16 (runtime_c/f16-gemm, fp16 accumulation);
the layer's `algo` says which happened: `...+f16w` (stored fp16, fp32 math) or `f16-arith-conv1x1`.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node
from edgec.codegen.ops import conv as dense
from edgec.codegen.ops import sparse
from edgec.codegen.registry import register

WEIGHT_OPS = ("Conv", "Gemm", "MatMul", "ConvTranspose")


def _retype(vi) -> None:
    t = vi.type.tensor_type
    if t.elem_type == TensorProto.FLOAT16:
        t.elem_type = TensorProto.FLOAT


def lower_fp16(model: onnx.ModelProto) -> onnx.ModelProto:
    """fp16 graph -> fp32 graph with fp16-stored weights marked; other models unchanged."""
    g = model.graph
    if not any(i.data_type == TensorProto.FLOAT16 for i in g.initializer):
        return model
    model = onnx.ModelProto.FromString(model.SerializeToString())
    g = model.graph
    f16 = set()
    for i, init in enumerate(g.initializer):
        if init.data_type == TensorProto.FLOAT16:
            f16.add(init.name)
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float32), init.name))
    nodes = []
    for n in g.node:
        if n.op_type == "Cast" and any(a.name == "to" and a.i in (TensorProto.FLOAT16, TensorProto.FLOAT)
                                       for a in n.attribute):
            nodes.append(helper.make_node("Identity", [n.input[0]], [n.output[0]], name=n.name))
            continue
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT16:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float32), a.t.name))
        if n.op_type in WEIGHT_OPS and len(n.input) > 1 and n.input[1] in f16:
            n.attribute.append(helper.make_attribute("ec_f16_weights", 1))
        nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        _retype(vi)
    return model


def cvt_kernel(target) -> tuple[str, str]:
    if target.arch == "x86_64" and "f16c" in target.features:
        return "f16_to_f32__f16c", "f16-cvt/f16-cvt-f16c.c"
    if target.arch == "aarch64":
        return "f16_to_f32__neon", "f16-cvt/f16-cvt-neon.c"
    return "f16_to_f32__scalar", "f16-cvt/f16-cvt-scalar.c"


class F16Weights:
    """EmitContext stand-in: float32 weight arrays go to the blob as fp16 plus a conversion into scratch."""

    MIN_ELEMS = 64  # tiny arrays (biases, BSR row pointers) stay as they are

    def __init__(self, ctx: EmitContext):
        self._ctx = ctx
        self.pre: list[str] = []
        self.saved = 0

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def weight(self, key: str, array: np.ndarray) -> str:
        array = np.asarray(array)
        if array.dtype != np.float32 or array.size < self.MIN_ELEMS:
            return self._ctx.weight(key, array)
        src = self._ctx.weight(key + ":f16", array.astype(np.float16))
        buf = self._ctx.scratch(array.size * 4)
        fn, path = cvt_kernel(self._ctx.target)
        self._ctx.require("f16-cvt/f16-cvt.h", "f16-cvt/f16-cvt-scalar.c", path)
        self.pre.append(f"{fn}({array.size}u, {src}, (float *){buf});")
        self.saved += array.size * 2
        return f"((const float *){buf})"


def _wrapped(node: Node, ctx: EmitContext, emit) -> str:
    if not node.attr("ec_f16_weights"):
        return emit(node, ctx)
    proxy = F16Weights(ctx)
    body = emit(node, proxy)
    layer = ctx.layer
    layer.algo = f"{layer.algo}+f16w"
    layer.details.update(f16_weights="stored fp16, converted to fp32 per run; fp32 arithmetic",
                         f16_bytes_saved=proxy.saved)
    return "\n".join(proxy.pre) + "\n" + body


def _pointwise_fp16_arith(node: Node, ctx: EmitContext) -> str | None:
    """Native fp16 arithmetic for 1x1 stride-1 convs on targets that have it, else None."""
    if not node.attr("ec_f16_weights") or "fp16" not in ctx.target.features or ctx.target.arch != "aarch64":
        return None
    g = dense.geometry(node)
    if (g["G"], g["KH"], g["KW"], g["SH"], g["SW"], g["PT"], g["PL"]) != (1, 1, 1, 1, 1, 0, 0) \
            or (g["Ho"], g["Wo"]) != (g["H"], g["W"]):
        return None
    M, K, px = g["K"], g["C"], g["H"] * g["W"]
    w = np.zeros((-(-M // 4) * 4, K), np.float16)
    w[:M] = node.inputs[1].const.reshape(M, K)
    wp = ctx.weight(f"{node.name}:w16", np.ascontiguousarray(w.reshape(-1, 4, K).transpose(0, 2, 1)))
    scr = ctx.scratch(K * (-(-px // 16) * 16) * 2)
    ctx.require("f16-gemm/f16-gemm.h", "f16-gemm/f16-conv1x1-scalar.c", "f16-gemm/f16-conv1x1-4x16-neonfp16arith.c")
    bias = node.input(2)
    fields = dense.epilogue_fields(node, ctx, ctx.ptr(bias) if bias is not None else "NULL")
    ctx.note(algo="f16-arith-conv1x1", macs=g["N"] * M * K * px, kernel="f16_conv1x1__neonfp16arith",
             why="fp16 weights and fp16 arithmetic (ARMv8.2 FP16), fp16 accumulation", f16_weights="fp16 arithmetic")
    x, y = ctx.ptr(node.inputs[0]), ctx.ptr(node.outputs[0])
    return (f"ec_epilogue ep = {{{fields}}};\nconst float *res0 = ep.residual;\n"
            f"for (int b = 0; b < {g['N']}; b++) {{\n"
            f"    ep.residual = res0 ? res0 + (size_t)b * {M * px} : NULL;\n"
            f"    f16_conv1x1__neonfp16arith({M}u, {px}u, {K}u, {wp}, {x} + (size_t)b * {K * px}, "
            f"{y} + (size_t)b * {M * px}, &ep, {scr});\n}}\n")


@register("Conv", epilogue=True, priority=2)
def emit_conv(node: Node, ctx: EmitContext) -> str:
    return _pointwise_fp16_arith(node, ctx) or _wrapped(node, ctx, sparse.emit_conv)


@register("Gemm", epilogue=True, priority=2)
def emit_gemm(node: Node, ctx: EmitContext) -> str:
    return _wrapped(node, ctx, sparse.emit_gemm)


@register("MatMul", epilogue=True, priority=2)
def emit_matmul(node: Node, ctx: EmitContext) -> str:
    return _wrapped(node, ctx, sparse.emit_matmul)
