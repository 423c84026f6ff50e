"""Graph passes that never change what a model computes (each is checked for equal outputs).

onnxruntime's offline basic-level optimizer does constant folding, redundant-node removal and the standard
Conv/BN/Add/Mul and MatMul+Add fusions well, so `ort-basic` runs it. Our own passes cover what must work
even without it and what we want to control (BatchNorm folding, Gemm fusion only where it is plain 2-D).
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from edgec.model import convert_opset, infer_shapes, opset_version
from edgec.optimizer.graph import (DEFAULT_DOMAINS, attr, consumers, get_init, output_names,
                                   producers, remove_unused_initializers, set_init, topo_sort, unique_name)


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    return m


def shape_inference(model: onnx.ModelProto) -> onnx.ModelProto:
    m = _copy(model)
    del m.graph.value_info[:]
    return infer_shapes(m)


def opset_upgrade(model: onnx.ModelProto, target: int = 13) -> onnx.ModelProto:
    """Per-channel QDQ and the Gemm/Clip forms we emit need opset >= 13."""
    if opset_version(model) >= target:
        return model
    return infer_shapes(convert_opset(_copy(model), target))


def constants_to_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """Constant nodes -> initializers, so weight passes find every weight in one place."""
    m = _copy(model)
    keep = []
    for n in m.graph.node:
        value = next((a for a in n.attribute if a.name == "value"), None)
        if n.op_type == "Constant" and n.domain in DEFAULT_DOMAINS and value is not None and n.output[0] not in output_names(m):
            t = onnx.TensorProto()
            t.CopyFrom(value.t)
            t.name = n.output[0]
            m.graph.initializer.append(t)
        else:
            keep.append(n)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    return m


def _bypass(m: onnx.ModelProto, node: onnx.NodeProto, src: str) -> bool:
    """Remove a pass-through node by rewiring its consumers to src; keeps graph output names intact."""
    out = node.output[0]
    if out in output_names(m):
        prod = producers(m).get(src)
        if prod is None or src in output_names(m) or len(consumers(m).get(src, [])) > 1:
            return False
        prod.output[list(prod.output).index(src)] = out
        for c in m.graph.node:
            c.input[:] = [out if i == src else i for i in c.input]
    else:
        for c in m.graph.node:
            c.input[:] = [src if i == out else i for i in c.input]
    m.graph.node.remove(node)
    return True


def remove_identity(model: onnx.ModelProto) -> onnx.ModelProto:
    """Identity and inference-mode Dropout pass their input through unchanged."""
    m = _copy(model)
    for n in list(m.graph.node):
        if n.domain not in DEFAULT_DOMAINS or n.op_type not in ("Identity", "Dropout"):
            continue
        if n.op_type == "Dropout" and len(n.output) > 1 and n.output[1] and n.output[1] in consumers(m):
            continue  # the mask is used
        _bypass(m, n, n.input[0])
    return m


def _bn_params(m, bn):
    vals = [get_init(m, name) for name in bn.input[1:5]]
    if any(v is None for v in vals):
        return None
    scale, bias, mean, var = (v.astype(np.float64) for v in vals)
    k = scale / np.sqrt(var + attr(bn, "epsilon", 1e-5))
    return k, bias - mean * k


def fold_batchnorm(model: onnx.ModelProto) -> onnx.ModelProto:
    """BatchNormalization after Conv/ConvTranspose/Gemm becomes a rescaled weight and bias."""
    m = _copy(model)
    for bn in [n for n in m.graph.node if n.op_type == "BatchNormalization" and n.domain in DEFAULT_DOMAINS]:
        prod = producers(m).get(bn.input[0])
        if prod is None or prod.op_type not in ("Conv", "ConvTranspose", "Gemm") or len(bn.output) > 1:
            continue
        if len(consumers(m).get(prod.output[0], [])) != 1 or prod.output[0] in output_names(m):
            continue
        kb, w = _bn_params(m, bn), get_init(m, prod.input[1])
        if kb is None or w is None or (prod.op_type == "Gemm" and (attr(prod, "transA", 0) or len(w.shape) != 2)):
            continue
        k, b_add = kb
        w64 = w.astype(np.float64)
        if prod.op_type == "Conv":
            w64 = w64 * k.reshape(-1, *[1] * (w.ndim - 1))
        elif prod.op_type == "ConvTranspose":
            g = attr(prod, "group", 1)
            cout_g = w.shape[1]
            w64 = (w64.reshape(g, -1, cout_g, *w.shape[2:]) * k.reshape(g, 1, cout_g, *[1] * (w.ndim - 2))).reshape(w.shape)
        else:
            w64 = w64 * (k[:, None] if attr(prod, "transB", 0) else k[None, :])
        old_b = get_init(m, prod.input[2]) if len(prod.input) > 2 and prod.input[2] else None
        if len(prod.input) > 2 and prod.input[2] and old_b is None:
            continue
        if prod.op_type == "Gemm" and old_b is not None and old_b.shape != k.shape:
            old_b = np.broadcast_to(old_b, k.shape)
        b = (old_b.astype(np.float64) * k if old_b is not None else 0) + b_add
        w_name, b_name = unique_name(m, prod.input[1] + "_bnfold"), unique_name(m, prod.input[0] + "_bnfold_bias")
        set_init(m, w_name, w64.astype(w.dtype))
        set_init(m, b_name, np.asarray(b, dtype=w.dtype))
        while len(prod.input) < 3:
            prod.input.append("")
        prod.input[1], prod.input[2] = w_name, b_name
        prod.output[0] = bn.output[0]
        m.graph.node.remove(bn)
    return remove_unused_initializers(m)


def matmul_add_to_gemm(model: onnx.ModelProto) -> onnx.ModelProto:
    """MatMul(A[M,K], W[K,N]) + b[N] -> Gemm, only for plain 2-D operands and a constant weight."""
    m = _copy(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in list(m.graph.value_info) + list(m.graph.input)}
    for mm in [n for n in m.graph.node if n.op_type == "MatMul" and n.domain in DEFAULT_DOMAINS]:
        uses = consumers(m).get(mm.output[0], [])
        w = get_init(m, mm.input[1])
        if len(uses) != 1 or uses[0].op_type != "Add" or w is None or w.ndim != 2 or mm.output[0] in output_names(m):
            continue
        add = uses[0]
        other = add.input[1] if add.input[0] == mm.output[0] else add.input[0]
        b = get_init(m, other)
        if len(shapes.get(mm.input[0], [])) != 2 or b is None or b.size != w.shape[1] or b.ndim > 2:
            continue
        b_name = unique_name(m, other + "_gemm")
        set_init(m, b_name, b.reshape(-1))
        gemm = helper.make_node("Gemm", [mm.input[0], mm.input[1], b_name], [add.output[0]], name=mm.name or add.name)
        idx = list(m.graph.node).index(mm)
        m.graph.node.remove(mm)
        m.graph.node.remove(add)
        m.graph.node.insert(idx, gemm)
    return remove_unused_initializers(m)


def ort_basic(model: onnx.ModelProto) -> onnx.ModelProto:
    """onnxruntime's offline basic optimizations; kept only if the result is still plain ONNX."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.log_severity_level = 3
    with tempfile.TemporaryDirectory() as tmp:
        so.optimized_model_filepath = os.path.join(tmp, "basic.onnx")
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        out = onnx.load(so.optimized_model_filepath)
    if any(n.domain not in DEFAULT_DOMAINS for n in out.graph.node):
        return model  # contrib ops would tie the model to onnxruntime
    used = {n.domain for n in out.graph.node} | {""}
    keep = [o for o in out.opset_import if o.domain in used or (o.domain == "ai.onnx")]
    del out.opset_import[:]
    out.opset_import.extend(keep)
    out.ir_version = model.ir_version
    del out.graph.value_info[:]
    return infer_shapes(out)


