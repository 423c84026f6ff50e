"""QDQ ONNX -> integer ops, before lowering: DequantizeLinear -> op -> QuantizeLinear becomes one
integer node, so int8 data stays int8 between layers and Quantize/Dequantize remain only at the
edges of int8 regions (where a float op or a graph input/output needs floats).

Patterns (x from a DequantizeLinear of an activation, w/bias from DequantizeLinear of constants,
the op's only consumer a QuantizeLinear with per-tensor parameters):
    Conv [-> Relu]         -> QLinearConv              (standard op; weights int8, zero point 0)
    MatMul [-> Relu]       -> QLinearMatMul            (standard op)
    Gemm [-> Relu]         -> EcQGemm                  (edgec-internal: QLinearMatMul + bias, transB)
    Add [-> Relu]          -> EcQAdd                   (same-shape operands)
    Mul                    -> EcQMul                   (same shape, or [N,C,H,W] x [N,C,1,1] as in SE blocks)
    GlobalAveragePool      -> EcQGlobalAveragePool
    MaxPool                -> EcQMaxPool               (input and output share scale / zero point)
    Flatten/Reshape/Squeeze/Unsqueeze/Transpose        (same parameters) run on the int8 tensor
Before that, float islands that are elementwise functions of one int8 tensor (HardSwish, Sigmoid,
requantization) become 256-entry tables (codegen/ops/qlut.py); a MaxPool after such a non-decreasing
chain first moves before it, onto the int8 tensor (_pool_first).
Anything else keeps its DequantizeLinear / QuantizeLinear pair and runs in float. QOperator models
(com.microsoft QLinearAdd, QGemm, ...) are first rewritten into this QDQ form (codegen/ops/qop.py).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import onnx
from onnx import helper, numpy_helper

from edgec.codegen.ops.qlut import fuse_concats, fuse_luts
from edgec.codegen.ops.qop import qoperator_to_qdq
from edgec.errors import EdgecError
from edgec.model import constant_tensors, tensor_shapes

VIEW_OPS = ("Flatten", "Reshape", "Squeeze", "Unsqueeze", "Transpose")


class _Graph:
    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.consts = constant_tensors(model)
        self.shapes = tensor_shapes(model)
        # one list of node objects: protobuf wrappers are not stable across iterations, ids must be
        self.nodes = list(model.graph.node)
        self.prod = {o: n for n in self.nodes for o in n.output}
        self.users = defaultdict(list)
        for n in self.nodes:
            for i in n.input:
                self.users[i].append(n)
        self.outputs = {o.name for o in model.graph.output}
        self.new_inits: list[onnx.TensorProto] = []

    def const(self, name: str):
        return self.consts.get(name)

    def dq_act(self, name: str):
        """(q, scale, zp) names when name = DequantizeLinear(activation) with per-tensor parameters."""
        n = self.prod.get(name)
        if n is None or n.op_type != "DequantizeLinear" or len(n.input) < 3 or n.input[0] in self.consts:
            return None
        s, z = self.const(n.input[1]), self.const(n.input[2])
        if s is None or z is None or s.size != 1 or z.size != 1:
            return None
        return list(n.input[:3])

    def dq_weight(self, name: str):
        """(q, scale, zp) names when name = DequantizeLinear(constant int8, zero point 0)."""
        n = self.prod.get(name)
        if n is None or n.op_type != "DequantizeLinear" or len(n.input) < 3:
            return None
        q, s, z = (self.const(i) for i in n.input[:3])
        if q is None or s is None or z is None or q.dtype != np.int8 or np.any(z != 0):
            return None
        return list(n.input[:3]), q, s

    def sole_q(self, name: str):
        """The QuantizeLinear that is the only consumer of name (per-tensor parameters)."""
        us = self.users.get(name, [])
        if len(us) != 1 or name in self.outputs or us[0].op_type != "QuantizeLinear" or len(us[0].input) < 3:
            return None
        q = us[0]
        s, z = self.const(q.input[1]), self.const(q.input[2])
        if s is None or z is None or s.size != 1 or z.size != 1:
            return None
        return q

    def after_relu(self, name: str):
        """(Q node, act) for op -> Q or op -> Relu -> Q."""
        q = self.sole_q(name)
        if q is not None:
            return q, None
        us = self.users.get(name, [])
        if len(us) == 1 and us[0].op_type == "Relu" and name not in self.outputs:
            q = self.sole_q(us[0].output[0])
            if q is not None:
                return q, us[0]
        return None, None

    def same_params(self, a: list[str], b: list[str]) -> bool:
        return all(np.array_equal(self.const(x), self.const(y)) and self.const(x).dtype == self.const(y).dtype
                   for x, y in zip(a, b))

    def init(self, name: str, arr: np.ndarray) -> str:
        self.new_inits.append(numpy_helper.from_array(arr, name))
        self.consts[name] = arr
        return name


def _bias(g: _Graph, name: str | None, x_scale: np.ndarray, w_scale: np.ndarray, tag: str) -> list[str]:
    """int32 bias input: the quantized constant of a DequantizeLinear, or a float bias quantized here."""
    if not name:
        return []
    n = g.prod.get(name)
    if n is not None and n.op_type == "DequantizeLinear" and g.const(n.input[0]) is not None \
            and g.const(n.input[0]).dtype == np.int32:
        return [n.input[0]]
    b = g.const(name)
    if b is None:
        return None
    scale = (np.float32(x_scale.reshape(-1)[0]) * w_scale.astype(np.float32)).reshape(-1)
    return [g.init(f"{tag}__bias_q", np.round(b.astype(np.float64) / scale).astype(np.int32))]


def _fuse_linear(g: _Graph, n: onnx.NodeProto):
    x = g.dq_act(n.input[0])
    wq = g.dq_weight(n.input[1]) if len(n.input) > 1 else None
    if x is None or wq is None:
        return None
    q, relu = g.after_relu(n.output[0])
    if q is None:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
    (wn, ws, wz), _, w_scale = wq
    bias = _bias(g, n.input[2] if len(n.input) > 2 else None, g.const(x[1]), w_scale, n.output[0])
    if bias is None:
        return None
    if n.op_type == "Conv":
        op, ins = "QLinearConv", x + [wn, ws, wz] + list(q.input[1:3]) + bias
    elif n.op_type == "MatMul" and not bias:
        op, ins = "QLinearMatMul", x + [wn, ws, wz] + list(q.input[1:3])
    elif n.op_type == "Gemm" and attrs.get("transA", 0) == 0 and attrs.get("alpha", 1.0) == 1.0 \
            and attrs.get("beta", 1.0) == 1.0:
        op, ins = "EcQGemm", x + [wn, ws, wz] + list(q.input[1:3]) + bias
        attrs = {"transB": attrs.get("transB", 0)}
    else:
        return None
    if relu is not None:
        attrs["ec_act"] = "relu"
    node = helper.make_node(op, ins, [q.output[0]], name=n.name or n.output[0], **attrs)
    return node, [n, q] + ([relu] if relu is not None else [])


def _fuse_other(g: _Graph, n: onnx.NodeProto):
    if n.op_type == "Add" or (n.op_type == "Sum" and len(n.input) == 2):  # Sum: older ResNets' residual add
        a, b = g.dq_act(n.input[0]), g.dq_act(n.input[1])
        q, relu = g.after_relu(n.output[0])
        sa, sb = g.shapes.get(n.input[0]), g.shapes.get(n.input[1])
        if a is None or b is None or q is None or sa is None or sb is None or sa.shape != sb.shape:
            return None
        attrs = {"ec_act": "relu"} if relu is not None else {}
        node = helper.make_node("EcQAdd", a + b + list(q.input[1:3]), [q.output[0]], name=n.name or n.output[0], **attrs)
        return node, [n, q] + ([relu] if relu is not None else [])
    if n.op_type == "Mul":
        return _fuse_mul(g, n)
    info = g.shapes.get(n.input[0]) if n.input else None
    if n.op_type == "MaxPool" and len(n.output) == 1 and info is not None and info.dtype in ("int8", "uint8"):
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        return helper.make_node("EcQMaxPool", [n.input[0]], [n.output[0]], name=n.name or n.output[0], **attrs), [n]
    x = g.dq_act(n.input[0]) if n.input else None
    q = g.sole_q(n.output[0]) if x is not None else None
    if q is None:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
    name = n.name or n.output[0]
    if n.op_type == "GlobalAveragePool":
        return helper.make_node("EcQGlobalAveragePool", x + list(q.input[1:3]), [q.output[0]], name=name), [n, q]
    if not g.same_params(x[1:3], list(q.input[1:3])):
        return None
    if n.op_type == "MaxPool" and len(n.output) == 1:
        return helper.make_node("EcQMaxPool", [x[0]], [q.output[0]], name=name, **attrs), [n, q]
    if n.op_type in VIEW_OPS and all(g.const(i) is not None for i in n.input[1:] if i):
        return helper.make_node(n.op_type, [x[0], *n.input[1:]], [q.output[0]], name=name, **attrs), [n, q]
    return None


def _fuse_mul(g: _Graph, n: onnx.NodeProto):
    a, b = g.dq_act(n.input[0]), g.dq_act(n.input[1])
    q = g.sole_q(n.output[0])
    sa, sb = g.shapes.get(n.input[0]), g.shapes.get(n.input[1])
    if a is None or b is None or q is None or sa is None or sb is None:
        return None
    if len(sb.shape) > len(sa.shape) or (sa.shape != sb.shape and len(sa.shape) == len(sb.shape)
                                         and int(np.prod(sa.shape)) < int(np.prod(sb.shape))):
        a, b, sa, sb = b, a, sb, sa
    per_outer = len(sa.shape) == len(sb.shape) == 4 and sb.shape[:2] == sa.shape[:2] and sb.shape[2:] == (1, 1)
    if sa.shape != sb.shape and not per_outer:
        return None
    node = helper.make_node("EcQMul", a + b + list(q.input[1:3]), [q.output[0]], name=n.name or n.output[0])
    return node, [n, q]


def _check_int8_io(model: onnx.ModelProto) -> None:
    """int8 tensors live in the u8 domain (value + 128) inside the C code: refuse int8 graph inputs or
    outputs of quantized ops rather than hand back shifted values."""
    q_ops = {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul"}
    touched = {t for n in model.graph.node if n.op_type in q_ops for t in list(n.input) + list(n.output)}
    inits = {i.name for i in model.graph.initializer}
    bad = [v.name for v in list(model.graph.input) + list(model.graph.output)
           if v.type.tensor_type.elem_type == onnx.TensorProto.INT8 and v.name in touched and v.name not in inits]
    if bad:
        raise EdgecError(f"int8 graph input/output {bad[0]!r} of a quantized op is not supported; "
                         "keep model inputs and outputs float (as quantize_static does)")


def _prune(model: onnx.ModelProto) -> None:
    """Drop nodes whose outputs nobody reads (the DequantizeLinear nodes bypassed by fusion)."""
    outs = {o.name for o in model.graph.output}
    while True:
        used = {i for n in model.graph.node for i in n.input} | outs
        keep = [n for n in model.graph.node if any(o in used for o in n.output if o)]
        if len(keep) == len(model.graph.node):
            return
        del model.graph.node[:]
        model.graph.node.extend(keep)


def _rising(n: onnx.NodeProto, consts: dict) -> bool:
    """n is an elementwise non-decreasing function of its first input (other operands scalar constants)."""
    c = [consts.get(i) for i in n.input[1:] if i]
    if any(v is None or v.size != 1 for v in c):
        return False
    if n.op_type == "DequantizeLinear":
        return len(c) >= 1 and float(c[0].reshape(-1)[0]) > 0
    if n.op_type in ("Div", "Mul"):
        return len(c) == 1 and float(c[0].reshape(-1)[0]) > 0
    if n.op_type in ("Add", "Sub"):
        return len(c) == 1
    return n.op_type in ("Relu", "Clip", "Identity")


def _pool_first(model: onnx.ModelProto) -> bool:
    """DequantizeLinear(u8 t) -> non-decreasing elementwise ops -> MaxPool becomes MaxPool(t) -> the same ops:
    max commutes with a non-decreasing function exactly (float rounding is monotonic too; padding never
    wins either way), so the pool runs on bytes and the chain, now ending at a QuantizeLinear, can become
    a table (ppocr cls's last HardSwish: DequantizeLinear -> Div -> MaxPool in float)."""
    if next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0) < 12:
        return False  # MaxPool takes 8-bit inputs from opset 12
    consts = constant_tensors(model)
    nodes = list(model.graph.node)
    prod = {o: n for n in nodes for o in n.output}
    users = defaultdict(list)
    for n in nodes:
        for i in n.input:
            users[i].append(n)
    outs = {o.name for o in model.graph.output}
    changed = False
    for m in nodes:
        if m.op_type != "MaxPool" or len(m.output) != 1 or not m.input:
            continue
        chain, t = [], m.input[0]
        while t in prod and t not in outs and len(users[t]) == 1 and _rising(prod[t], consts):
            chain.append(prod[t])
            if prod[t].op_type == "DequantizeLinear":
                break
            t = prod[t].input[0]
        if len(chain) < 2 or chain[-1].op_type != "DequantizeLinear" or chain[-1].input[0] in consts:
            continue  # a lone DequantizeLinear -> MaxPool is EcQMaxPool's case already
        src, y = chain[-1].input[0], m.output[0]
        pooled = f"{y}__u8pool"
        new = [helper.make_node("MaxPool", [src], [pooled], name=(m.name or y) + "__u8",
                                **{a.name: helper.get_attribute_value(a) for a in m.attribute})]
        prev = pooled
        for k, n in enumerate(reversed(chain)):
            out = y if k == len(chain) - 1 else f"{n.output[0]}__pooled"
            new.append(helper.make_node(n.op_type, [prev, *n.input[1:]], [out], name=(n.name or out) + "__pooled",
                                        **{a.name: helper.get_attribute_value(a) for a in n.attribute}))
            prev = out
        at = nodes.index(m)
        gone = {id(x) for x in chain} | {id(m)}
        nodes = [x for x in nodes[:at] if id(x) not in gone] + new + [x for x in nodes[at + 1:] if id(x) not in gone]
        stale = {n.output[0] for n in chain}
        keep = [v for v in model.graph.value_info if v.name not in stale]
        del model.graph.value_info[:]
        model.graph.value_info.extend(keep)
        changed = True
    if changed:
        del model.graph.node[:]
        model.graph.node.extend(nodes)
    return changed


