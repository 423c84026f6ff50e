"""Float islands that are elementwise functions of one int8 tensor become a 256-entry table.

In a QDQ model, HardSwish / Sigmoid / Clip / requantization chains run as
DequantizeLinear -> float ops (with their own Q/DQ pairs) -> QuantizeLinear. When every float value
in the chain depends on the same int8 tensor elementwise (other operands scalar constants), the
int8 output is a function of one byte: onnxruntime evaluates the chain on all 256 inputs at compile
time and the node becomes EcQLut (one table lookup per element, exactly onnxruntime's float result).
With per-channel constants (a standalone BatchNormalization, Mul/Add by a [C,1,1] constant) the
output is a function of the byte and the channel: one table per channel, EcQLut's table is [C, 256].
A Concat of dequantized int8 tensors quantized again (SqueezeNet's fire modules: each input has its own
scale) becomes a Concat of the int8 tensors, each requantized to the output's scale by a table (none
where it already has it): fuse_concats.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Relu", "Clip", "HardSigmoid", "HardSwish", "Sigmoid", "Tanh",
               "LeakyRelu", "Max", "Min", "Abs", "Neg", "Exp", "Log", "Sqrt", "Pow", "Erf", "Softplus", "Elu",
               "Selu", "Identity"}


def _per_tensor(consts, n) -> bool:
    return all(i in consts and consts[i].size == 1 for i in n.input[1:3] if i)


def _channelwise(c: np.ndarray, shape) -> bool:
    """c broadcasts over shape [N, C, ...] varying at most along axis 1 (a per-channel operand)."""
    if c.size == 1:
        return True
    if len(shape) < 2 or c.ndim > len(shape):
        return False
    full = (1,) * (len(shape) - c.ndim) + tuple(c.shape)
    return full[1] == shape[1] and all(d == 1 for k, d in enumerate(full) if k != 1)


def _bn_ok(n, consts, shape) -> bool:
    attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
    return len(n.output) == 1 and not attrs.get("training_mode", 0) and len(shape) >= 2 and \
        all(i in consts and consts[i].shape == (shape[1],) for i in n.input[1:5])


def _cones(model, nodes, consts, shapes):
    """int8 tensor -> (source int8 tensor, nodes computing it from the source) for LUT-able values."""
    fsrc: dict[str, tuple[str, list]] = {}
    isrc: dict[str, tuple[str, list]] = {}
    out = []
    for n in nodes:
        if n.op_type == "DequantizeLinear" and n.input[0] in consts and _per_tensor(consts, n):
            # a dequantized constant is a float constant
            z = consts[n.input[2]] if len(n.input) > 2 and n.input[2] else 0
            v = (consts[n.input[0]].astype(np.float32) - np.float32(z)) * consts[n.input[1]].astype(np.float32)
            consts[n.output[0]] = v.astype(np.float32)
        elif n.op_type == "DequantizeLinear" and n.input[0] not in consts and _per_tensor(consts, n):
            s, cone = isrc.get(n.input[0], (n.input[0], []))
            fsrc[n.output[0]] = (s, cone + [n])
        elif (n.op_type in ELEMENTWISE or n.op_type == "BatchNormalization") and len(n.output) == 1:
            vs = [fsrc.get(i) for i in n.input if i and i not in consts]
            ok = vs and all(v is not None and v[0] == vs[0][0] for v in vs)
            src_shape = shapes.get(vs[0][0]).shape if ok and shapes.get(vs[0][0]) else None
            out_info = shapes.get(n.output[0])
            if src_shape is not None:
                ok = _bn_ok(n, consts, src_shape) if n.op_type == "BatchNormalization" else \
                    all(_channelwise(consts[i], src_shape) for i in n.input if i in consts)
            if ok and out_info is not None and out_info.shape == src_shape:
                cone = {id(x): x for v in vs for x in v[1]}
                fsrc[n.output[0]] = (vs[0][0], list(cone.values()) + [n])
        elif n.op_type == "QuantizeLinear" and n.input[0] in fsrc and _per_tensor(consts, n):
            s, cone = fsrc[n.input[0]]
            isrc[n.output[0]] = (s, cone + [n])
            if any(x.op_type not in ("QuantizeLinear", "DequantizeLinear") for x in cone):
                out.append((n, s, cone + [n]))
    return out


def _table(model, all_nodes, consts, shapes, src: str, cone: list, q) -> np.ndarray:
    """Run the chain in onnxruntime on all 256 source values; the result in the u8 domain."""
    order = {id(n): i for i, n in enumerate(all_nodes)}
    nodes = sorted({id(n): n for n in cone}.values(), key=lambda n: order[id(n)])
    sdt = np.dtype(shapes[src].dtype)
    used = {i for n in nodes for i in n.input if i in consts}
    inits = [numpy_helper.from_array(np.asarray(consts[k]), k) for k in sorted(used)]
    tt = helper.np_dtype_to_tensor_dtype(sdt)
    odt = helper.np_dtype_to_tensor_dtype(np.dtype(consts[q.input[2]].dtype)) if len(q.input) > 2 else 2
    u = np.arange(256)
    x = (u - 128).astype(np.int8) if sdt == np.int8 else u.astype(np.uint8)
    shape = shapes[src].shape
    per_channel = any(consts[k].size > 1 for k in used)
    if per_channel:  # all 256 values in every channel: the batch axis carries them, [256, C, 1, ...]
        dims = [256, shape[1]] + [1] * (len(shape) - 2)
        x = np.broadcast_to(x.reshape(256, *[1] * (len(shape) - 1)), dims).copy()
    else:
        dims = [256]
    g = helper.make_graph(nodes, "lut", [helper.make_tensor_value_info(src, tt, dims)],
                          [helper.make_tensor_value_info(q.output[0], odt, dims)], inits)
    m = helper.make_model(g, opset_imports=list(model.opset_import), ir_version=min(model.ir_version, 8))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the float ops as written
    y = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {src: x})[0]
    y = y.reshape(256, -1).T  # [C, 256] per channel, else [1, 256]
    y = (y.astype(np.int16) + (128 if y.dtype == np.int8 else 0)).astype(np.uint8)  # the u8 domain, both forms
    return np.ascontiguousarray(y.reshape(shape[1], 256) if per_channel else y.reshape(256))


def fuse_luts(model: onnx.ModelProto, consts: dict, shapes: dict, new_inits: list) -> int:
    """Replace each LUT-able QuantizeLinear by EcQLut(source, table) in place; returns how many."""
    all_nodes = list(model.graph.node)  # wrappers kept alive: ids stay unique
    consts = dict(consts)  # folded constants are the tables' business only
    found = _cones(model, all_nodes, consts, shapes)
    repl = {}
    for q, src, cone in found:
        lut = _table(model, all_nodes, consts, shapes, src, cone, q)
        name = f"{q.output[0]}__lut"
        new_inits.append(numpy_helper.from_array(lut, name))
        repl[id(q)] = helper.make_node("EcQLut", [src, name], [q.output[0]], name=q.name or q.output[0])
    nodes = [repl.get(id(n), n) for n in all_nodes]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return len(repl)


def fuse_concats(model: onnx.ModelProto, consts: dict, shapes: dict, new_inits: list) -> int:
    """QuantizeLinear(Concat(DequantizeLinear(x_i), ...)), every scale and zero point per-tensor, the float
    values used by nothing else: Concat(EcQLut(x_i, table_i), ...) on the int8 tensors, table_i onnxruntime's
    DequantizeLinear -> QuantizeLinear of x_i's 256 values (x_i itself where its scale and zero point are the
    output's). Returns how many Concats were rewritten; the float nodes are left for pruning."""
    nodes = list(model.graph.node)
    prod = {o: n for n in nodes for o in n.output}
    uses: dict[str, int] = {}
    for n in nodes:
        for i in n.input:
            uses[i] = uses.get(i, 0) + 1
    for o in model.graph.output:
        uses[o.name] = uses.get(o.name, 0) + 2
    repl, infos = {}, []
    for q in nodes:
        c = prod.get(q.input[0]) if q.op_type == "QuantizeLinear" and _per_tensor(consts, q) else None
        if c is None or c.op_type != "Concat" or uses.get(c.output[0]) != 1 or len(q.input) < 3:
            continue
        dqs = [prod.get(i) for i in c.input]
        qdt = consts[q.input[2]].dtype
        if not all(d is not None and d.op_type == "DequantizeLinear" and d.input[0] not in consts and
                   _per_tensor(consts, d) and len(d.input) > 2 and uses.get(d.output[0]) == 1 and
                   shapes.get(d.input[0]) is not None and np.dtype(shapes[d.input[0]].dtype) == qdt for d in dqs):
            continue
        ins, new = [], []
        for k, d in enumerate(dqs):
            if consts[d.input[1]].item() == consts[q.input[1]].item() and \
                    consts[d.input[2]].item() == consts[q.input[2]].item():
                ins.append(d.input[0])
                continue
            requant = helper.make_node("QuantizeLinear", [d.output[0], q.input[1], q.input[2]],
                                       [f"{c.output[0]}__in{k}"])
            lut = _table(model, nodes + [requant], consts, shapes, d.input[0], [d, requant], requant)
            name = f"{c.output[0]}__in{k}__lut"
            new_inits.append(numpy_helper.from_array(lut, name))
            new.append(helper.make_node("EcQLut", [d.input[0], name], requant.output, name=requant.output[0]))
            infos.append(helper.make_tensor_value_info(requant.output[0], helper.np_dtype_to_tensor_dtype(qdt),
                                                       list(shapes[d.input[0]].shape)))
            ins.append(requant.output[0])
        new.append(helper.make_node("Concat", ins, [q.output[0]], name=c.name or q.output[0],
                                    **{a.name: helper.get_attribute_value(a) for a in c.attribute}))
        repl[id(q)] = new
    if repl:
        out = []
        for n in nodes:
            out.extend(repl.get(id(n), [n]))
        del model.graph.node[:]
        model.graph.node.extend(out)
        model.graph.value_info.extend(infos)
    return len(repl)