def dedupe_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """Identical weights stored twice become one tensor."""
    m = _copy(model)
    seen: dict[tuple, str] = {}
    rename: dict[str, str] = {}
    for t in m.graph.initializer:
        key = (t.data_type, tuple(t.dims), numpy_helper.to_array(t).tobytes())
        if key in seen:
            rename[t.name] = seen[key]
        else:
            seen[key] = t.name
    if not rename:
        return m
    for n in m.graph.node:
        n.input[:] = [rename.get(i, i) for i in n.input]
    return remove_unused_initializers(m)


def _node_key(n: onnx.NodeProto) -> tuple:
    return (n.domain, n.op_type, tuple(n.input), tuple(a.SerializeToString() for a in sorted(n.attribute, key=lambda a: a.name)))


_RANDOM_OPS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}


def cse(model: onnx.ModelProto) -> onnx.ModelProto:
    """Two nodes with the same op, attributes and inputs compute the same thing once."""
    m = topo_sort(_copy(model))
    outputs = output_names(m)
    seen: dict[tuple, onnx.NodeProto] = {}
    rename: dict[str, str] = {}
    keep = []
    for n in m.graph.node:
        n.input[:] = [rename.get(i, i) for i in n.input]
        key = _node_key(n)
        first = seen.get(key)
        pure = not any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute)
        pure = pure and n.op_type not in _RANDOM_OPS
        if first is not None and pure and not any(o in outputs for o in n.output) and len(first.output) == len(n.output):
            rename.update(dict(zip(n.output, first.output)))
            continue
        seen.setdefault(key, n)
        keep.append(n)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    return m


def dead_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop nodes whose outputs nobody reads, then unused weights."""
    m = _copy(model)
    live = output_names(m)
    keep = []
    for n in reversed(list(m.graph.node)):
        if any(o in live for o in n.output):
            keep.append(n)
            live.update(i for i in n.input if i)
    del m.graph.node[:]
    m.graph.node.extend(reversed(keep))
    return remove_unused_initializers(m)
