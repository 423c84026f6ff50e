"""The accuracy guard: keep the layers that hurt most in float until the budget holds.

Budget: `max_accuracy_drop` (top-1 points vs the fp32 model, needs labels) or `min_cosine` (mean per-sample
cosine vs the fp32 outputs). A layer's own error is 1 - cosine of the model outputs vs fp32 when only that
layer runs int8 (on up to 32 held-out samples; calibration ranges are reused, so this costs one QDQ
insertion per layer). Layers are kept float one by one, worst first (the most-float mix allowed is checked
first), then each kept layer is taken out once, most MACs first, and goes back to int8 if the budget holds
without it. A candidate that fails stops being scored as soon as the samples seen break the budget whatever
the rest give (the fp32 outputs are computed once). A mix keeps at least one layer int8 and at most
`max_float_layers` float; if even the most-float mix allowed breaks the budget, no mix meets it and the guard
fails without writing a model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import onnx

from edgec.errors import EdgecError
from edgec.optimizer.data import Dataset
from edgec.optimizer.evaluate import accuracy, fidelity, predict
from edgec.optimizer.quantize import Quantizer, quantized_nodes
from edgec.optimizer.runner import session


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
        self.outs, self.last_model = self.ref, None  # the outputs and model of the last score

    def score(self, model: onnx.ModelProto, label: str = "evaluating", stop_early: bool = False) -> dict:
        """Scores on all samples; with stop_early, stops as soon as the samples seen so far break the budget
        whatever the rest give (then `samples` < len(data), `failed_early`, and the numbers are over those)."""
        self.last_model = model
        if not stop_early:
            self.outs = predict(model, self.data, self.progress, label)
            return self._score(self.outs)
        sess = session(model)
        outs, n = [], len(self.data)
        for i, feed in enumerate(self.data.feeds):
            outs.append(sess.run(None, feed))
            if i % 8 == 7 and i + 1 < n and self._hopeless(outs):
                self.outs = outs
                res = self._score(outs)
                res.update(samples=len(outs), failed_early=True)
                return res
        self.outs = outs
        return self._score(outs)

    def _score(self, outs) -> dict:
        k = len(outs)
        fid = fidelity(self.ref[:k], outs)
        res = {"cosine": fid["cosine"], "agreement": fid["argmax_agreement"]}
        if self.data.labels is not None:
            res["top1"] = accuracy(outs, self.data.labels[:k])["top1"]
            base = self.base if k == len(self.data) else accuracy(self.ref[:k], self.data.labels[:k])["top1"]
            res["drop_points"] = (base - res["top1"]) * 100
        return res

    def _hopeless(self, outs) -> bool:
        """Even if every remaining sample came out right (cosine 1, argmax as fp32, label right), the budget breaks."""
        k, n = len(outs), len(self.data)
        rest = n - k
        if self.budget.max_accuracy_drop is not None:
            right = sum(int(np.argmax(o[0].reshape(-1)) == y) for o, y in zip(outs, self.data.labels[:k]))
            best = (right + rest) / n
            return (self.base - best) * 100 > self.budget.max_accuracy_drop + 1e-9
        fid = fidelity(self.ref[:k], outs)
        if self.budget.min_cosine is not None and (fid["cosine"] * k + rest) / n < self.budget.min_cosine:
            return True
        if self.budget.min_agreement is not None and \
                (fid["argmax_agreement"] * k + rest) / n < self.budget.min_agreement - 1e-12:
            return True
        return False

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


def halves(data: Dataset) -> tuple[Dataset, Dataset]:
    """Two disjoint halves (even and odd samples): the guard chooses on one and confirms on the other."""
    lab = data.labels
    return (Dataset(data.feeds[0::2], None if lab is None else lab[0::2], f"{data.source} (choice half)", data.classes),
            Dataset(data.feeds[1::2], None if lab is None else lab[1::2], f"{data.source} (confirmation half)",
                    data.classes))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k/n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def confirmation(judge: Judge, s: dict) -> dict:
    """What the confirmation half says: the score, n and, with labels, the drop's 95% interval (Wilson on the
    int8 top-1, fp32's top-1 on the same samples taken as fixed) and whether n is enough to promise the budget."""
    out = {"samples": len(judge.data), **s}
    if "top1" in s:
        n = len(judge.data)
        lo, hi = wilson(round(s["top1"] * n), n)
        out["drop_ci95"] = [(judge.base - hi) * 100, (judge.base - lo) * 100]
        b = judge.budget.max_accuracy_drop
        if b is not None:
            out["enough_data"] = out["drop_ci95"][1] <= b + 1e-9
    return out


