"""Before int8: cross-layer equalization; after it: bias correction. Both are numpy on the fp32 weights.

Cross-layer equalization (`equalize`): in a chain Conv A -> [Relu] -> Conv B where B is A's only reader, output
channel i of A can be divided by s_i > 0 and B's input channel i multiplied by s_i without changing the fp32
function (ReLU commutes with positive scaling). One channel with a far larger range than the others then no
longer squeezes them into a few steps of the per-tensor activation scale. s is chosen from the channel ranges
seen on calibration data: when B is depthwise (each input channel has its own per-channel weight scale) the
activation ranges are made equal; otherwise activation range and B's input-channel weight range meet in the
middle (s_i = sqrt(a_i / w_i), both become sqrt(a_i * w_i)). A's weight rows are per-channel quantized, so
their scaling costs nothing.

Bias correction (`bias_corrections`): rounding the weights shifts each output channel's mean by
(W_q - W) applied to the layer's mean input. That shift is computed from the fp32 mean input on calibration
data (a conv of the mean input image with W_q - W, so padding is accounted for) and subtracted from the bias.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from edgec.optimizer.graph import get_init
from edgec.optimizer.runner import session, with_outputs

SCALE_LIMIT = 1e4  # no channel is scaled by more than this either way (dead channels stay as they are)
# a chain is equalized only when its widest channel range is this many times the median one: below that a
# per-tensor scale loses under 3 bits on the typical channel, and rescaling moves precision for little gain
MIN_SPREAD = 8.0


def _attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _set_init(model: onnx.ModelProto, name: str, arr: np.ndarray) -> None:
    for t in model.graph.initializer:
        if t.name == name:
            t.CopyFrom(numpy_helper.from_array(arr.astype(np.float32), name))
            return
    model.graph.initializer.append(numpy_helper.from_array(arr.astype(np.float32), name))


def _float_init(model, name):
    if name is None:
        return None
    arr = get_init(model, name)
    return None if arr is None or arr.dtype != np.float32 else arr


def chains(model: onnx.ModelProto) -> list[tuple[onnx.NodeProto, onnx.NodeProto, str]]:
    """(A, B, tensor B reads) for every Conv -> [Relu] -> Conv chain that can be rescaled exactly."""
    readers: dict[str, list] = {}
    for n in model.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    outputs = {o.name for o in model.graph.output}
    # a weight shared by two nodes cannot be rescaled for one of them
    uses: dict[str, int] = {}
    for n in model.graph.node:
        for i in n.input:
            uses[i] = uses.get(i, 0) + 1
    found = []
    for a in model.graph.node:
        if a.op_type != "Conv" or len(a.input) < 2 or _float_init(model, a.input[1]) is None:
            continue
        t = a.output[0]
        nxt = readers.get(t, [])
        if t in outputs or len(nxt) != 1:
            continue
        b = nxt[0]
        if b.op_type == "Relu":
            t = b.output[0]
            nxt = readers.get(t, [])
            if t in outputs or len(nxt) != 1:
                continue
            b = nxt[0]
        if b.op_type != "Conv" or b.input[0] != t or len(b.input) < 2 or _float_init(model, b.input[1]) is None:
            continue
        if uses.get(a.input[1], 0) > 1 or uses.get(b.input[1], 0) > 1 or (len(a.input) > 2 and uses.get(a.input[2], 0) > 1):
            continue
        if len(a.input) > 2 and a.input[2] and _float_init(model, a.input[2]) is None:
            continue
        found.append((a, b, t))
    return found


def _channel_ranges(model, tensors: list[str], feeds: list[dict]) -> dict[str, np.ndarray]:
    """Largest |value| per channel (axis 1) of each tensor over the samples."""
    sess = session(with_outputs(model, tensors))
    names = [o.name for o in sess.get_outputs()]
    idx = {t: names.index(t) for t in tensors}
    ranges = {t: None for t in tensors}
    for feed in feeds:
        outs = sess.run(None, feed)
        for t in tensors:
            x = np.abs(outs[idx[t]])
            r = x.reshape(x.shape[0], x.shape[1], -1).max(axis=(0, 2))
            ranges[t] = r if ranges[t] is None else np.maximum(ranges[t], r)
    return ranges


def equalize(model: onnx.ModelProto, feeds: list[dict], notes: list[str] | None = None) -> tuple[onnx.ModelProto, int]:
    """A copy of model with every exact Conv -> [Relu] -> Conv chain whose channel ranges spread more than
    MIN_SPREAD equalized (see the module doc), and how many chains were."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    found = chains(m)
    if not found or not feeds:
        if notes is not None:
            notes.append("cross-layer equalization: no Conv -> [Relu] -> Conv chain to equalize")
        return m, 0
    ranges = _channel_ranges(m, [t for _, _, t in found], feeds)
    spread_before, spread_after, skipped = [], [], 0.0
    for a, b, t in found:
        act = ranges[t].astype(np.float64)
        spread = act.max() / max(float(np.median(act)), 1e-30)
        if spread < MIN_SPREAD:
            skipped = max(skipped, spread)
            continue
        wa, wb = get_init(m, a.input[1]).astype(np.float64), get_init(m, b.input[1]).astype(np.float64)
        c = wa.shape[0]
        group = int(_attr(b, "group", 1))
        if c % group or wb.shape[1] * group != c:
            continue
        cpg, opg = c // group, wb.shape[0] // group
        wbv = wb.reshape(group, opg, cpg, -1)  # [group, out per group, in per group, taps]
        if cpg == 1:  # depthwise: every input channel has its own weight scale, so equalize the activations
            target = float(np.median(act[act > 0])) if np.any(act > 0) else 0.0
            s = np.where(act > 0, act / max(target, 1e-30), 1.0)
        else:
            wrange = np.abs(wbv).max(axis=(1, 3)).reshape(-1)  # per input channel
            s = np.where((act > 0) & (wrange > 0), np.sqrt(act / np.maximum(wrange, 1e-30)), 1.0)
            mid = float(np.exp(np.mean(np.log(s))))
            s = s / mid  # keep magnitudes where they were on average
        s = np.clip(s, 1 / SCALE_LIMIT, SCALE_LIMIT)
        spread_before.append(act.max() / max(np.median(act), 1e-30))
        spread_after.append((act / s).max() / max(np.median(act / s), 1e-30))
        shape_a = (c,) + (1,) * (wa.ndim - 1)
        _set_init(m, a.input[1], wa / s.reshape(shape_a))
        if len(a.input) > 2 and a.input[2]:
            _set_init(m, a.input[2], get_init(m, a.input[2]).astype(np.float64) / s)
        wbv = wbv * s.reshape(group, 1, cpg, 1)
        _set_init(m, b.input[1], wbv.reshape(wb.shape))
    if notes is not None:
        if spread_before:
            notes.append(f"cross-layer equalization: {len(spread_before)} of {len(found)} Conv -> Conv chain(s); "
                         f"largest channel range over the median: up to {max(spread_before):.1f}x before, "
                         f"{max(spread_after):.1f}x after")
        else:
            notes.append(f"cross-layer equalization: none of {len(found)} Conv -> Conv chain(s) needed it (channel "
                         f"ranges within {skipped:.1f}x of the median, below {MIN_SPREAD:g}x)")
    return m, len(spread_before)


