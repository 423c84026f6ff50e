"""Small helpers for editing ONNX graphs: who produces and consumes what, weights by name, attributes."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from edgec.model import infer_shapes

DEFAULT_DOMAINS = ("", "ai.onnx")


def attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def set_attr(node: onnx.NodeProto, name: str, value) -> None:
    for i, a in enumerate(node.attribute):
        if a.name == name:
            del node.attribute[i]
            break
    node.attribute.append(helper.make_attribute(name, value))


def producers(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    return {o: n for n in model.graph.node for o in n.output if o}


def consumers(model: onnx.ModelProto) -> dict[str, list[onnx.NodeProto]]:
    out: dict[str, list[onnx.NodeProto]] = {}
    for n in model.graph.node:
        for i in n.input:
            if i:
                out.setdefault(i, []).append(n)
    return out


def output_names(model: onnx.ModelProto) -> set[str]:
    return {o.name for o in model.graph.output}


def initializers(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    return {t.name: t for t in model.graph.initializer}


def get_init(model: onnx.ModelProto, name: str) -> np.ndarray | None:
    for t in model.graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    return None


def set_init(model: onnx.ModelProto, name: str, arr: np.ndarray) -> None:
    """Replace (or add) an initializer, keeping its position."""
    new = numpy_helper.from_array(np.ascontiguousarray(arr), name)
    for i, t in enumerate(model.graph.initializer):
        if t.name == name:
            model.graph.initializer[i].CopyFrom(new)
            return
    model.graph.initializer.append(new)


def unique_name(model: onnx.ModelProto, base: str) -> str:
    used = {t.name for t in model.graph.initializer} | {o for n in model.graph.node for o in n.output}
    used |= {n.name for n in model.graph.node}
    name, k = base, 1
    while name in used:
        name, k = f"{base}_{k}", k + 1
    return name


def name_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Give every node a stable unique name (reports, skip lists and --keep-float refer to them)."""
    seen: set[str] = set()
    for i, n in enumerate(model.graph.node):
        if not n.name or n.name in seen:
            n.name = f"{n.op_type}_{i}"
            while n.name in seen:
                n.name += "_"
        seen.add(n.name)
    return model


def reshape_infer(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop stale intermediate shapes and infer them again (after an edit changed channel counts)."""
    del model.graph.value_info[:]
    return infer_shapes(model)


def is_weight_op(node: onnx.NodeProto) -> bool:
    return node.op_type in ("Conv", "ConvTranspose", "Gemm", "MatMul") and node.domain in DEFAULT_DOMAINS


def remove_unused_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    used = {i for n in model.graph.node for i in n.input} | output_names(model)
    removed = {t.name for t in model.graph.initializer if t.name not in used}
    keep = [t for t in model.graph.initializer if t.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)
    graph_in = [v for v in model.graph.input if v.name not in removed]
    del model.graph.input[:]
    model.graph.input.extend(graph_in)
    return model


def topo_sort(model: onnx.ModelProto) -> onnx.ModelProto:
    """Order nodes so each comes after its inputs' producers (edits may append nodes anywhere)."""
    ready = {t.name for t in model.graph.initializer} | {v.name for v in model.graph.input} | {""}
    pending, ordered = list(model.graph.node), []
    while pending:
        rest = []
        for n in pending:
            if all(i in ready for i in n.input):
                ordered.append(n)
                ready.update(n.output)
            else:
                rest.append(n)
        if len(rest) == len(pending):
            ordered.extend(rest)  # a cycle or a dangling input: leave it for the checker to report
            break
        pending = rest
    copies = [onnx.NodeProto() for _ in ordered]
    for c, n in zip(copies, ordered):
        c.CopyFrom(n)
    del model.graph.node[:]
    model.graph.node.extend(copies)
    return model


def weights_not_inputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """IR < 4 lists every weight as a graph input too; edgec treats weights as constants, so drop those inputs
    (and move to IR 4, where that is valid). Passes can then add or remove weights freely."""
    inits = {t.name for t in model.graph.initializer}
    if not any(v.name in inits for v in model.graph.input) and model.ir_version >= 4:
        return model
    keep = [v for v in model.graph.input if v.name not in inits]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    model.ir_version = max(model.ir_version, 4)
    return model


def keep_interface(model: onnx.ModelProto, interface: onnx.ModelProto) -> onnx.ModelProto:
    """model with the graph input and output declarations `interface` has (the model as loaded): a pass or
    onnxruntime's optimizer may narrow them to the shapes it saw, while the user's model accepted more.
    Intermediate shapes are inferred again so none contradicts the declared ones."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    declared = {v.name: v for v in list(interface.graph.input) + list(interface.graph.output)}
    for v in list(m.graph.input) + list(m.graph.output):
        d = declared.get(v.name)
        if d is not None and d.type.tensor_type.elem_type == v.type.tensor_type.elem_type:
            v.type.CopyFrom(d.type)
    del m.graph.value_info[:]
    return infer_shapes(m)