def guarded_int8(quantizer: Quantizer, judge: Judge, log, max_float: int | None = None,
                 first_try: tuple | None = None, confirm: Judge | None = None,
                 macs: dict | None = None) -> tuple[onnx.ModelProto, dict]:
    """Quantize; if the budget breaks, keep the worst layers float until it holds on `judge`'s data (the
    choice) and on `confirm`'s (disjoint; None = no confirmation), then return to int8 every kept layer the
    budget does not need, most MACs first. first_try: (model, score) of all-int8 on judge's data, if measured."""
    q, first = first_try if first_try is not None else (None, None)
    if q is None:
        q = quantizer()
        first = judge.score(q, "evaluating int8")
    report = {"budget": str(judge.budget), "all_int8": first, "float_layers": [], "final": first,
              "choice": {"data": judge.data.source, "samples": len(judge.data)}}
    macs = macs or {}

    def passes(model, s) -> tuple[bool, dict | None]:
        if not judge.ok(s):
            return False, None
        if confirm is None:
            return True, None
        c = confirm.score(model, "confirming", stop_early=True)
        return confirm.ok(c), c

    ok, conf = passes(q, first)
    if ok:
        if confirm is not None:
            report["confirmed"] = confirmation(confirm, conf)
        return q, report
    ops = {n.name: n.op_type for n in quantizer.model.graph.node}
    names = quantized_nodes(q)
    ranked = sorted(own_errors(quantizer, names, judge, judge.progress).items(), key=lambda kv: -kv[1])
    limit = min(len(ranked) - 1, len(ranked) if max_float is None else max_float)
    why = "all-int8" if judge.ok(first) is False else "all-int8 on the confirmation half"
    log(f"budget {judge.budget} broken by {why} ({_fmt(first)}); ranking {len(ranked)} layers by own error")
    top = [n for n, _ in ranked[:max(limit, 0)]]

    def trial(k: int):
        """The k worst layers float: (model, choice score, confirmation score or None, passes)."""
        qk = quantizer(top[:k])
        sk = judge.score(qk, f"guard: {k} float layer(s)", stop_early=True)
        okk, ck = passes(qk, sk)
        return qk, sk, ck, okk

    if limit < 1:
        raise EdgecError(f"no mix of int8 and float layers meets {judge.budget} (all int8: {_fmt(first)}; no layer "
                         "may be kept float); nothing written")
    q, s, conf, ok = trial(limit)
    if not ok:
        if judge.ok(s):
            raise EdgecError(f"no mix of int8 and float layers meets {judge.budget} on both halves of the evaluation "
                             f"data (with {limit} layers float the confirmation half fails); nothing written")
        raise EdgecError(f"no mix of int8 and float layers meets {judge.budget} (all int8: {_fmt(first)}; even with "
                         f"{limit} of {len(ranked)} layers float it fails); nothing written")
    # worst first, one more layer float at a time until the budget holds (accuracy is not monotonic in the
    # number of float layers: a bisection over it kept 29 layers float on ppocr cls where this keeps a few);
    # a failing candidate stops being scored as soon as its samples break the budget
    hi = limit
    for k in range(1, limit):
        qk, sk, ck, okk = trial(k)
        if okk:
            hi, q, s, conf = k, qk, sk, ck
            break
    kept = top[:hi]
    own = dict(ranked)
    mix_outs = judge.outs  # the accepted mix's choice outputs (its full score was the last passing one)
    if judge.last_model is not q:
        judge.score(q, "guard: the chosen mix")
        mix_outs = judge.outs
    # undo the fallbacks the budget does not need, most MACs first; what each kept one is worth is measured
    # by taking it out of the final mix (over the samples scored before that trial broke the budget)
    gains = {}
    for name in sorted(kept, key=lambda n: -(macs.get(n) or 0)):
        if len(kept) == 1:
            break
        trial_set = [n for n in kept if n != name]
        qt = quantizer(trial_set)
        st = judge.score(qt, "guard: undoing a fallback", stop_early=True)
        ok_t, conf_t = passes(qt, st)
        if ok_t:
            log(f"returned {_name(name)} to int8: the budget holds without it ({_fmt(st)})")
            kept, q, s, conf, mix_outs = trial_set, qt, st, conf_t, judge.outs
        else:
            k = len(judge.outs)
            ref = judge._score(mix_outs[:k]) if k < len(mix_outs) else s
            gains[name] = {"cosine": ref["cosine"] - st["cosine"], "agreement": ref["agreement"] - st["agreement"],
                           "samples": k}
            if "top1" in st:
                gains[name]["top1_points"] = (ref["top1"] - st["top1"]) * 100
    for name in kept:
        entry = {"name": _name(name), "op": ops.get(name, "?"), "macs": macs.get(name), "own_error": own[name],
                 "gain": gains.get(name, {}), "after": s}
        report["float_layers"].append(entry)
        log(f"kept {_name(name)} ({entry['op']}, {_macs(entry['macs'])} MACs) in float: own error {own[name]:.2e}"
            + (f", gain {_gain(gains[name])}" if name in gains else ""))
    report["final"] = s
    if confirm is not None:
        report["confirmed"] = c = confirmation(confirm, conf)
        log(f"confirmed on {c['samples']} other samples: {_fmt(conf)}"
            + (f", drop 95% CI [{c['drop_ci95'][0]:.2f}, {c['drop_ci95'][1]:.2f}] points" if "drop_ci95" in c else ""))
        if c.get("enough_data") is False:
            log(f"too few evaluation samples to promise {judge.budget}: the drop's 95% interval reaches "
                f"{c['drop_ci95'][1]:.2f} points (pass more --eval data)")
    return q, report


def _name(name: str) -> str:
    return name or "(unnamed node)"


def _macs(n) -> str:
    if n is None:
        return "?"
    for unit, div in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return str(n)


def _gain(g: dict) -> str:
    parts = [f"cosine {g['cosine']:+.5f}"]
    if "top1_points" in g:
        parts.append(f"top-1 {g['top1_points']:+.2f} pts")
    return ", ".join(parts)


def _fmt(s: dict) -> str:
    parts = [f"cosine {s['cosine']:.5f}", f"argmax agreement {s['agreement'] * 100:.1f}%"]
    if "top1" in s:
        parts.append(f"top-1 {s['top1'] * 100:.2f}% (drop {s['drop_points']:.2f} pts)")
    return ", ".join(parts)


describe = _fmt
