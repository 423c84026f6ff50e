"""Activation ranges chosen per tensor to minimise that tensor's own quantization error.

For each tensor onnxruntime's quantizer wants a range for, a sample of its values on the calibration data is
quantized with each candidate range (min/max, the 99-99.99th percentiles of either tail, and 90%...20% of
min/max) and the candidate with the least mean squared error (clipping plus rounding) is kept. Min/max is
always a candidate, so no tensor gets a worse error than min/max gives it; graph outputs keep min/max (the
scores a user reads are never clipped). The ranges are written as an onnxruntime calibration cache, so
quantize_static uses them as they are.
"""

from __future__ import annotations

import zlib

import numpy as np
import onnx
from onnxruntime.quantization.calibrate import CalibrationMethod, TensorsData, save_tensors_data

from edgec.optimizer.runner import session, with_outputs

VALUES_PER_TENSOR = 20000
FRACTIONS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2)
PERCENTILES = (99.99, 99.9, 99.5, 99.0)


def _mse(v: np.ndarray, lo: np.ndarray, hi: np.ndarray, signed: bool) -> np.ndarray:
    """Mean squared quantize-dequantize error of values v for each (lo, hi) candidate (broadcast)."""
    if signed:  # symmetric int8: zero point 0
        a = np.maximum(np.abs(lo), np.abs(hi))
        scale = np.maximum(2 * a / 255.0, 1e-30)
        q = np.clip(np.round(v[None] / scale[:, None]), -128, 127)
        return ((q * scale[:, None] - v[None]) ** 2).mean(axis=1)
    rmin, rmax = np.minimum(lo, 0.0), np.maximum(hi, 0.0)
    scale = np.maximum((rmax - rmin) / 255.0, 1e-30)
    zp = np.clip(np.round(-rmin / scale), 0, 255)
    q = np.clip(np.round(v[None] / scale[:, None]) + zp[:, None], 0, 255)
    return (((q - zp[:, None]) * scale[:, None] - v[None]) ** 2).mean(axis=1)


def best_range(v: np.ndarray, lo: float, hi: float, signed: bool) -> tuple[float, float, float, float]:
    """(lo, hi, its error, min/max's error) of the candidate range with the least error on v."""
    v = v.astype(np.float64)
    his = {hi * f for f in FRACTIONS} | ({float(np.percentile(v, p)) for p in PERCENTILES} if hi > 0 else set())
    los = {lo * f for f in FRACTIONS} | ({float(np.percentile(v, 100 - p)) for p in PERCENTILES} if lo < 0 else set())
    his = sorted(h for h in his if h >= 0) if hi > 0 else [hi]
    los = sorted(x for x in los if x <= 0) if lo < 0 else [lo]
    cand_lo, cand_hi = (np.array(g, np.float64).reshape(-1) for g in np.meshgrid(los, his, indexing="ij"))
    err = _mse(v, cand_lo, cand_hi, signed)
    base = float(_mse(v, np.array([lo]), np.array([hi]), signed)[0])
    k = int(np.argmin(err))
    if err[k] >= base:
        return lo, hi, base, base
    return float(cand_lo[k]), float(cand_hi[k]), float(err[k]), base


def search_ranges(model: onnx.ModelProto, minmax: TensorsData, feeds: list[dict], signed: bool,
                  seed: int = 0) -> tuple[TensorsData, dict]:
    """Per-tensor MSE-optimal ranges for the tensors in `minmax` (onnxruntime's MinMax calibration result)."""
    outputs = {o.name for o in model.graph.output}
    names = [t for t in minmax.keys() if t not in outputs]
    # one generator per tensor, seeded by its name: onnxruntime's calibrator returns the tensors in no fixed
    # order, and one shared generator made the sampled values (so the ranges) differ from run to run
    rngs = {t: np.random.default_rng([seed, zlib.crc32(t.encode())]) for t in names}
    per_sample = max(1, -(-VALUES_PER_TENSOR // max(len(feeds), 1)))
    samples: dict[str, list] = {t: [] for t in names}
    if names and feeds:
        sess = session(with_outputs(model, names))
        out_names = [o.name for o in sess.get_outputs()]
        idx = {t: out_names.index(t) for t in names if t in out_names}
        for feed in feeds:
            outs = sess.run(None, feed)
            for t, i in idx.items():
                x = np.asarray(outs[i], np.float32).reshape(-1)
                samples[t].append(x if x.size <= per_sample else rngs[t].choice(x, per_sample, replace=False))
    data, clipped, gain = {}, 0, []
    for t in minmax.keys():
        lo, hi = (float(np.asarray(r).reshape(-1)[0]) for r in minmax[t].range_value)
        if t in samples and samples[t] and hi > lo:
            v = np.concatenate(samples[t])
            nlo, nhi, err, base = best_range(v, lo, hi, signed)
            if (nlo, nhi) != (lo, hi):
                clipped += 1
                gain.append(base / max(err, 1e-30))
            lo, hi = nlo, nhi
        data[t] = (np.array(lo, np.float32), np.array(hi, np.float32))
    summary = {"tensors": len(data), "clipped": clipped,
               "median_error_reduction": float(np.median(gain)) if gain else 1.0}
    return TensorsData(CalibrationMethod.MinMax, data), summary


def save(ranges: TensorsData, path) -> None:
    save_tensors_data(ranges, path)
