"""What is in a model: the data behind `edgec inspect` and the optimizer's before/after report.

MACs are counted for the layers that dominate inference time (Conv, ConvTranspose, Gemm, MatMul) with the
formulas in docs/architecture.md; convolutions are group-aware: N*Cout*Ho*Wo*(Cin/g)*prod(kernel).
"""

from __future__ import annotations

import collections
import math
from pathlib import Path

import numpy as np
import onnx

from edgec.model import constant_tensors, graph_inputs, graph_outputs, opset_version, tensor_shapes

WEIGHT_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul", "QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger")


def _attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _shape(infos, name):
    info = infos.get(name)
    if info is None or not info.is_static():
        return None
    return tuple(int(d) for d in info.shape)


def conv_kind(cin: int, cout: int, groups: int, kernel: tuple) -> str:
    if groups == 1:
        return "pointwise" if all(k == 1 for k in kernel) else "dense"
    if groups == cin and cout % cin == 0:
        return "depthwise"
    return "grouped"


def _conv_layer(node, infos) -> dict:
    w = _shape(infos, node.input[1])
    y = _shape(infos, node.output[0])
    x = _shape(infos, node.input[0])
    g = int(_attr(node, "group", 1))
    layer = {"groups": g}
    if w is None or y is None or x is None:
        layer["macs"] = None
        return layer
    kernel = w[2:]
    if node.op_type == "ConvTranspose":
        cin, cout = w[0], w[1] * g
        macs = x[0] * cin * math.prod(x[2:]) * w[1] * math.prod(kernel)
    else:
        cout, cin = w[0], w[1] * g
        macs = y[0] * cout * math.prod(y[2:]) * w[1] * math.prod(kernel)
    layer.update(macs=int(macs), cin=cin, cout=cout, kernel=list(kernel), kind=conv_kind(cin, cout, g, kernel))
    return layer


def _matmul_layer(node, infos) -> dict:
    a, b, y = (_shape(infos, n) for n in (node.input[0], node.input[1], node.output[0]))
    if a is None or b is None or y is None:
        return {"macs": None}
    if node.op_type == "Gemm":
        k = a[0] if _attr(node, "transA", 0) else a[-1]
        return {"macs": int(math.prod(y) * k)}
    k = a[-1] if len(a) > 1 else a[0]
    return {"macs": int(math.prod(y) * k)}


def _weight_name(node, weights) -> str | None:
    idx = {"QLinearConv": 3, "QLinearMatMul": 3}.get(node.op_type, 1)
    if len(node.input) > idx and node.input[idx] in weights:
        return node.input[idx]
    if node.op_type in ("MatMul", "Gemm") and node.input[0] in weights:
        return node.input[0]
    return None


def _is_param(dtype: np.dtype) -> bool:
    """Weights, not shape data: float and 8-bit tensors count as parameters, int64 index tensors do not."""
    return dtype.kind == "f" or dtype in (np.int8, np.uint8)


def weight_tensors(model: onnx.ModelProto, infos=None) -> dict[str, dict]:
    """Tensors computed from constants alone that feed the rest of the graph: {name: {size, nbytes, sparsity}}.

    Covers initializers, Constant nodes and weights generated in-graph (e.g. ConstantOfShape, as the onnx
    wheel's fixtures do). sparsity is None where the values are not known without running the graph.
    """
    infos = infos or tensor_shapes(model)
    consts = constant_tensors(model)
    known = set(consts)
    fill: dict[str, float] = {}
    for n in model.graph.node:
        ins = [i for i in n.input if i]
        if n.op_type == "Constant" or (ins and all(i in known for i in ins)):
            known.update(n.output)
            if n.op_type == "ConstantOfShape":
                v = _attr(n, "value")
                fill[n.output[0]] = float(onnx.numpy_helper.to_array(v).ravel()[0]) if v is not None else 0.0
    frontier = {i for n in model.graph.node if not (n.op_type == "Constant" or all(i in known for i in n.input if i))
                for i in n.input if i in known}
    frontier |= {o.name for o in model.graph.output if o.name in known}
    out = {}
    for name in frontier:
        if name in consts:
            a = consts[name]
            zeros = np.count_nonzero(a == 0) / a.size if a.size else 0.0
            out[name] = {"size": int(a.size), "nbytes": int(a.nbytes), "dtype": a.dtype, "sparsity": float(zeros)}
            continue
        info = infos.get(name)
        if info is None or not info.is_static():
            continue
        dtype = np.dtype(info.dtype) if info.dtype in np.sctypeDict else np.dtype("float32")
        size = int(math.prod(info.shape))
        sp = (1.0 if fill[name] == 0 else 0.0) if name in fill else None
        out[name] = {"size": size, "nbytes": size * dtype.itemsize, "dtype": dtype, "sparsity": sp}
    return out