# --- bias correction ---

def weight_dequantizers(q: onnx.ModelProto) -> dict[str, tuple]:
    """node name -> (stored weight, scale, zero point or None, axis) of the constant DequantizeLinear feeding the
    weights of each Conv and Gemm."""
    prod = {o: n for n in q.graph.node for o in n.output}
    out = {}
    for n in q.graph.node:
        if n.op_type not in ("Conv", "Gemm") or len(n.input) < 2 or n.input[1] not in prod:
            continue
        dq = prod[n.input[1]]
        if dq.op_type != "DequantizeLinear":
            continue
        w = get_init(q, dq.input[0])
        scale = get_init(q, dq.input[1])
        zp = get_init(q, dq.input[2]) if len(dq.input) > 2 and dq.input[2] else None
        if w is None or scale is None:
            continue
        out[n.name] = (w, scale, zp, int(_attr(dq, "axis", 1)))
    return out


def dequantized_weights(q: onnx.ModelProto) -> dict[str, np.ndarray]:
    """node name -> the float weight its DequantizeLinear gives (Conv and Gemm with int8 weights)."""
    out = {}
    for name, (w, scale, zp, axis) in weight_dequantizers(q).items():
        shape = [1] * w.ndim
        if scale.size > 1:
            shape[axis] = scale.size
        zero = np.zeros(1) if zp is None else zp.astype(np.float64).reshape(shape)
        out[name] = ((w.astype(np.float64) - zero) * scale.astype(np.float64).reshape(shape)).astype(np.float32)
    return out


