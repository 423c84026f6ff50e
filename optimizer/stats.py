"""Before/after numbers for the report: params, file size, MACs, weight sparsity, latency."""

from __future__ import annotations

import numpy as np
import onnx

from edgec.model import infer_shapes, with_static_shapes


def _model_stats(model: onnx.ModelProto) -> dict:
    try:
        from edgec.analysis import model_stats
    except ImportError:  # the shared analysis module is optional for the optimizer
        return {"params": None, "macs": None, "sparsity": None}
    return model_stats(model)


def weight_sparsity(model: onnx.ModelProto) -> float:
    """Zero fraction over Conv/Gemm/MatMul weights (what pruning targets), incl. int8 ones behind DequantizeLinear."""
    from edgec.optimizer.graph import get_init, producers

    prod = producers(model)
    zeros = total = 0
    for n in model.graph.node:
        if n.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul") or len(n.input) < 2:
            continue
        name = n.input[1]
        if name in prod and prod[name].op_type == "DequantizeLinear":
            name = prod[name].input[0]
        w = get_init(model, name)
        if w is not None:
            zeros, total = zeros + int(np.count_nonzero(w == 0)), total + w.size
    return zeros / total if total else 0.0


def stats(model: onnx.ModelProto, shapes: dict[str, list[int]] | None = None) -> dict:
    """shapes: input shapes to count MACs at, for a model whose inputs have symbolic dims."""
    try:
        inferred = with_static_shapes(model, shapes) if shapes else infer_shapes(model)
    except Exception:
        inferred = model
    s = _model_stats(inferred)
    return {"nodes": len(model.graph.node), "params": s.get("params"), "macs": s.get("macs"),
            "weight_sparsity": weight_sparsity(model), "size_bytes": model.ByteSize()}
