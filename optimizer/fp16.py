"""fp16: weights and activations in half precision, float32 inputs and outputs kept.

Built on onnxruntime.transformers.float16. The result is validated against fp32 (NaN/Inf, cosine below
the tolerance, or relative L2 error above 1%); when it breaks, the first node whose fp16 output goes wrong is kept in fp32 and the
conversion is redone, until the outputs hold. The list of nodes kept in fp32 goes into the report.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx

from edgec.errors import EdgecError
from edgec.optimizer.data import Dataset
from edgec.optimizer.graph import topo_sort
from edgec.optimizer.evaluate import fidelity, predict
from edgec.optimizer.runner import session, with_outputs

ALWAYS_FLOAT = ["Resize", "Range", "NonMaxSuppression", "TopK", "RandomNormal", "RandomUniform"]


def convert(model: onnx.ModelProto, block: list[str]) -> onnx.ModelProto:
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)
    try:
        h = convert_float_to_float16(model, keep_io_types=True, node_block_list=list(block),
                                     op_block_list=sorted(set(DEFAULT_OP_BLOCK_LIST) | set(ALWAYS_FLOAT)))
        return _drop_cast_pairs(topo_sort(h))  # the converter appends its input Casts at the end
    except Exception as e:
        raise EdgecError(f"fp16 conversion failed: {' '.join(str(e).split())[:300]}") from None
    finally:
        logging.getLogger().setLevel(level)


def _drop_cast_pairs(m: onnx.ModelProto) -> onnx.ModelProto:
    """fp32 -> fp16 -> fp32 Cast pairs between two fp32 nodes only lose range: read the fp32 tensor directly."""
    from edgec.optimizer.graph import attr, output_names, producers
    from edgec.optimizer.graph_passes import dead_nodes

    prod, outs = producers(m), output_names(m)
    for x in list(m.graph.node):
        y = prod.get(x.input[0]) if x.op_type == "Cast" else None
        if y is None or y.op_type != "Cast" or attr(x, "to") != onnx.TensorProto.FLOAT \
                or attr(y, "to") != onnx.TensorProto.FLOAT16 or x.output[0] in outs:
            continue
        for n in m.graph.node:
            n.input[:] = [y.input[0] if i == x.output[0] else i for i in n.input]
        m.graph.node.remove(x)
    return dead_nodes(m)


def _first_bad(fp32: onnx.ModelProto, h: onnx.ModelProto, data: Dataset, block: list[str], rtol: float) -> str | None:
    """The earliest node (graph order) whose fp16 output is non-finite or off by more than rtol."""
    names = {o for n in h.graph.node for o in n.output}
    order = [n for n in fp32.graph.node if n.name not in block and n.output and n.output[0] in names]
    tensors = [n.output[0] for n in order]
    s32, s16 = session(with_outputs(fp32, tensors)), session(with_outputs(h, tensors))
    worst: dict[str, float] = {}
    for feed in data.feeds:
        r = dict(zip([o.name for o in s32.get_outputs()], s32.run(None, feed)))
        g = dict(zip([o.name for o in s16.get_outputs()], s16.run(None, feed)))
        for t in tensors:
            a, b = r[t].astype(np.float64), g[t].astype(np.float64)
            err = np.inf if not np.all(np.isfinite(b)) else np.linalg.norm(a - b) / (np.linalg.norm(a) + 1e-12)
            worst[t] = max(worst.get(t, 0.0), float(err))
    for n in order:
        if worst.get(n.output[0], 0.0) > rtol:
            return n.name
    return None


def to_fp16(model: onnx.ModelProto, data: Dataset, min_cosine: float = 0.999, rtol: float = 1e-2,
            max_rounds: int = 20, notes: list | None = None) -> tuple[onnx.ModelProto, list[str], dict]:
    """Convert; grow the fp32 block list until outputs are finite and cosine >= min_cosine."""
    ref = predict(model, data)
    block: list[str] = []
    for _ in range(max_rounds):
        h = convert(model, block)
        fid = fidelity(ref, predict(h, data))
        if fid["cosine"] >= min_cosine and fid["rel_l2_err"] <= rtol and np.isfinite(fid["max_abs_err"]):
            if notes is not None:
                notes.append(f"fp16 cosine {fid['cosine']:.6f} vs fp32; kept in fp32: {', '.join(block) or 'none'}")
            return h, block, fid
        bad = _first_bad(model, h, data.head(8), block, rtol)
        if bad is None:
            break
        block.append(bad)
        if notes is not None:
            notes.append(f"{bad}: kept in fp32 (its fp16 output broke: NaN/Inf or error > {rtol:g})")
    raise EdgecError(f"fp16 outputs stay below cosine {min_cosine:g} (or above {rtol:g} relative error) vs fp32 even with {len(block)} nodes kept in fp32; "
                     "nothing written")
