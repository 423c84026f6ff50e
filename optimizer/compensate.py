"""Bias compensation after channel pruning: a removed channel's average contribution goes into the bias.

When channel c disappears from a layer's input, that layer loses W[:, c] * x_c. Replacing x_c by its mean over
calibration data (and over positions) keeps the layer's output mean where it was, which recovers most of the
accuracy plain filter removal loses, without retraining. Applied to every Conv (dense or grouped) and Gemm that
reads a pruned tensor; depthwise convs lose their input and output channel together and need nothing.
"""

from __future__ import annotations

import numpy as np
import onnx

from edgec.optimizer.graph import attr, get_init, set_init, unique_name
from edgec.optimizer.runner import session, with_outputs


def _consumers(model, a, keep):
    from edgec.optimizer.channel import _flat_keep

    out = []
    for n in model.graph.node:
        if n.op_type not in ("Conv", "Gemm") or attr(n, "transA", 0):
            continue
        w = get_init(model, n.input[1])
        g = int(attr(n, "group", 1))
        if w is None or (n.op_type == "Conv" and g > 1 and g == w.shape[0] == w.shape[1] * g):
            continue  # depthwise: nothing left to compensate
        kin = _flat_keep(a, keep, n.input[0])
        if kin is not None:
            out.append((n, kin))
    return out


def _means(model, names, feeds) -> dict[str, np.ndarray]:
    """Mean of each tensor along its channel (or feature) axis."""
    s = session(with_outputs(model, names))
    out_names = [o.name for o in s.get_outputs()]
    sums: dict[str, np.ndarray] = {}
    for feed in feeds:
        for name, arr in zip(out_names, s.run(None, feed)):
            if name in names:
                axes = tuple(i for i in range(arr.ndim) if i != 1)
                sums[name] = sums.get(name, 0) + arr.astype(np.float64).mean(axis=axes)
    return {k: v / len(feeds) for k, v in sums.items()}


def _delta(node, w, mean, removed) -> np.ndarray:
    """Per-output-channel bias change from removed input channels held at their means."""
    if node.op_type == "Gemm":
        wt = w if attr(node, "transB", 0) else w.T
        return wt[:, removed] @ mean[removed]
    g, cin_g = int(attr(node, "group", 1)), w.shape[1]
    out_per = w.shape[0] // g
    delta = np.zeros(w.shape[0])
    for o in range(w.shape[0]):
        grp = o // out_per
        rs = removed[(removed >= grp * cin_g) & (removed < (grp + 1) * cin_g)]
        if len(rs):
            delta[o] = float((w[o, rs - grp * cin_g].reshape(len(rs), -1).sum(axis=1) * mean[rs]).sum())
    return delta


def compensate(original: onnx.ModelProto, pruned: onnx.ModelProto, a, keep: dict, feeds) -> int:
    """Fold removed channels' mean contributions into the biases of `pruned` (in place); returns layers changed."""
    from edgec.optimizer.channel import _flat_keep

    cons = _consumers(original, a, keep)
    if not cons:
        return 0
    means = _means(original, sorted({n.input[0] for n, _ in cons}), feeds)
    by_name = {n.name: n for n in pruned.graph.node}
    for node, kin in cons:
        w = get_init(original, node.input[1])
        removed = np.setdiff1d(np.arange(means[node.input[0]].size), kin)
        delta = _delta(node, w.astype(np.float64), means[node.input[0]], removed)
        kout = _flat_keep(a, keep, node.output[0])
        delta = delta if kout is None else delta[kout]
        target = by_name[node.name]
        bias = get_init(pruned, target.input[2]) if len(target.input) > 2 and target.input[2] else None
        new = unique_name(pruned, f"{node.name}_bias_comp")
        set_init(pruned, new, ((0 if bias is None else bias.astype(np.float64)) + delta).astype(w.dtype))
        while len(target.input) < 3:
            target.input.append("")
        target.input[2] = new
    return len(cons)
