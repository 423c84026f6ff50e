"""ONNX -> standalone C project.

Pipeline (each stage a module): lower (ONNX -> IR, folding, fusion) -> memory (arena plan)
-> ops/* emitters through EmitContext -> printer (model.c, model.h, weights, Makefile,
runner, bench) -> build (make) -> verify (against onnxruntime).

Public API: compile_model, build_project, verify, unsupported_nodes, SUPPORTED_OPS, get_target.
"""

from __future__ import annotations

import onnx

from edgec.codegen.targets import Target, get_target, target_names

__all__ = ["compile_model", "build_project", "verify", "unsupported_nodes", "SUPPORTED_OPS", "get_target",
           "Target", "target_names", "Build"]


def unsupported_nodes(model: onnx.ModelProto) -> list[tuple[str, str]]:
    """(node name, op_type) of every node edgec cannot compile, in graph order.

    Nodes whose inputs are all known at compile time (shape arithmetic) are folded, so
    they count as supported whatever their op.
    """
    from edgec.codegen.fold import FOLD_ONLY
    from edgec.codegen.lower import supported_ops
    from edgec.model import constant_tensors

    ops = supported_ops()
    known = set(constant_tensors(model))
    bad = []
    for i, n in enumerate(model.graph.node):
        ins = [x for x in n.input if x]
        if n.op_type in ("Constant", "Shape", "Size") or (ins and all(x in known for x in ins)) \
                and n.domain in ("", "ai.onnx") and not n.op_type.startswith("Random"):
            known.update(o for o in n.output if o)
            continue
        if n.domain not in ("", "ai.onnx") or n.op_type not in ops or n.op_type in FOLD_ONLY:
            bad.append((n.name or f"{n.op_type}_{i}", n.op_type if n.domain in ("", "ai.onnx")
                        else f"{n.domain}.{n.op_type}"))
    return bad


def __getattr__(name: str):
    if name == "SUPPORTED_OPS":
        from edgec.codegen.lower import supported_ops
        return supported_ops()
    if name == "verify":
        from edgec.codegen.verifier import verify
        return verify
    if name in ("compile_model", "build_project", "Build"):
        from edgec.codegen import project
        return getattr(project, name)
    raise AttributeError(name)
