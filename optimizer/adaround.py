"""Per-layer weight rounding chosen to minimise the layer's output error on calibration data (AdaRound-style).

Nearest rounding minimises each weight's own error, not the layer's: for output channel o with per-channel
scale s_o, the output error on inputs x is s_o * r_o . x with r_o = q_o - w_o / s_o, so over calibration inputs
its mean square is s_o^2 * r_o^T H r_o with H = E[x x^T] (the im2col patch second moment, one per group). Each
weight may go to the integer below or above w / s (the AdaRound constraint); the row's max-|w| weight keeps its
value so the per-channel scale onnxruntime derives from the weights is unchanged.

Solvers: `greedy` is coordinate descent from nearest rounding, flipping one weight to its other neighbour
whenever that lowers r^T H r, all rows of a group at once, a few sweeps. `soft` (the default) is the AdaRound
relaxation (rectified-sigmoid rounding variables, Adam, a regulariser annealed so every variable ends at 0 or
1), then the greedy sweeps from its result. On ppocr cls (53 layers, held-out positions) greedy leaves 0.50 of
nearest rounding's output error in 2.7 s, soft + greedy 0.40 in 7 s (docs/optimizer.md).

H is built from sampled output positions (at most POSITIONS per layer, so memory is K^2 per group, not the
activations), split by sample into a fit half and a check half: a row keeps its new rounding only when it
lowers the error on the check half too, so a layer with few positions per weight (a Gemm on a handful of
samples) falls back to nearest rather than overfitting. Layers go largest MACs first within a time budget.

The result is a set of fp32 weights already on the int8 grid (q * s): onnxruntime's quantizer then derives the
same scale and stores exactly q, so the QDQ model's DequantizeLinear gives what the integer kernels use.
"""

from __future__ import annotations

import time

import numpy as np
import onnx

from edgec.optimizer.equalize import weight_dequantizers
from edgec.optimizer.graph import attr, get_init
from edgec.optimizer.runner import session, with_outputs

POSITIONS = 4096      # sampled output positions per layer (half fit, half check)
SWEEPS = 4
H_BYTES = 512 << 20   # the H matrices of one pass over the data stay under this
FLOPS = 2e9           # solver work per second of budget (numpy, one core; ppocr cls: 54 layers, ~7 s unloaded)


class Layer:
    """One Conv/Gemm: its integer weights [G, M, K] with per-row scale, and the patch sampler for its input."""

    def __init__(self, node, w, q, scale, qmax, op):
        self.node, self.name, self.op = node, node.name, op
        self.w, self.q, self.scale, self.qmax = w, q, scale, qmax  # w, q: [G, M, K]; scale: [G, M]
        g, _, k = q.shape
        self.fit = np.zeros((g, k, k))
        self.check = np.zeros((g, k, k))
        self.count = [0, 0]

    @property
    def macs_per_position(self) -> int:
        return int(np.prod(self.q.shape))

    def add(self, x: np.ndarray, half: int, rng) -> None:
        """Accumulate H from input x (one sample) into the fit (half 0) or check (half 1) moment."""
        p = self._patches(x, rng)  # [P, G, K]
        if p is None or not len(p):
            return
        h = np.einsum("pgk,pgl->gkl", p, p)
        (self.fit if half == 0 else self.check)[...] += h
        self.count[half] += len(p)

    def _patches(self, x: np.ndarray, rng):
        x = np.asarray(x, np.float64)
        g, _, k = self.q.shape
        if self.op == "Gemm":
            rows = x.reshape(-1, k) if not attr(self.node, "transA", 0) else x.reshape(k, -1).T
            return rows[:, None, :]
        c, hh, ww = x.shape[1:]
        kh, kw = self.kernel
        pt, pl, pb, pr = self.pads
        sh, sw = self.strides
        dh, dw = self.dilations
        ho = (hh + pt + pb - dh * (kh - 1) - 1) // sh + 1
        wo = (ww + pl + pr - dw * (kw - 1) - 1) // sw + 1
        if ho < 1 or wo < 1:
            return None
        n = min(ho * wo, self.per_sample)
        pos = rng.choice(ho * wo, n, replace=False) if n < ho * wo else np.arange(ho * wo)
        oy, ox = pos // wo, pos % wo
        xp = np.pad(x[0], ((0, 0), (pt, pb), (pl, pr)))
        ry = oy[:, None] * sh + np.arange(kh)[None] * dh  # [n, kh]
        rx = ox[:, None] * sw + np.arange(kw)[None] * dw  # [n, kw]
        patch = xp[:, ry[:, :, None], rx[:, None, :]]      # [C, n, kh, kw]
        return patch.transpose(1, 0, 2, 3).reshape(n, g, k)


