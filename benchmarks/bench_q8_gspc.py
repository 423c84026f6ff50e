"""int8 grouped convs: the vpmaddubsw GSPC kernel (7-bit weights), the vpmaddwd GSPC kernel and the packed GEMM
(EDGEC_Q8CONV=q8-gemm) on the same layer shapes, per layer, CPU-time interleaved rounds (not a timed test).

Each shape is a one-conv model (grouped KxK conv + ReLU, float), quantized by onnxruntime quantize_static (QDQ,
per-channel int8 weights, uint8 activations); "--digits" adds the digits CNN's three grouped 3x3 layers in their
model. Builds (tuning records off, so only the cost model and the forced switch pick):
  maddubs  the reduce_range (7-bit) model, EDGEC_Q8CONV=q8-gspc: q8_gspc_o8__avx2_maddubs (it is exact there)
  vpmaddwd the 8-bit model, EDGEC_Q8CONV=q8-gspc: q8_gspc_o8__avx2 (the weights fail the pair bound; the
           kernel's speed does not depend on the weight values)
  gemm     the 7-bit model, EDGEC_Q8CONV=q8-gemm: the packed vpmaddubsw GEMM
  gemm8    the 8-bit model, EDGEC_Q8CONV=q8-gemm: the packed vpmaddwd GEMM (what 8-bit weights get instead of
           the vpmaddwd GSPC kernel)
and the 7-bit model's default pick (choose_int8_conv, compiled only) is shown beside them.
Each build is a PROFILE build; every round runs each build's bench once (order reversed every other round). For
the digits layers it reads the layer's per-layer ms (wall clock), for a one-conv model the median CPU time of a
run of the whole model (its input Quantize and output Dequantize, the same in every build, included): steadier on
a shared host. The table gives each build's median and fastest round; the ratios are of the fastest rounds.

    python benchmarks/bench_q8_gspc.py --digits --shape 128:28:2 --shape 64:56:4 --rounds 7 --runs 2000
    (--shape C:HW:g[:k[:s]], C input = output channels)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import median, quantize_qdq  # noqa: E402

from edgec import zoo  # noqa: E402
from edgec.codegen.options import CompileOptions  # noqa: E402
from edgec.codegen.project import compile_model  # noqa: E402


def conv_model(path: Path, c: int, hw: int, g: int, k: int, s: int) -> Path:
    rng = np.random.default_rng(c * 1000 + hw * 10 + g)
    w = (rng.standard_normal((c, c // g, k, k)) * np.sqrt(2.0 / (c // g * k * k))).astype(np.float32)
    b = (rng.standard_normal(c) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k], pads=[k // 2] * 4, strides=[s, s],
                              group=g), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "gconv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    return path


def layer_ms(bench: Path, runs: int, warmup: int) -> dict:
    r = subprocess.run([str(bench), "--runs", str(runs), "--warmup", str(warmup), "--threads", "1"],
                       capture_output=True, text=True, check=True)
    d = json.loads(r.stdout)
    return {**{l["name"]: l["ms"] for l in d["layers"]}, "": median(d["runs_cpu_ms"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", default=[], help="C:HW:g[:k[:s]]")
    ap.add_argument("--digits", action="store_true", help="the digits CNN's grouped 3x3 layers")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_q8_gspc_"))
    rng = np.random.default_rng(0)
    models = []  # (label, 7-bit path, 8-bit path, shapes, conv layer names or None for every grouped conv)
    if args.digits:
        d = zoo.digits_cnn()
        x = np.load(d.data)["input"]
        cal = [x[i:i + 1] for i in range(64)]
        models.append(("digits",
                       *(quantize_qdq(d.model, work / f"digits{t}.onnx", "input", cal, t == "7") for t in "78"),
                       {"input": [1, 1, 8, 8]}))
    for spec in args.shape:
        c, hw, g, k, s = ([int(v) for v in spec.split(":")] + [3, 1])[:5]
        f = conv_model(work / f"c{c}_{hw}_g{g}.onnx", c, hw, g, k, s)
        cal = [rng.uniform(-1, 1, (1, c, hw, hw)).astype(np.float32) for _ in range(4)]
        models.append((f"{c}ch {hw}x{hw} g={g} {k}x{k}/{s}",
                       *(quantize_qdq(f, work / f"c{c}_{hw}_g{g}_{t}.onnx", "x", cal, t == "7") for t in "78"),
                       {"x": [1, c, hw, hw]}))
    load0 = Path("/proc/loadavg").read_text().split()[0]
    print(f"threads 1, {args.rounds} rounds x {args.runs} runs (PROFILE builds), load {load0}\n")
    print("| layer | maddubs GSPC | q8 GEMM (maddubs) | vpmaddwd GSPC | q8 GEMM (vpmaddwd) | 7-bit default pick | "
          "maddubs GSPC / GEMM | vpmaddwd GSPC / GEMM |")
    print("|---|---|---|---|---|---|---|---|")
    for label, q7, q8, shapes in models:
        builds, kernels = {}, {}
        for tag, m, force in (("maddubs", q7, "q8-gspc"), ("vpmaddwd", q8, "q8-gspc"), ("gemm", q7, "q8-gemm"),
                               ("gemm8", q8, "q8-gemm")):
            opts = CompileOptions(target="native", threads=1, q8conv=force, tuning="off")
            b = compile_model(m, work / f"{label.replace(' ', '_').replace('/', '_')}_{tag}", input_shapes=shapes,
                              build=True, profile=True, options=opts)
            builds[tag] = b.binaries["bench"]
            kernels[tag] = {l["name"]: (l["algo"], l.get("details", {}).get("kernel"))
                            for l in b.layers if l["op"] == "QLinearConv" or l["algo"].startswith("q8-g")}
        auto = compile_model(q7, work / f"{label.replace(' ', '_').replace('/', '_')}_auto", input_shapes=shapes,
                             options=CompileOptions(target="native", threads=1, tuning="off"))
        picks = {l["name"]: l["algo"] for l in auto.layers}
        names = [n for n, (a, kern) in kernels["vpmaddwd"].items() if a == "q8-gspc" and picks[n] != "q8-dwconv"]
        ms = {t: {n: [] for n in names} for t in builds}
        loads = []
        for r in range(args.rounds):
            loads.append(float(Path("/proc/loadavg").read_text().split()[0]))
            for t in (list(builds) if r % 2 == 0 else list(builds)[::-1]):
                lm = layer_ms(builds[t], args.runs, args.warmup)
                for n in names:  # one-conv models: the whole model's CPU time (Q/DQ of its input and output in it)
                    ms[t][n].append(lm[n if label == "digits" else ""] * 1000)
        for n in names:
            cell = {t: f"{median(ms[t][n]):.2f} / {min(ms[t][n]):.2f}" for t in builds}
            pick = kernels["maddubs"][n]
            print(f"| {label} {n if label == 'digits' else ''} (load {min(loads):.1f}-{max(loads):.1f}) | "
                  f"{cell['maddubs']} ({pick[1]}) | {cell['gemm']} | {cell['vpmaddwd']} | {cell['gemm8']} | "
                  f"{picks[n]} | {min(ms['maddubs'][n]) / min(ms['gemm'][n]):.2f} | "
                  f"{min(ms['vpmaddwd'][n]) / min(ms['gemm8'][n]):.2f} |")
    print("\nus: median / fastest round (digits: the layer, wall clock; others: the one-conv model, CPU time)")


if __name__ == "__main__":
    main()
