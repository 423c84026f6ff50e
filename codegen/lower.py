"""ONNX -> IR lowering, as a short list of named passes.

    load      edgec.model.load_model: checks, opset >= MIN_OPSET, static shapes, shape inference
    build     ONNX nodes -> IR nodes; constant sub-graphs (shape arithmetic) evaluated at compile time;
              Identity/Dropout become aliases
    fold_bn   BatchNormalization after Conv/ConvTranspose/Gemm folded into their weights and bias
    affine    Mul/Add by a scalar or per-channel constant after Conv/ConvTranspose/Gemm folded likewise
              (PP-LCNet's learnable affine blocks), so the activation after them becomes an epilogue
    layernorm the decomposed ReduceMean/Sub/Pow/Sqrt/Div LayerNorm pattern becomes one node
    hardswish x * Clip(x + 3, 0, 6) / 6 becomes HardSwish (then an epilogue like any activation)
    gelu      x * (1 + Erf(x / sqrt 2)) * 0.5 becomes Gelu
    fuse      activations and same-shape residual Adds moved into epilogue-capable producers
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from edgec.codegen import registry
from edgec.codegen.fold import evaluate_node, FOLD_ONLY
from edgec.codegen.fuse import fold_batchnorm, fuse_epilogues
from edgec.codegen.ir import Graph, Node, Tensor
from edgec.codegen.patterns import fuse_gelu, fuse_hardswish, fuse_layernorm
from edgec.errors import EdgecError
from edgec.model import constant_tensors, load_model, opset_version, shape_problem, tensor_shapes

MIN_OPSET = 13
ALIAS_OPS = {"Identity", "Dropout"}


def lower_file(path: str | Path, input_shapes: dict | None = None) -> Graph:
    path = Path(path)
    model = load_model(path, input_shapes, min_opset=MIN_OPSET)
    graph = lower_model(model, name=path.stem)
    graph.source.update(path=str(path), sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    return graph


def lower_model(model: onnx.ModelProto, name: str = "model") -> Graph:
    """Lower a loaded (static-shape, shape-inferred) model; raises listing every unsupported node."""
    from edgec.codegen import unsupported_nodes

    from edgec.codegen.ops.f16 import lower_fp16
    from edgec.codegen.ops.qdq import lower_qdq
    model = lower_qdq(model)  # int8 QDQ regions -> integer nodes; float models unchanged
    model = lower_fp16(model)  # fp16 graphs -> fp32 compute with fp16-stored weights
    bad = unsupported_nodes(model)
    if bad:
        listed = ", ".join(f"{n} ({op})" for n, op in bad[:20]) + (" ..." if len(bad) > 20 else "")
        raise EdgecError(f"{len(bad)} node(s) use ops edgec cannot compile: {listed}")
    graph = _build(model, name)
    for pass_fn in (fold_batchnorm, fold_affine, fuse_layernorm, fuse_hardswish, fuse_gelu, fuse_epilogues,
                    _copy_odd_outputs):
        graph = pass_fn(graph)
    return graph


def decode_attrs(node: onnx.NodeProto) -> dict:
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode() for x in v]
        elif isinstance(v, onnx.TensorProto):
            v = numpy_helper.to_array(v)
        out[a.name] = v
    return out


class _Builder:
    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.opset = opset_version(model)
        self.infos = tensor_shapes(model)
        self.tensors: dict[str, Tensor] = {}
        for cname, arr in constant_tensors(model).items():
            self.tensors[cname] = Tensor(cname, arr.shape, arr.dtype, arr)

    def activation(self, name: str) -> Tensor:
        if name in self.tensors:
            return self.tensors[name]
        info = self.infos.get(name)
        if info is None or not info.is_static():
            why = shape_problem(self.model)
            if why:
                raise EdgecError(f"tensor {name!r} has no static shape: at these input shapes {why}")
            raise EdgecError(f"tensor {name!r} has no static shape after shape inference; pass --input-shape")
        try:
            dt = np.dtype(info.dtype)
        except TypeError:
            raise EdgecError(f"tensor {name!r} has dtype {info.dtype}, which edgec does not compile") from None
        t = Tensor(name, info.shape, dt)
        self.tensors[name] = t
        return t

    def get(self, name: str) -> Tensor | None:
        if name == "":
            return None
        if name not in self.tensors:
            raise EdgecError(f"tensor {name!r} is used before it is produced (graph not topologically sorted)")
        return self.tensors[name]


def _build(model: onnx.ModelProto, name: str) -> Graph:
    b = _Builder(model)
    from edgec.model import graph_inputs
    inputs = [b.activation(i.name) for i in graph_inputs(model)]
    nodes: list[Node] = []
    taken: dict[str, int] = {}  # name -> next suffix to try
    for idx, pn in enumerate(model.graph.node):
        label = pn.name or f"{pn.op_type}_{idx}"
        # ONNX node names may repeat or be empty; codegen keys per-node state (packed weights) by name.
        nname, k = label, taken.get(label, 1)
        while nname in taken:
            nname, k = f"{label}#{k}", k + 1
        taken[label], taken[nname] = k, 1
        if pn.op_type == "Constant":
            continue
        ins = [b.get(x) for x in pn.input]
        if pn.op_type in ALIAS_OPS and ins and ins[0] is not None:
            _alias(b, pn, ins, nname)
            continue
        attrs = decode_attrs(pn)
        if _foldable(pn, ins):
            values = evaluate_node(pn, ins, attrs, b.opset)
            for oname, val in zip(pn.output, values):
                if oname:
                    b.tensors[oname] = Tensor(oname, np.shape(val), np.asarray(val).dtype, np.asarray(val))
            continue
        outs = [b.activation(o) if o else None for o in pn.output]
        node = Node(nname, pn.op_type, ins, [o for o in outs], attrs, onnx_names=[label])
        nodes.append(node)
    outputs = [b.get(o.name) for o in model.graph.output]
    g = Graph(name, inputs, outputs, nodes)
    g.source.update(opset=b.opset, output_names=[o.name for o in model.graph.output],
                    input_names=[i.name for i in inputs])
    return _drop_unused_outputs(g)


def _alias(b: _Builder, pn: onnx.NodeProto, ins: list, nname: str) -> None:
    """Identity/Dropout at inference: output 0 is the input; Dropout's mask is all true."""
    if pn.op_type == "Dropout":
        train = ins[2] if len(ins) > 2 else None
        if train is not None and (not train.is_const or bool(train.const.reshape(-1)[0])):
            raise EdgecError(f"node {nname} (Dropout) runs in training mode; edgec compiles inference graphs only")
        if len(pn.output) > 1 and pn.output[1]:
            b.tensors[pn.output[1]] = Tensor(pn.output[1], ins[0].shape, np.bool_, np.ones(ins[0].shape, bool))
    b.tensors[pn.output[0]] = ins[0]


