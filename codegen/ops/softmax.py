"""Softmax / LogSoftmax along one axis (opset >= 13 semantics) via runtime_c/f32-softmax."""

from __future__ import annotations

import numpy as np

from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node
from edgec.codegen.registry import register
from edgec.errors import EdgecError


@register("Softmax", "LogSoftmax", inplace=True)
def emit_softmax(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    if x.dtype != np.float32:
        raise EdgecError(f"node {node.name} ({node.op}): only float32 is supported")
    r = max(len(x.shape), 1)
    axis = node.attr("axis", -1) % r
    shape = x.shape or (1,)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    ctx.require("f32-softmax/f32-softmax-scalar.h")
    ctx.note(algo="softmax")
    return (f"ec_f32_softmax_scalar({outer}u, {shape[axis]}u, {inner}u, {int(node.op == 'LogSoftmax')}, "
            f"{ctx.ptr(x)}, {ctx.ptr(y)});\n")
