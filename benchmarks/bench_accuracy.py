"""int8 accuracy, step by step, on data the choices never saw (not a timed test).

Sets: ppocr cls on the rendered text-direction lines (zoo textlines-calib: first 128 to calibrate;
zoo textlines-eval: 1000 lines, even ones for the guard's choice, odd ones reported) and the digits CNN
(its 360 held-out digits: first 120 calibrate, the other 240 split the same way). Every top-1 is on the odd
half of the evaluation set, with the exact QDQ arithmetic (onnxruntime, graph optimizations off).

Rows: fp32; onnxruntime quantize_static with its defaults (QDQ, per-tensor int8, MinMax) as the anchor;
edgec int8 with every step off (--no-guard, so the raw result); then equalization, range search and bias
correction added one at a time (still --no-guard); then everything with the guard at 0.5 top-1 points
(choosing on the even half). Columns: top-1, drop vs fp32, layers kept float, optimize wall time.

    python benchmarks/bench_accuracy.py [--sets ppocr,digits] [--markdown]
"""

from __future__ import annotations

import argparse
import logging
import contextlib
import io
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

from edgec import zoo
from edgec.cli.main import main as edgec
from edgec.optimizer.data import Dataset
from edgec.optimizer.evaluate import accuracy, predict

STEPS = [("edgec int8, no steps", ["--no-equalize", "--no-range-search", "--no-bias-correction", "--no-guard"]),
         ("+ equalization", ["--no-range-search", "--no-bias-correction", "--no-guard"]),
         ("+ range search", ["--no-bias-correction", "--no-guard"]),
         ("+ bias correction", ["--no-guard"]),
         ("+ guard at 0.5 points", ["--max-accuracy-drop", "0.5"])]


class _Reader(CalibrationDataReader):
    def __init__(self, feeds):
        self.it = iter(feeds)

    def get_next(self):
        return next(self.it, None)


def _sets(name: str, d: Path):
    if name == "ppocr":
        with np.load(zoo.text_lines(*zoo.TEXT_LINES["calib"])) as c, np.load(zoo.text_lines(*zoo.TEXT_LINES["eval"])) as e:
            cx, ex, ey = c["x"][:128], e["x"], e["labels"]
        model, key, shape = zoo.ppocr_cls(), "x", ["-s", "x:1,3,48,192"]
    else:
        dc = zoo.digits_cnn()
        with np.load(dc.data) as z:
            x, y = z["input"], z["labels"]
        cx, ex, ey = x[:120], x[120:], y[120:]
        model, key, shape = dc.model, "input", []
    np.savez(d / f"{name}_calib.npz", **{key: cx})
    np.savez(d / f"{name}_eval.npz", **{key: ex}, labels=ey)
    odd = Dataset([{key: ex[i:i + 1]} for i in range(1, len(ey), 2)], ey[1::2], "odd half")
    return model, key, shape, d / f"{name}_calib.npz", d / f"{name}_eval.npz", odd, cx


def _top1(path, data) -> float:
    return accuracy(predict(onnx.load(str(path)), data), data.labels)["top1"] * 100


def run_set(name: str, d: Path) -> list[dict]:
    model, key, shape, calib, ev, odd, cx = _sets(name, d)
    base = _top1(model, odd)
    rows = [{"run": "fp32", "top1": base, "drop": 0.0, "float": "-", "seconds": None}]
    # onnxruntime's defaults, after its own pre-processing step for opset >= 13 models
    src = d / f"{name}_13.onnx"
    m = onnx.load(str(model))
    if m.opset_import[0].version < 13:
        m = onnx.version_converter.convert_version(m, 13)
    onnx.save(m, str(src))
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        quantize_static(str(src), str(d / f"{name}_ort.onnx"), _Reader([{key: cx[i:i + 1]} for i in range(len(cx))]),
                        quant_format=QuantFormat.QDQ)
    secs = time.perf_counter() - t0
    acc = _top1(d / f"{name}_ort.onnx", odd)
    rows.append({"run": "onnxruntime quantize_static defaults", "top1": acc, "drop": base - acc, "float": "-",
                 "seconds": secs})
    for label, flags in STEPS:
        out, rep = d / f"{name}_{len(rows)}.onnx", d / f"{name}_{len(rows)}.json"
        args = ["optimize", str(model), "-o", str(out), "--report", str(rep), "--quantize", "int8", "--calib", str(calib),
                *shape, *flags]
        if "--max-accuracy-drop" in flags:
            args += ["--eval", str(ev)]
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            rc = edgec(args)
        secs = time.perf_counter() - t0
        if rc != 0:
            rows.append({"run": label, "top1": None, "drop": None, "float": "failed", "seconds": secs})
            continue
        doc = json.loads(rep.read_text())
        acc = _top1(out, odd)
        kept = len(doc.get("guard", {}).get("float_layers", []))
        rows.append({"run": label, "top1": acc, "drop": base - acc, "float": str(kept), "seconds": secs,
                     "confirmed": doc.get("guard", {}).get("confirmed")})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="ppocr,digits")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    logging.getLogger().setLevel(logging.ERROR)  # onnxruntime's pre-processing hint
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model_name = next((ln.split(":", 1)[1].strip() for ln in cpu.splitlines() if ln.startswith("Model name")), "?")
    print(f"host: {model_name}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.sets.split(","):
            rows = run_set(name, Path(tmp))
            print(f"\n{name} (top-1 on the odd half of the evaluation set, n = "
                  f"{500 if name == 'ppocr' else 120})\n")
            print("| run | top-1 | drop (points) | layers in float | optimize time |")
            print("|---|---|---|---|---|")
            for r in rows:
                top1 = "-" if r["top1"] is None else f"{r['top1']:.2f}%"
                drop = "-" if r["drop"] is None else f"{r['drop']:+.2f}"
                secs = "-" if r["seconds"] is None else f"{r['seconds']:.1f} s"
                print(f"| {r['run']} | {top1} | {drop} | {r['float']} | {secs} |")
            for r in rows:
                if r.get("confirmed"):
                    c = r["confirmed"]
                    print(f"\nguard's confirmation (odd half, n = {c['samples']}): drop {c.get('drop_points', 0):.2f} "
                          f"points, 95% CI {c.get('drop_ci95')}, enough data for 0.5 points: {c.get('enough_data')}")


if __name__ == "__main__":
    main()
