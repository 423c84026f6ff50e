"""The accuracy guard: keep the layers that hurt most in float until the budget holds.

Budget: `max_accuracy_drop` (top-1 points vs the fp32 model, needs labels) or `min_cosine` (mean per-sample
cosine vs the fp32 outputs). Each quantized layer's own error is what it adds: the relative error of its
output minus the worst relative error of its inputs, measured on a few held-out samples. Layers are kept in
float one by one in that order. A mix must keep at least one layer int8; if even the mix with every other
layer float breaks the budget, no mix meets it and the guard fails without a model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from edgec.errors import EdgecError
from edgec.optimizer.data import Dataset
from edgec.optimizer.evaluate import accuracy, fidelity, predict
from edgec.optimizer.quantize import Quantizer, quantized_nodes
from edgec.optimizer.runner import session, with_outputs


@dataclass(frozen=True)
class Budget:
    max_accuracy_drop: float | None = None  # top-1 points
    min_cosine: float | None = None

    def __post_init__(self):
        if self.max_accuracy_drop is not None and self.min_cosine is not None:
            raise EdgecError("give either --max-accuracy-drop or --min-cosine, not both")
        if self.max_accuracy_drop is not None and not 0 <= self.max_accuracy_drop <= 100:
            raise EdgecError(f"--max-accuracy-drop is in top-1 points (0..100), got {self.max_accuracy_drop:g}")
        if self.min_cosine is not None and not -1 <= self.min_cosine <= 1:
            raise EdgecError(f"--min-cosine must be in [-1, 1], got {self.min_cosine:g}")

    @property
    def active(self) -> bool:
        return self.max_accuracy_drop is not None or self.min_cosine is not None

    def __str__(self) -> str:
        if self.max_accuracy_drop is not None:
            return f"top-1 drop <= {self.max_accuracy_drop:g} points"
        return f"cosine >= {self.min_cosine:g}"


class Judge:
    """Scores candidate models on held-out data against the fp32 model."""

    def __init__(self, fp32: onnx.ModelProto, data: Dataset, budget: Budget, progress=None):
        if budget.max_accuracy_drop is not None and data.labels is None:
            raise EdgecError(f"--max-accuracy-drop needs labels in the evaluation data ({data.source}); use --min-cosine")
        self.data, self.budget, self.progress = data, budget, progress
        self.ref = predict(fp32, data, progress, "evaluating fp32")
        self.base = accuracy(self.ref, data.labels)["top1"] if data.labels is not None else None

    def score(self, model: onnx.ModelProto, label: str = "evaluating") -> dict:
        outs = predict(model, self.data, self.progress, label)
        res = {"cosine": fidelity(self.ref, outs)["cosine"]}
        if self.data.labels is not None:
            res["top1"] = accuracy(outs, self.data.labels)["top1"]
            res["drop_points"] = (self.base - res["top1"]) * 100
        return res

    def ok(self, s: dict) -> bool:
        if self.budget.max_accuracy_drop is not None:
            return s["drop_points"] <= self.budget.max_accuracy_drop + 1e-9
        if self.budget.min_cosine is not None:
            return s["cosine"] >= self.budget.min_cosine
        return True


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(np.linalg.norm(a - b) / (np.linalg.norm(a) + 1e-12))


def own_errors(fp32: onnx.ModelProto, q: onnx.ModelProto, names: list[str], data: Dataset) -> dict[str, float]:
    """Error each quantized node adds on top of the error already in its inputs."""
    nodes = {n.name: n for n in fp32.graph.node}
    inits = {t.name for t in fp32.graph.initializer}
    cands = [nodes[n] for n in names if n in nodes]
    tensors = sorted({t for n in cands for t in [*n.input, *n.output] if t and t not in inits})
    q_names = {o for n in q.graph.node for o in n.output} | {v.name for v in q.graph.input}
    tensors = [t for t in tensors if t in q_names]
    s_ref, s_q = session(with_outputs(fp32, tensors)), session(with_outputs(q, tensors))
    errs: dict[str, list[float]] = {t: [] for t in tensors}
    for feed in data.feeds:
        r = dict(zip([o.name for o in s_ref.get_outputs()], s_ref.run(None, feed)))
        g = dict(zip([o.name for o in s_q.get_outputs()], s_q.run(None, feed)))
        for t in tensors:
            errs[t].append(_rel(r[t], g[t]))
    mean = {t: float(np.mean(v)) for t, v in errs.items()}
    return {n.name: mean.get(n.output[0], 0.0) - max([mean.get(i, 0.0) for i in n.input if i in mean] or [0.0])
            for n in cands}


def guarded_int8(quantizer: Quantizer, fp32: onnx.ModelProto, judge: Judge, log) -> tuple[onnx.ModelProto, dict]:
    """Quantize, then keep the worst layers float one by one until the budget holds."""
    q = quantizer()
    first = judge.score(q, "evaluating int8")
    report = {"budget": str(judge.budget), "all_int8": first, "float_layers": [], "final": first}
    if judge.ok(first):
        return q, report
    names = quantized_nodes(q)
    ranked = sorted(own_errors(fp32, q, names, judge.data.head(16)).items(), key=lambda kv: -kv[1])
    log(f"budget {judge.budget} broken by all-int8 ({_fmt(first)}); ranking {len(ranked)} layers by own error")
    if len(ranked) < 2 or not judge.ok(judge.score(quantizer([n for n, _ in ranked[:-1]]), "checking the budget")):
        raise EdgecError(f"no mix of int8 and float layers meets {judge.budget} (all int8: {_fmt(first)}; even with "
                         f"{max(len(ranked) - 1, 0)} of {len(ranked)} layers float it fails); nothing written")
    prev = first
    for k, (name, err) in enumerate(ranked[:-1]):
        q = quantizer([n for n, _ in ranked[: k + 1]])
        s = judge.score(q, f"guard: {k + 1} float layer(s)")
        report["float_layers"].append({"name": name, "own_error": err, "after": s,
                                       "gain": {key: s[key] - prev[key] for key in s}})
        log(f"kept {name} in float (own error {err:.4f}): {_fmt(s)}")
        prev = s
        if judge.ok(s):
            report["final"] = s
            return q, report
    raise EdgecError(f"no mix of int8 and float layers meets {judge.budget}; nothing written")  # unreachable in practice


def _fmt(s: dict) -> str:
    parts = [f"cosine {s['cosine']:.5f}"]
    if "top1" in s:
        parts.append(f"top-1 {s['top1'] * 100:.2f}% (drop {s['drop_points']:.2f} pts)")
    return ", ".join(parts)
