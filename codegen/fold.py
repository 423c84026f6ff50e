"""Compile-time evaluation of nodes whose inputs are all known (shape arithmetic, constant sub-graphs)."""

from __future__ import annotations

import numpy as np
import onnx

from edgec.codegen.ir import Tensor
from edgec.errors import EdgecError

# Ops edgec only compiles when their result is known at compile time.
FOLD_ONLY = frozenset({"ConstantOfShape", "Range", "NonZero", "EyeLike", "OneHot"})


def _shape(t: Tensor, attrs: dict) -> np.ndarray:
    dims = list(t.shape)
    start, end = attrs.get("start", 0), attrs.get("end", len(dims))
    return np.array(dims[slice(start, end)], dtype=np.int64)


def evaluate_node(pn: onnx.NodeProto, ins: list[Tensor | None], attrs: dict, opset: int) -> list[np.ndarray]:
    """Run one node on constant inputs with onnx's reference evaluator."""
    if pn.op_type == "Shape":
        return [_shape(ins[0], attrs)]
    if pn.op_type == "Size":
        return [np.array(ins[0].size, dtype=np.int64)]
    from onnx.reference import ReferenceEvaluator

    feeds, names = {}, []
    for i, t in enumerate(ins):
        if t is None:
            names.append("")
            continue
        nm = f"in{i}"
        feeds[nm] = t.const
        names.append(nm)
    node = onnx.helper.make_node(pn.op_type, names, [f"out{i}" if o else "" for i, o in enumerate(pn.output)],
                                 domain=pn.domain)
    node.attribute.extend(pn.attribute)
    try:
        ev = ReferenceEvaluator(node, opsets={"": opset})
        outs = ev.run(None, feeds)
    except Exception as e:  # the evaluator raises assorted types
        raise EdgecError(f"could not evaluate constant node {pn.name or pn.op_type} ({pn.op_type}) at compile time: "
                         f"{str(e).splitlines()[0][:200] if str(e) else type(e).__name__}") from None
    return [np.asarray(o) for o in outs]