def _weight_dq(q: onnx.ModelProto):
    """node name -> (int8 weight, scale, axis) of the symmetric weight quantizers."""
    return {name: (w, scale, axis) for name, (w, scale, zp, axis) in weight_dequantizers(q).items()
            if w.dtype == np.int8 and (zp is None or not np.any(zp != 0))}


def layers(model: onnx.ModelProto, plain: onnx.ModelProto) -> tuple[list[Layer], list[str]]:
    """The Conv/Gemm layers of fp32 `model` that `plain` (its nearest-rounded QDQ form) quantizes per output
    channel, with what was skipped and why."""
    dq = _weight_dq(plain)
    uses: dict[str, int] = {}
    for n in model.graph.node:
        for i in n.input:
            uses[i] = uses.get(i, 0) + 1
    found, skipped = [], []
    for n in model.graph.node:
        if n.name not in dq:
            continue
        w = get_init(model, n.input[1])
        qi, scale, axis = dq[n.name]
        if w is None or w.dtype != np.float32 or uses.get(n.input[1], 0) > 1:
            skipped.append(f"{n.name}: weight not a private fp32 initializer")
            continue
        if n.op_type == "Conv":
            if w.ndim != 4 or attr(n, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET") or (scale.size > 1 and axis != 0):
                skipped.append(f"{n.name}: only 2-D convs with explicit pads")
                continue
            group = int(attr(n, "group", 1))
            o = w.shape[0]
            shape = (group, o // group, -1)
            wv, qv = w.reshape(shape), qi.reshape(shape)
            s = np.broadcast_to(scale.reshape(-1) if scale.size > 1 else scale.reshape(1), (o,)).reshape(group, o // group)
        else:
            if attr(n, "transA", 0) or attr(n, "alpha", 1.0) != 1.0 or w.ndim != 2:
                skipped.append(f"{n.name}: Gemm with transA or alpha != 1")
                continue
            t = bool(attr(n, "transB", 0))
            if scale.size > 1 and axis != (0 if t else 1):
                skipped.append(f"{n.name}: weight scale not along the output axis")
                continue
            wv, qv = (w, qi) if t else (w.T, qi.T)
            o = wv.shape[0]
            s = np.broadcast_to(scale.reshape(-1), (o,)).reshape(1, o)
            wv, qv = wv[None], qv[None]
        s = s.astype(np.float64)
        qmax = np.abs(qv.astype(np.int64)).max(axis=2)
        layer = Layer(n, wv.astype(np.float64), qv.astype(np.int64), s, qmax, n.op_type)
        if n.op_type == "Conv":
            k = w.shape[2:]
            layer.kernel = tuple(int(v) for v in k)
            pads = list(attr(n, "pads", [0, 0, 0, 0]))
            layer.pads = (pads[0], pads[1], pads[2], pads[3])
            layer.strides = tuple(attr(n, "strides", [1, 1]))
            layer.dilations = tuple(attr(n, "dilations", [1, 1]))
        found.append(layer)
    return found, skipped


def _bounds(layer: Layer):
    """Per weight: the integer below w/s, the one above, and whether it must keep nearest (the row max)."""
    s = np.maximum(layer.scale, 1e-30)[..., None]
    v = layer.w / s
    lo = np.floor(v)
    hi = lo + 1
    qmax = layer.qmax[..., None]
    lo, hi = np.clip(lo, -qmax, qmax), np.clip(hi, -qmax, qmax)
    fixed = np.zeros(v.shape, bool)
    g, m, _ = v.shape
    top = np.abs(layer.w).argmax(axis=2)
    fixed[np.arange(g)[:, None], np.arange(m)[None, :], top] = True
    fixed |= lo == hi
    return v, lo, hi, fixed


def _damped(h: np.ndarray, n: int) -> np.ndarray:
    """H / n plus 1% of its mean diagonal: directions the samples do not span cost something."""
    h = h / max(n, 1)
    d = np.einsum("gkk->gk", h).mean(axis=1)
    return h + 0.01 * d[:, None, None] * np.eye(h.shape[1])[None]


def greedy(h: np.ndarray, v, lo, hi, q0, fixed, sweeps: int = SWEEPS, deadline: float | None = None) -> np.ndarray:
    """Coordinate descent on r^T H r (r = q - v) over q in {lo, hi}, all rows of each group at once."""
    q = q0.astype(np.float64).copy()
    r = q - v
    grad = np.matmul(r, h)  # H r per row (H symmetric)
    diag = np.einsum("gkk->gk", h)
    for _ in range(sweeps):
        changed = 0
        for j in range(q.shape[2]):
            alt = np.where(q[:, :, j] == lo[:, :, j], hi[:, :, j], lo[:, :, j])
            d = alt - q[:, :, j]
            gain = 2 * d * grad[:, :, j] + d * d * diag[:, j][:, None]
            take = (gain < -1e-12) & ~fixed[:, :, j] & (d != 0)
            if not take.any():
                continue
            d = np.where(take, d, 0.0)
            q[:, :, j] += d
            grad += d[:, :, None] * h[:, j, :][:, None, :]
            changed += int(take.sum())
        if not changed or (deadline is not None and time.perf_counter() > deadline):
            break
    return q


def soft(h: np.ndarray, v, lo, hi, q0, fixed, iters: int = 600, lam: float = 0.01,
         deadline: float | None = None) -> np.ndarray:
    """The AdaRound relaxation: q = lo + h(V), h a rectified sigmoid, loss r^T H r / K + lam * sum(1 - |2h - 1|^b)
    with b annealed 20 -> 2 after a 20% warm start, Adam; then every h rounded to 0/1 (also when the deadline
    cuts the iterations short: the caller keeps a row only if it beats nearest)."""
    zeta, gamma = 1.1, -0.1
    frac = np.clip(v - lo, 0, 1)
    # start where the rectified sigmoid gives the fractional part: nearest rounding's neighbourhood
    p = np.clip((frac - gamma) / (zeta - gamma), 1e-4, 1 - 1e-4)
    V = np.log(p / (1 - p))
    m1, m2 = np.zeros_like(V), np.zeros_like(V)
    free = ~fixed
    k = v.shape[2]
    for it in range(iters):
        if deadline is not None and it % 50 == 49 and time.perf_counter() > deadline:
            break
        sig = 1 / (1 + np.exp(-V))
        raw = sig * (zeta - gamma) + gamma
        hv = np.clip(raw, 0, 1)
        q = np.where(free, lo + hv * (hi - lo), q0)
        r = q - v
        g = 2 * np.matmul(r, h) / k * (hi - lo)
        if it >= iters // 5:
            b = 20 + (2 - 20) * (it - iters // 5) / max(1, iters - iters // 5)
            t = 2 * hv - 1
            g += lam * (-b * np.abs(t) ** (b - 1) * np.sign(t) * 2)
        g *= ((raw > 0) & (raw < 1)) * sig * (1 - sig) * (zeta - gamma) * free
        m1 = 0.9 * m1 + 0.1 * g
        m2 = 0.999 * m2 + 0.001 * g * g
        V -= 0.01 * (m1 / (1 - 0.9 ** (it + 1))) / (np.sqrt(m2 / (1 - 0.999 ** (it + 1))) + 1e-8)
    hv = np.clip(1 / (1 + np.exp(-V)) * (zeta - gamma) + gamma, 0, 1)
    return np.where(free, np.where(hv >= 0.5, hi, lo), q0)


def _row_error(h, r) -> np.ndarray:
    return np.einsum("gmk,gkl,gml->gm", r, h, r)


def collect(model: onnx.ModelProto, chosen: list[Layer], feeds: list[dict], seed: int = 0) -> None:
    """Fill the fit/check H of each layer from the calibration feeds (even samples fit, odd check), passes
    over the data in groups of layers whose H fit in H_BYTES."""
    rng = np.random.default_rng(seed)
    per = max(1, -(-POSITIONS // max(len(feeds), 1)))
    batch, size = [], 0
    groups = []
    for layer in chosen:
        layer.per_sample = per
        b = 2 * layer.fit.nbytes
        if batch and size + b > H_BYTES:
            groups.append(batch)
            batch, size = [], 0
        batch.append(layer)
        size += b
    if batch:
        groups.append(batch)
    for batch in groups:
        tensors = sorted({layer.node.input[0] for layer in batch})
        sess = session(with_outputs(model, tensors))
        names = [o.name for o in sess.get_outputs()]
        for i, feed in enumerate(feeds):
            outs = dict(zip(names, sess.run(None, feed)))
            for layer in batch:
                layer.add(outs[layer.node.input[0]], i % 2 if len(feeds) > 1 else 0, rng)
        if len(feeds) == 1:
            for layer in batch:
                layer.check, layer.count[1] = layer.fit, layer.count[0]


def round_layers(model: onnx.ModelProto, plain: onnx.ModelProto, feeds: list[dict], budget_s: float = 60.0,
                 method: str = "soft", macs: dict | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """node name -> fp32 weight on the chosen int8 grid points, and a summary for the report."""
    t0 = time.perf_counter()
    deadline = t0 + budget_s
    found, skipped = layers(model, plain)
    macs = macs or {}
    found.sort(key=lambda layer: -(macs.get(layer.name) or layer.macs_per_position))
    weights, rows, reductions = {}, [], []
    timed_out = []
    # H for every layer costs a pass over the data per H_BYTES of matrices; layers past the budget are left out
    if found and feeds and budget_s > 0:
        collect(model, found, feeds)
    # which layers fit the budget is decided up front from their solver work (so the result does not depend on
    # the machine's load); the clock only stops a run that overshoots by far
    work, planned = 0.0, set()
    for layer in found:
        work += _work(layer, method)
        if work <= budget_s * FLOPS:
            planned.add(layer.name)
    deadline = t0 + 3 * budget_s
    for layer in found:
        if layer.name not in planned or time.perf_counter() > deadline:
            timed_out.append(layer.name)
            continue
        hf = _damped(layer.fit, layer.count[0])
        hc = layer.check / max(layer.count[1], 1)
        v, lo, hi, fixed = _bounds(layer)
        q0 = layer.q.astype(np.float64)
        if method == "soft":
            q = greedy(hf, v, lo, hi, soft(hf, v, lo, hi, q0, fixed, deadline=deadline), fixed, deadline=deadline)
        else:
            q = greedy(hf, v, lo, hi, q0, fixed, deadline=deadline)
        before, after = _row_error(hc, q0 - v), _row_error(hc, q - v)
        better = after < before
        q = np.where(better[..., None], q, q0)
        after = np.where(better, after, before)
        # weight each row's error by its scale^2: the output-space error
        s2 = layer.scale ** 2
        eb, ea = float((before * s2).sum()), float((after * s2).sum())
        changed = int((q != q0).sum())
        if changed:
            w = (q * layer.scale[..., None]).astype(np.float32)
            weights[layer.name] = _to_layout(layer, w)
        reductions.append(ea / eb if eb > 0 else 1.0)
        rows.append({"name": layer.name, "changed_weights": changed, "weights": int(q.size),
                     "error_ratio": round(ea / eb, 4) if eb > 0 else 1.0})
    summary = {"method": method, "layers": len(rows), "changed_layers": len(weights),
               "median_error_ratio": float(np.median(reductions)) if reductions else 1.0,
               "skipped": skipped, "over_budget": timed_out, "budget_seconds": budget_s,
               "seconds": round(time.perf_counter() - t0, 3), "per_layer": rows}
    return weights, summary


def _work(layer: Layer, method: str) -> float:
    """Floating-point operations the solver spends on a layer (matrix products over H dominate)."""
    g, m, k = layer.q.shape
    per = 2.0 * g * m * k * k
    return per * ((600 if method == "soft" else 0) + SWEEPS) + 4.0 * POSITIONS * g * k * k


def _to_layout(layer: Layer, w: np.ndarray) -> np.ndarray:
    """[G, M, K] back to the node's weight layout."""
    if layer.op == "Gemm":
        w = w[0]
        return w if attr(layer.node, "transB", 0) else np.ascontiguousarray(w.T)
    o = layer.q.shape[0] * layer.q.shape[1]
    return w.reshape((o, -1) + layer.kernel)


def with_weights(model: onnx.ModelProto, weights: dict[str, np.ndarray], only: set[str] | None = None) -> onnx.ModelProto:
    """A copy with the given nodes' weight initializers replaced."""
    from onnx import numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {t.name: t for t in m.graph.initializer}
    for n in m.graph.node:
        if n.name in weights and (only is None or n.name in only):
            name = n.input[1]
            inits[name].CopyFrom(numpy_helper.from_array(weights[n.name].reshape(tuple(inits[name].dims)), name))
    return m