def _conv_shift(node, mean_x: np.ndarray, dw: np.ndarray) -> np.ndarray:
    """Mean over the output plane of conv(mean_x, dw) with node's attributes: the per-channel output shift."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], **attrs)], "shift",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(mean_x.shape))],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(dw.astype(np.float32), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    y = session(m).run(None, {"x": mean_x.astype(np.float32)})[0]
    return y.reshape(y.shape[0], y.shape[1], -1).mean(axis=(0, 2))


def bias_corrections(model: onnx.ModelProto, q: onnx.ModelProto, feeds: list[dict]) -> dict[str, np.ndarray]:
    """node name -> the corrected fp32 bias (see the module doc) for every Conv/Gemm whose weights q rounds."""
    deq = dequantized_weights(q)
    nodes = [n for n in model.graph.node if n.name in deq and _float_init(model, n.input[1]) is not None]
    if not nodes or not feeds:
        return {}
    inputs = sorted({n.input[0] for n in nodes})
    sess = session(with_outputs(model, inputs))
    names = [o.name for o in sess.get_outputs()]
    sums: dict[str, np.ndarray] = {}
    for feed in feeds:
        outs = sess.run(None, feed)
        for t in inputs:
            x = outs[names.index(t)].astype(np.float64)
            sums[t] = x.sum(axis=0, keepdims=True) + sums.get(t, 0)
    count = sum(next(iter(f.values())).shape[0] for f in feeds)
    out = {}
    for n in nodes:
        w = get_init(model, n.input[1])
        dw = deq[n.name].astype(np.float64) - w
        mean_x = sums[n.input[0]] / count
        if n.op_type == "Conv":
            shift = _conv_shift(n, mean_x, dw)
        else:
            if _attr(n, "alpha", 1.0) != 1.0 or _attr(n, "transA", 0):
                continue
            mx = mean_x.reshape(1, -1)
            shift = (mx @ (dw.T if _attr(n, "transB", 0) else dw)).reshape(-1)
        bias = _float_init(model, n.input[2]) if len(n.input) > 2 and n.input[2] else None
        if n.op_type == "Gemm" and bias is not None and (bias.size != shift.size or _attr(n, "beta", 1.0) != 1.0):
            continue
        base = np.zeros(shift.size) if bias is None else bias.astype(np.float64).reshape(-1)
        out[n.name] = (base - shift).astype(np.float32)
    return out


def with_biases(model: onnx.ModelProto, biases: dict[str, np.ndarray], only: set[str] | None = None) -> onnx.ModelProto:
    """A copy with the given biases set (a bias input added where a Conv/Gemm had none)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    uses: dict[str, int] = {}
    for n in m.graph.node:
        for i in n.input:
            uses[i] = uses.get(i, 0) + 1
    for n in m.graph.node:
        if n.name not in biases or (only is not None and n.name not in only):
            continue
        if len(n.input) > 2 and n.input[2] and uses.get(n.input[2], 0) == 1:
            name = n.input[2]
        else:
            name = f"{n.name}.corrected_bias"
            while len(n.input) < 3:
                n.input.append("")
            n.input[2] = name
        _set_init(m, name, biases[n.name])
    return m