def lower_qdq(model: onnx.ModelProto) -> onnx.ModelProto:
    """Rewrite QDQ regions into integer nodes (returns a new model; float models come back unchanged)."""
    model = qoperator_to_qdq(model)
    _check_int8_io(model)
    if not any(n.op_type == "DequantizeLinear" for n in model.graph.node):
        return model
    model = onnx.ModelProto.FromString(model.SerializeToString())
    if _pool_first(model):
        model = onnx.shape_inference.infer_shapes(model)
    g = _Graph(model)
    if fuse_luts(model, g.consts, g.shapes, g.new_inits):
        model.graph.initializer.extend(g.new_inits)
        _prune(model)
        g = _Graph(model)
    if fuse_concats(model, g.consts, g.shapes, g.new_inits):
        model.graph.initializer.extend(g.new_inits)
        _prune(model)
        g = _Graph(model)
    replaced: dict[int, onnx.NodeProto] = {}
    dropped: set[int] = set()
    for n in g.nodes:
        if id(n) in dropped:
            continue
        fused = _fuse_linear(g, n) if n.op_type in ("Conv", "MatMul", "Gemm") else _fuse_other(g, n)
        if fused is None:
            continue
        node, gone = fused
        replaced[id(n)] = node
        dropped.update(id(x) for x in gone if x is not n)
    nodes = [replaced.get(id(n), n) for n in g.nodes if id(n) not in dropped]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    model.graph.initializer.extend(g.new_inits)
    _prune(model)
    return model