def _foldable(pn: onnx.NodeProto, ins: list[Tensor | None]) -> bool:
    if pn.op_type in ("Shape", "Size"):
        return True
    if pn.op_type in ("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial"):
        return False
    return all(t is None or t.is_const for t in ins) and (bool(ins) or pn.op_type in FOLD_ONLY)


def _drop_unused_outputs(g: Graph) -> Graph:
    """Optional outputs nobody reads (BatchNorm running stats, Dropout masks) become None."""
    used = {id(t) for n in g.nodes for t in n.operands()} | {id(t) for t in g.outputs}
    for n in g.nodes:
        n.outputs = [o if (i == 0 or (o is not None and id(o) in used)) else None for i, o in enumerate(n.outputs)]
    return g


def _copy_odd_outputs(g: Graph) -> Graph:
    """A graph output that is an input, a constant or repeated gets its own copy node."""
    seen: set[int] = set()
    inputs = {id(t) for t in g.inputs}
    for i, t in enumerate(g.outputs):
        if t.is_const or id(t) in inputs or id(t) in seen:
            new = Tensor(g.source["output_names"][i] + "__copy", t.shape, t.dtype)
            g.nodes.append(Node(f"copy_{new.name}", "Identity", [t], [new], onnx_names=[]))
            g.outputs[i] = new
        seen.add(id(g.outputs[i]))
    return g


def supported_ops() -> frozenset[str]:
    return registry.registered_ops() | ALIAS_OPS | FOLD_ONLY | {"Constant", "Shape", "Size"}


def fold_affine(g: Graph) -> Graph:
    """Conv/ConvTranspose/Gemm -> Mul or Add by a constant that is the same along every axis but the
    producer's channel axis becomes one node: the scale goes into the weights and bias, the shift into the bias."""
    from edgec.codegen.fuse import _fold_into

    changed = True
    while changed:
        changed = False
        users, prod = g.consumers(), g.producers()
        outs = {id(t) for t in g.outputs}
        for n in g.nodes:
            if n.op not in ("Mul", "Add") or len(n.inputs) != 2 or not n.epilogue.empty:
                continue
            for x, k in ((n.inputs[0], n.inputs[1]), (n.inputs[1], n.inputs[0])):
                p = prod.get(id(x))
                if (p is None or k is None or not k.is_const or x.is_const
                        or len(users.get(id(x), [])) != 1 or id(x) in outs):
                    continue
                per_channel = _channel_vector(p, x, k, n.outputs[0])
                if per_channel is None:
                    continue
                m = per_channel.shape[0]
                s, shift = (per_channel, np.zeros(m)) if n.op == "Mul" else (np.ones(m), per_channel)
                if _fold_into(p, s, shift):
                    p.outputs[0] = n.outputs[0]
                    p.onnx_names += n.onnx_names
                    g.nodes.remove(n)
                    changed = True
                break
            if changed:
                break
    return g


def _channel_vector(p: Node, x: Tensor, k: Tensor, y: Tensor) -> np.ndarray | None:
    """k as a float64 vector over p's output channels if Mul/Add(x, k) scales/shifts each channel by one value."""
    if p.op not in ("Conv", "ConvTranspose", "Gemm") or not p.epilogue.empty or len(p.outputs) != 1:
        return None
    w, b = p.input(1), p.input(2)
    if w is None or not w.is_const or (b is not None and not b.is_const):
        return None
    if not (x.dtype == k.dtype == w.dtype == np.float32) or y.shape != x.shape:
        return None  # the constant must not broadcast the result to a bigger shape
    if len(x.shape) < 2 or len(k.shape) > len(x.shape):
        return None
    axis = 1 if p.op != "Gemm" else len(x.shape) - 1
    m = x.shape[axis]
    kshape = (1,) * (len(x.shape) - len(k.shape)) + tuple(k.shape)
    if any(d != 1 for i, d in enumerate(kshape) if i != axis) or kshape[axis] not in (1, m):
        return None
    return np.broadcast_to(k.const.astype(np.float64).reshape(-1), (m,)).copy()
