"""QOperator int8 models (onnxruntime's com.microsoft QLinearAdd, QLinearMul, QLinearGlobalAveragePool,
QGemm, QLinearSigmoid, QLinearLeakyRelu, QLinearAveragePool, QLinearConcat, QLinearSoftmax) rewritten into the
equivalent standard QDQ form (DequantizeLinear -> float op -> QuantizeLinear), then shape-inferred,
so one path (codegen/ops/qdq.py) turns both formats into the same integer kernels.
QLinearConv and QLinearMatMul are standard ops and stay as they are.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from edgec.model import constant_tensors

MS = "com.microsoft"
UNARY = {"QLinearSigmoid": "Sigmoid", "QLinearLeakyRelu": "LeakyRelu", "QLinearAveragePool": "AveragePool",
         "QLinearGlobalAveragePool": "GlobalAveragePool", "QLinearSoftmax": "Softmax"}
BINARY = {"QLinearAdd": "Add", "QLinearMul": "Mul"}


def _dq(x, s, z, out, axis=None):
    kw = {} if axis is None else {"axis": axis}
    return helper.make_node("DequantizeLinear", [x, s] + ([z] if z else []), [out], **kw)


def _attrs(n, drop=("channels_last", "opset")):
    return {a.name: helper.get_attribute_value(a) for a in n.attribute if a.name not in drop}


def _qgemm(n, consts, inits):
    a, as_, az, b, bs, bz = n.input[:6]
    c = n.input[6] if len(n.input) > 6 else ""
    ys = n.input[7] if len(n.input) > 7 else ""
    yz = n.input[8] if len(n.input) > 8 else ""
    at = _attrs(n)
    per_ch = consts.get(bs) is not None and consts[bs].size > 1
    axis = (0 if at.get("transB", 0) else 1) if per_ch else None
    t = n.output[0]
    nodes = [_dq(a, as_, az, f"{t}__a"), _dq(b, bs, bz, f"{t}__b", axis)]
    ins = [f"{t}__a", f"{t}__b"]
    if c:
        scale = (np.float32(consts[as_].reshape(-1)[0]) * consts[bs].astype(np.float32)).reshape(-1)
        inits.append(numpy_helper.from_array(scale.astype(np.float32), f"{t}__c_scale"))
        nodes.append(_dq(c, f"{t}__c_scale", "", f"{t}__c", 0 if scale.size > 1 else None))
        ins.append(f"{t}__c")
    gemm_out = f"{t}__f" if ys else t
    nodes.append(helper.make_node("Gemm", ins, [gemm_out], name=n.name, **at))
    if ys:
        nodes.append(helper.make_node("QuantizeLinear", [gemm_out, ys] + ([yz] if yz else []), [t]))
    return nodes


def _rewrite(n, consts, inits):
    t = n.output[0]
    if n.op_type in BINARY:
        a, as_, az, b, bs, bz, ys, yz = n.input[:8]
        return [_dq(a, as_, az, f"{t}__a"), _dq(b, bs, bz, f"{t}__b"),
                helper.make_node(BINARY[n.op_type], [f"{t}__a", f"{t}__b"], [f"{t}__f"], name=n.name),
                helper.make_node("QuantizeLinear", [f"{t}__f", ys, yz], [t])]
    if n.op_type == "QLinearSoftmax" and _attrs(n, ()).get("opset", 13) < 13:
        return None  # pre-13 Softmax flattens the trailing dims: not the opset-13 op we would emit
    if n.op_type in UNARY and not _attrs(n, ()).get("channels_last", 0):
        x, xs, xz, ys, yz = n.input[:5]
        return [_dq(x, xs, xz, f"{t}__x"),
                helper.make_node(UNARY[n.op_type], [f"{t}__x"], [f"{t}__f"], name=n.name, **_attrs(n)),
                helper.make_node("QuantizeLinear", [f"{t}__f", ys, yz], [t])]
    if n.op_type == "QLinearConcat":
        ys, yz, rest = n.input[0], n.input[1], list(n.input[2:])
        nodes, fl = [], []
        for i in range(0, len(rest), 3):
            fl.append(f"{t}__{i}")
            nodes.append(_dq(*rest[i:i + 3], fl[-1]))
        return nodes + [helper.make_node("Concat", fl, [f"{t}__f"], name=n.name, **_attrs(n)),
                        helper.make_node("QuantizeLinear", [f"{t}__f", ys, yz], [t])]
    if n.op_type == "QGemm" and not _attrs(n).get("transA", 0):
        return _qgemm(n, consts, inits)
    return None


def qoperator_to_qdq(model: onnx.ModelProto) -> onnx.ModelProto:
    """Rewrite the com.microsoft quantized ops edgec understands; others are left (and reported)."""
    if not any(n.domain == MS for n in model.graph.node):
        return model
    model = onnx.ModelProto.FromString(model.SerializeToString())
    consts = constant_tensors(model)
    inits: list = []
    nodes = []
    for n in list(model.graph.node):
        new = _rewrite(n, consts, inits) if n.domain == MS else None
        nodes.extend(new if new is not None else [n])
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    model.graph.initializer.extend(inits)
    return onnx.shape_inference.infer_shapes(model)
