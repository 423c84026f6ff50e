"""fp16 models: weights stored as fp16, arithmetic in fp32.

`lower_fp16` (before lowering) turns an fp16 ONNX graph (float16 initializers, activations and Casts,
as onnxruntime's float16 converter makes them) into an fp32 graph, remembering which Conv / Gemm /
MatMul weights were fp16 (attribute ec_f16_weights). Their emitters then run behind a context
that stores every packed float32 weight array as fp16 in the weights blob and converts it back into
layer scratch at the start of the layer (F16C on x86, vcvt on Arm, portable C elsewhere). Weight bytes
halve; run time gains one conversion pass per layer; no fp16 arithmetic is done (Pi 4 and AVX2 have
none), which the layer's `algo` notes say.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node
from edgec.codegen.ops import gemm as dense_gemm
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


@register("Conv", epilogue=True, priority=2)
def emit_conv(node: Node, ctx: EmitContext) -> str:
    return _wrapped(node, ctx, sparse.emit_conv)


@register("Gemm", epilogue=True, priority=2)
def emit_gemm(node: Node, ctx: EmitContext) -> str:
    return _wrapped(node, ctx, dense_gemm.emit_gemm)


@register("MatMul", epilogue=True, priority=2)
def emit_matmul(node: Node, ctx: EmitContext) -> str:
    return _wrapped(node, ctx, dense_gemm.emit_matmul)
