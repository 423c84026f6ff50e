"""The accuracy guard: keep the layers that hurt most in float until the budget holds.

Budget: `max_accuracy_drop` (top-1 points vs the fp32 model, needs labels) or `min_cosine` (mean per-sample
cosine vs the fp32 outputs). A layer's own error is 1 - cosine of the model outputs vs fp32 when only that
layer runs int8 (on up to 32 held-out samples; calibration ranges are reused, so this costs one QDQ
insertion per layer). Layers are kept in float one by one, worst first. A mix keeps at least one layer int8 and at most `max_float_layers` float; if even the
most-float mix allowed breaks the budget, no mix meets it and the guard fails without writing a model.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from edgec.errors import EdgecError
from edgec.optimizer.data import Dataset
from edgec.optimizer.evaluate import accuracy, fidelity, predict
from edgec.optimizer.quantize import Quantizer, quantized_nodes


@dataclass(frozen=True)
class Budget:
    max_accuracy_drop: float | None = None  # top-1 points
    min_cosine: float | None = None
    min_agreement: float | None = None  # argmax agreement with fp32 (the default fidelity floor uses it)

    def __post_init__(self):
        if self.max_accuracy_drop is not None and self.min_cosine is not None:
            raise EdgecError("give either --max-accuracy-drop or --min-cosine, not both")
        if self.max_accuracy_drop is not None and not 0 <= self.max_accuracy_drop <= 100:
            raise EdgecError(f"--max-accuracy-drop is in top-1 points (0..100), got {self.max_accuracy_drop:g}")
        if self.min_cosine is not None and not -1 <= self.min_cosine <= 1:
            raise EdgecError(f"--min-cosine must be in [-1, 1], got {self.min_cosine:g}")
        if self.min_agreement is not None and not 0 <= self.min_agreement <= 1:
            raise EdgecError(f"argmax agreement floor must be in [0, 1], got {self.min_agreement:g}")

    @property
    def active(self) -> bool:
        return self.max_accuracy_drop is not None or self.min_cosine is not None

    def __str__(self) -> str:
        if self.max_accuracy_drop is not None:
            return f"top-1 drop <= {self.max_accuracy_drop:g} points"
        parts = [f"cosine >= {self.min_cosine:g}"] if self.min_cosine is not None else []
        if self.min_agreement is not None:
            parts.append(f"argmax agreement >= {self.min_agreement * 100:g}%")
        return " and ".join(parts)


class Judge:
    """Scores candidate models on held-out data against the fp32 model."""

    def __init__(self, fp32: onnx.ModelProto, data: Dataset, budget: Budget, progress=None):
        if budget.max_accuracy_drop is not None and data.labels is None:
            raise EdgecError(f"--max-accuracy-drop needs labels in the evaluation data ({data.source}); use --min-cosine")
        self.data, self.budget, self.progress = data, budget, progress
        self.ref = predict(fp32, data, progress, "evaluating fp32")
        self.base = accuracy(self.ref, data.labels)["top1"] if data.labels is not None else None
        self.small, self.ref_small = data.head(32), self.ref[:32]

    def score(self, model: onnx.ModelProto, label: str = "evaluating") -> dict:
        outs = predict(model, self.data, self.progress, label)
        fid = fidelity(self.ref, outs)
        res = {"cosine": fid["cosine"], "agreement": fid["argmax_agreement"]}
        if self.data.labels is not None:
            res["top1"] = accuracy(outs, self.data.labels)["top1"]
            res["drop_points"] = (self.base - res["top1"]) * 100
        return res

    def ok(self, s: dict) -> bool:
        if self.budget.max_accuracy_drop is not None:
            return s["drop_points"] <= self.budget.max_accuracy_drop + 1e-9
        if self.budget.min_cosine is not None and s["cosine"] < self.budget.min_cosine:
            return False
        if self.budget.min_agreement is not None and s["agreement"] < self.budget.min_agreement - 1e-12:
            return False
        return True


def own_errors(quantizer: Quantizer, names: list[str], judge: "Judge", progress=None) -> dict[str, float]:
    """Each layer's own error: 1 - cosine vs fp32 when only that layer runs int8 (ranges are cached)."""
    task = progress.add_task("ranking layers", total=len(names)) if progress is not None else None
    errs = {}
    for name in names:
        errs[name] = 1.0 - fidelity(judge.ref_small, predict(quantizer(only=[name]), judge.small))["cosine"]
        if task is not None:
            progress.advance(task)
    if task is not None:
        progress.remove_task(task)
    return errs


def guarded_int8(quantizer: Quantizer, judge: Judge, log, max_float: int | None = None,
                 first_try: tuple | None = None) -> tuple[onnx.ModelProto, dict]:
    """Quantize, then keep the worst layers float one by one until the budget holds.
    first_try: (model, score) of the all-int8 model when the caller has already measured it."""
    q, first = first_try if first_try is not None else (None, None)
    if q is None:
        q = quantizer()
        first = judge.score(q, "evaluating int8")
    report = {"budget": str(judge.budget), "all_int8": first, "float_layers": [], "final": first}
    if judge.ok(first):
        return q, report
    names = quantized_nodes(q)
    ranked = sorted(own_errors(quantizer, names, judge, judge.progress).items(), key=lambda kv: -kv[1])
    limit = min(len(ranked) - 1, len(ranked) if max_float is None else max_float)
    log(f"budget {judge.budget} broken by all-int8 ({_fmt(first)}); ranking {len(ranked)} layers by own error")
    if limit < 1 or not judge.ok(judge.score(quantizer([n for n, _ in ranked[:limit]]), "checking the budget")):
        raise EdgecError(f"no mix of int8 and float layers meets {judge.budget} (all int8: {_fmt(first)}; even with "
                         f"{max(limit, 0)} of {len(ranked)} layers float it fails); nothing written")
    prev = first
    for k, (name, err) in enumerate(ranked[:limit]):
        q = quantizer([n for n, _ in ranked[: k + 1]])
        s = judge.score(q, f"guard: {k + 1} float layer(s)")
        report["float_layers"].append({"name": name, "own_error": err, "after": s,
                                       "gain": {key: s[key] - prev[key] for key in s}})
        log(f"kept {name} in float (own error {err:.2e}): {_fmt(s)}")
        prev = s
        if judge.ok(s):
            report["final"] = s
            return q, report
    raise EdgecError(f"no mix of int8 and float layers meets {judge.budget}; nothing written")  # checked above


def _fmt(s: dict) -> str:
    parts = [f"cosine {s['cosine']:.5f}", f"argmax agreement {s['agreement'] * 100:.1f}%"]
    if "top1" in s:
        parts.append(f"top-1 {s['top1'] * 100:.2f}% (drop {s['drop_points']:.2f} pts)")
    return ", ".join(parts)


describe = _fmt
