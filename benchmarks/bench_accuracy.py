"""int8 accuracy, step by step, on data the choices never saw, with the compiled int8 latency beside it.

Sets: ppocr cls on the rendered text-direction lines (zoo textlines-calib: first 128 to calibrate;
zoo textlines-eval: 1000 lines, even ones for the guard's choice, odd ones reported) and the digits CNN
(its 360 held-out digits: first 120 calibrate, the other 240 split the same way). Every top-1 is on the odd
half of the evaluation set, with the exact QDQ arithmetic (onnxruntime, graph optimizations off).

Rows: fp32; onnxruntime quantize_static with its defaults (QDQ, per-tensor int8, MinMax) as the anchor;
edgec int8 with every step off (--no-guard, so the raw result); then equalization, range search, bias
correction (edgec's default) and adaround (opt-in) added one at a time (still --no-guard); the default for
`--target x86_64-avx2` (7-bit weights: the vpmaddubsw GEMM); then everything with the guard at 0.5 top-1 points
(choosing on the even half). Columns: top-1, drop vs fp32, layers kept float, share of MACs in float, optimize
wall time, predicted int8 speed-up (the report's int8_cost) and the measured one: every model compiled with
`edgec.codegen.compile_model(build=True)` for native and its bench program run here, fp32 and int8 builds in
interleaved rounds in the same run (fp32 ms / int8 ms, 1 thread).

--rates measures what optimizer/int8_cost.py's RATES hold: per-layer profiles (minimum of 5 runs) of fp32,
int8 8-bit and int8 7-bit builds of both models, MAC rates per kernel path and ns per element of the rest.
--target builds for another target this CPU runs (x86_64-avx2-vnni on an AVX-512 host, say) instead of native.

    python benchmarks/bench_accuracy.py [--sets ppocr,digits] [--rounds 3] [--runs 50] [--target native]
    python benchmarks/bench_accuracy.py --rates [--target x86_64-avx2-vnni]
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

from common import check_target, median, time_edgec

OFF = ["--no-equalize", "--no-range-search", "--no-bias-correction", "--no-adaround"]
STEPS = [("edgec int8, no steps", OFF + ["--no-guard"]),
         ("+ equalization", OFF[1:] + ["--no-guard"]),
         ("+ range search", OFF[2:] + ["--no-guard"]),
         ("+ bias correction (edgec default)", OFF[3:] + ["--no-guard"]),
         ("+ adaround (--adaround)", ["--no-guard", "--adaround"]),
         ("default, --target x86_64-avx2 (7-bit weights)", ["--no-guard", "--target", "x86_64-avx2"]),
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


TARGET = ["native"]  # --target


def _build(model: Path, d: Path, shape: list, profile: bool = False) -> Path:
    from edgec.codegen.project import compile_model
    from edgec.model import parse_input_shapes

    out = d / ("c_" + model.stem + ("_prof" if profile else ""))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        compile_model(model, out, input_shapes=parse_input_shapes(shape[1:]) if shape else None, build=True,
                      profile=profile, target=TARGET[0])
    return out / "bench"


def _latencies(benches: dict, rounds: int, runs: int) -> dict:
    """Median ms of each bench program, the programs interleaved round by round."""
    times: dict = {k: [] for k in benches}
    for _ in range(rounds):
        for k, b in benches.items():
            times[k] += time_edgec(b, 1, runs, 5)["runs_ms"]
    return {k: median(v) for k, v in times.items()}


def run_set(name: str, d: Path, rounds: int, runs: int) -> list[dict]:
    model, key, shape, calib, ev, odd, cx = _sets(name, d)
    base = _top1(model, odd)
    rows = [{"run": "fp32", "top1": base, "drop": 0.0, "float": "-", "seconds": None, "path": Path(model)}]
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
                 "seconds": secs, "path": d / f"{name}_ort.onnx"})
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
        cost = doc.get("int8_cost", {}).get("model", {})
        rows.append({"run": label, "top1": acc, "drop": base - acc, "float": str(kept), "seconds": secs,
                     "float_macs": cost.get("float_mac_share"), "predicted": cost.get("predicted_speedup"),
                     "confirmed": doc.get("guard", {}).get("confirmed"), "path": out,
                     "adaround": doc.get("int8_steps", {}).get("adaround")})
    benches = {i: _build(r["path"], d, shape) for i, r in enumerate(rows) if r.get("path")}
    ms = _latencies(benches, rounds, runs)
    for i, r in enumerate(rows):
        if i in ms:
            r["ms"], r["speedup"] = ms[i], ms[0] / ms[i]
    return rows


# --- --rates: the per-path MAC rates of optimizer/int8_cost.py ---

# path -> (fp32 algo prefixes, int8 algo prefix); the fp32 1x1 convs of the channel-blocked layout are GEMMs too
PATHS = {"gemm": (("gemm-", "conv1x1-"), "q8-gemm"), "depthwise": (("dwconv-",), "q8-dwconv"),
         "grouped": (("gspc-",), "q8-gspc")}


def _profile(bench: Path, n: int = 5) -> list[dict]:
    best: dict = {}
    for _ in range(n):
        for layer in time_edgec(bench, 1, 20, 5)["layers"]:
            if layer["name"] not in best or layer["ms"] < best[layer["name"]]["ms"]:
                best[layer["name"]] = layer
    return list(best.values())


def rates(d: Path) -> None:

    sums: dict = {}
    for name in ("ppocr", "digits"):
        model, key, shape, calib, ev, odd, cx = _sets(name, d)
        builds = {"fp32": Path(model)}
        for label, extra in (("int8", ["--full-range"]), ("int8-7bit", ["--reduce-range"])):
            out = d / f"{name}_{label}.onnx"
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                rc = edgec(["optimize", str(model), "-o", str(out), "--quantize", "int8", "--calib", str(calib), *shape,
                            "--no-guard", *extra])
            if rc != 0:
                raise SystemExit(f"optimize failed for {name} {label}")
            builds[label] = out
        for label, path in builds.items():
            for layer in _profile(_build(path, d, shape, profile=True)):
                algo = layer["algo"]
                kind = next((k for k, (f, q) in PATHS.items() if algo.startswith(q if label != "fp32" else f)), None)
                if kind is None and label != "fp32" and layer["op"].startswith("EcQ"):
                    kind = "int8 elementwise"
                elif kind is None and label == "fp32" and layer["op"] in ("Mul", "Add", "GlobalAveragePool"):
                    kind = "fp32 elementwise"
                elif kind is None and layer["op"] in ("QuantizeLinear", "DequantizeLinear"):
                    kind = layer["op"]
                if kind is None:
                    continue
                s = sums.setdefault((label, kind), [0, 0.0])
                s[0] += layer["macs"]
                s[1] += layer["ms"]
    print("| build | path | MACs or elements | ms | GMAC/s | ns per element |")
    print("|---|---|---|---|---|---|")
    for (label, kind), (macs, ms) in sorted(sums.items()):
        print(f"| {label} | {kind} | {macs} | {ms:.4f} | {macs / ms / 1e6:.2f} | {ms * 1e6 / max(macs, 1):.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="ppocr,digits")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--rates", action="store_true")
    ap.add_argument("--target", default="native")
    a = ap.parse_args()
    check_target(ap, a.target)
    TARGET[0] = a.target
    logging.getLogger().setLevel(logging.ERROR)  # onnxruntime's pre-processing hint
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model_name = next((ln.split(":", 1)[1].strip() for ln in cpu.splitlines() if ln.startswith("Model name")), "?")
    print(f"host: {model_name}; target {a.target}; load average at start: "
          f"{Path('/proc/loadavg').read_text().split()[:3]}")
    with tempfile.TemporaryDirectory() as tmp:
        if a.rates:
            rates(Path(tmp))
            return
        for name in a.sets.split(","):
            rows = run_set(name, Path(tmp), a.rounds, a.runs)
            print(f"\n{name} (top-1 on the odd half of the evaluation set, n = "
                  f"{500 if name == 'ppocr' else 120})\n")
            print("| run | top-1 | drop (points) | layers in float | MACs in float | optimize time | "
                  "int8 speed-up predicted | compiled ms (1 thread) | vs fp32 |")
            print("|---|---|---|---|---|---|---|---|---|")
            for r in rows:
                top1 = "-" if r["top1"] is None else f"{r['top1']:.2f}%"
                drop = "-" if r["drop"] is None else f"{r['drop']:+.2f}"
                secs = "-" if r["seconds"] is None else f"{r['seconds']:.1f} s"
                fm = "-" if r.get("float_macs") is None else f"{r['float_macs'] * 100:.1f}%"
                pred = "-" if r.get("predicted") is None else f"{r['predicted']:.2f}x"
                lat = "-" if "ms" not in r else f"{r['ms']:.4f}"
                sp = "-" if "speedup" not in r else f"{r['speedup']:.2f}x"
                print(f"| {r['run']} | {top1} | {drop} | {r['float']} | {fm} | {secs} | {pred} | {lat} | {sp} |")
            for r in rows:
                if r.get("adaround") and isinstance(r["adaround"], dict) and r["run"].startswith("+ adaround"):
                    ad = r["adaround"]
                    print(f"\nadaround: {ad['changed_layers']} of {ad['layers']} layers re-rounded, layer output error "
                          f"{ad['median_error_ratio']:.2f}x nearest's (median, held-out positions), {ad['seconds']:.1f} s")
                if r.get("confirmed"):
                    c = r["confirmed"]
                    print(f"\nguard's confirmation (even half's second half, n = {c['samples']}): drop "
                          f"{c.get('drop_points', 0):.2f} points, 95% CI {c.get('drop_ci95')}, enough data for 0.5 "
                          f"points: {c.get('enough_data')}")
        print(f"\nload average at the end: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