def model_stats(model: onnx.ModelProto) -> dict:
    """Params, weight bytes, MACs and per-layer facts of a shape-inferred model."""
    infos = tensor_shapes(model)
    weights = weight_tensors(model, infos)
    layers = []
    for i, node in enumerate(model.graph.node):
        if node.op_type not in WEIGHT_OPS:
            continue
        if node.op_type in ("Conv", "ConvTranspose"):
            layer = _conv_layer(node, infos)
        elif node.op_type in ("Gemm", "MatMul"):
            layer = _matmul_layer(node, infos)
        else:
            layer = {"macs": None}
        wname = _weight_name(node, weights)
        if wname is not None:
            layer["params"] = weights[wname]["size"]
            if weights[wname]["sparsity"] is not None:
                layer["sparsity"] = weights[wname]["sparsity"]
        layers.append({"name": node.name or f"{node.op_type}_{i}", "op": node.op_type, **layer})
    params = [w for w in weights.values() if _is_param(w["dtype"])]
    n_params = int(sum(w["size"] for w in params))
    known = [w for w in params if w["sparsity"] is not None]
    zeros = sum(w["sparsity"] * w["size"] for w in known)
    n_known = sum(w["size"] for w in known)
    return {
        "params": n_params,
        "weight_bytes": int(sum(w["nbytes"] for w in weights.values())),
        "macs": int(sum(l["macs"] or 0 for l in layers)),
        "sparsity": zeros / n_known if n_known else 0.0,
        "layers": layers,
    }


def conv_breakdown(layers: list[dict]) -> dict:
    kinds = collections.Counter(l.get("kind") for l in layers if l["op"] == "Conv" and l.get("kind"))
    grouped = collections.Counter(l["groups"] for l in layers if l.get("kind") == "grouped")
    return {
        "dense": kinds.get("dense", 0),
        "pointwise": kinds.get("pointwise", 0),
        "depthwise": kinds.get("depthwise", 0),
        "grouped": kinds.get("grouped", 0),
        "grouped_by_groups": {str(g): n for g, n in sorted(grouped.items())},
    }


def _unsupported(model: onnx.ModelProto) -> dict:
    from edgec import codegen

    finder = getattr(codegen, "unsupported_nodes", None)
    if finder is None:
        return {"checked": False, "reason": "the code generator is not built yet", "nodes": []}
    return {"checked": True, "nodes": [{"name": n, "op": op} for n, op in finder(model)]}


def _io(infos) -> list[dict]:
    return [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype} for t in infos]


def inspect_model(model: onnx.ModelProto, declared: onnx.ModelProto, path: str | Path) -> dict:
    """The `edgec inspect` document. `declared` is the file as written (dynamic dims), `model` resolved."""
    stats = model_stats(model)
    hist = collections.Counter(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
                               for n in declared.graph.node)
    return {
        "model": str(path),
        "ir_version": int(declared.ir_version),
        "opset": {(o.domain or "ai.onnx"): int(o.version) for o in declared.opset_import},
        "producer": " ".join(x for x in (declared.producer_name, declared.producer_version) if x),
        "inputs": [dict(io, declared_shape=list(d.shape)) for io, d in zip(_io(graph_inputs(model)), graph_inputs(declared))],
        "outputs": [dict(io, declared_shape=list(d.shape)) for io, d in zip(_io(graph_outputs(model)), graph_outputs(declared))],
        "nodes": len(declared.graph.node),
        "op_histogram": dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))),
        "params": stats["params"],
        "weight_bytes": stats["weight_bytes"],
        "macs": stats["macs"],
        "weight_sparsity": stats["sparsity"],
        "layers": stats["layers"],
        "conv_breakdown": conv_breakdown(stats["layers"]),
        "unsupported": _unsupported(model),
        "opset_resolved": opset_version(model),
    }
