"""`edgec eval` and the optimizer's guard: accuracy with labels, fidelity against a reference without.

Accuracy: top-1/top-5 of the first output, read as class scores (argmax over everything after the batch dim).
Fidelity: per-sample cosine similarity of all outputs (flattened) against the reference model, the mean of
those cosines, the mean relative L2 error (cosine alone ignores scale), max/mean absolute error and how often
the argmax agrees.
"""

from __future__ import annotations

import numpy as np
import onnx

from edgec.errors import EdgecError
from edgec.optimizer.data import Dataset
from edgec.optimizer.runner import session


def predict(model: onnx.ModelProto, data: Dataset, progress=None, label: str = "evaluating") -> list[list[np.ndarray]]:
    sess = session(model)
    outs = []
    with _bar(progress, label, len(data)) as advance:
        for feed in data.feeds:
            outs.append(sess.run(None, feed))
            advance()
    return outs


class _bar:
    """A rich progress bar when asked for, else nothing."""

    def __init__(self, progress, label, total):
        self.progress, self.label, self.total = progress, label, total

    def __enter__(self):
        if self.progress is None:
            return lambda: None
        self.task = self.progress.add_task(self.label, total=self.total)
        return lambda: self.progress.advance(self.task)

    def __exit__(self, *exc):
        if self.progress is not None:
            self.progress.remove_task(self.task)


def accuracy(outs, labels: np.ndarray) -> dict:
    scores = np.stack([o[0].reshape(-1) for o in outs]).astype(np.float64)
    if scores.shape[1] < 2:
        raise EdgecError("labels given but the model's first output is not a class-score vector")
    if labels.max(initial=0) >= scores.shape[1]:
        raise EdgecError(f"labels go up to {labels.max()}, the model scores only {scores.shape[1]} classes")
    order = np.argsort(-scores, axis=1)
    res = {"samples": len(labels), "top1": float(np.mean(order[:, 0] == labels))}
    if scores.shape[1] >= 5:
        res["top5"] = float(np.mean((order[:, :5] == labels[:, None]).any(axis=1)))
    return res


def fidelity(ref_outs, outs) -> dict:
    cos, rel, max_abs, sum_abs, count, agree = [], [], 0.0, 0.0, 0, 0
    for r, o in zip(ref_outs, outs):
        a = np.concatenate([x.reshape(-1) for x in r]).astype(np.float64)
        b = np.concatenate([x.reshape(-1) for x in o]).astype(np.float64)
        if a.shape != b.shape:
            raise EdgecError(f"model and reference outputs differ in size ({b.size} vs {a.size} values)")
        if not np.all(np.isfinite(b)):
            cos.append(-1.0)
        else:
            na, nb = np.linalg.norm(a), np.linalg.norm(b)
            cos.append(1.0 if na == nb == 0 else min(1.0, float(a @ b / (na * nb))) if na and nb else 0.0)
        d = np.abs(a - b)
        rel.append(float(np.linalg.norm(np.nan_to_num(d, nan=np.inf)) / (np.linalg.norm(a) + 1e-12)))
        max_abs, sum_abs, count = max(max_abs, float(np.nan_to_num(d, nan=np.inf).max(initial=0))), sum_abs + float(d.sum()), count + d.size
        agree += int(np.argmax(r[0].reshape(-1)) == np.argmax(o[0].reshape(-1)))
    return {"samples": len(outs), "cosine": float(np.mean(cos)), "min_cosine": float(np.min(cos)),
            "rel_l2_err": float(np.mean(rel)),
            "max_abs_err": max_abs, "mean_abs_err": sum_abs / max(count, 1), "argmax_agreement": agree / max(len(outs), 1)}


def evaluate(model: onnx.ModelProto, data: Dataset, reference: onnx.ModelProto | None = None, progress=None,
             ref_outs=None) -> dict:
    """Accuracy when labels exist; fidelity against the reference when one is given (both if both)."""
    outs = predict(model, data, progress)
    res: dict = {}
    if data.labels is not None:
        res.update(accuracy(outs, data.labels))
    if reference is not None or ref_outs is not None:
        if ref_outs is None:
            ref_outs = predict(reference, data, progress, "evaluating reference")
        res["fidelity"] = fidelity(ref_outs, outs)
    if not res:
        raise EdgecError(f"{data.source} has no labels; pass --reference REF.onnx to measure fidelity instead")
    return res
