"""Transcendental epilogues: YOLO-style conv layers + SiLU (torch's Sigmoid * x), compiled by edgec with the
vector activations and with -DEC_ACT_LIBM (the fused activation lane by lane through libm, as before),
against onnxruntime, one thread, in the same run.

    python benchmarks/bench_act.py                       # the four layers below, 5 rounds x 20 runs
    python benchmarks/bench_act.py --rounds 9 --runs 30 --md
    python benchmarks/bench_act.py --case stem16@640

Each round times every variant once (edgec vector, edgec libm, edgec with ReLU, onnxruntime SiLU and
ReLU), so a busy neighbour slows all of them alike; the medians over all runs are reported (and the
ratios of the fastest runs, less sensitive to a busy host); the ratios are what to compare across machines.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import median, time_edgec, time_onnxruntime  # noqa: E402

from edgec.codegen import build_project, compile_model  # noqa: E402

# name: (cin, cout, k, stride, H=W)
CASES = {
    "stem16@640": (3, 16, 3, 2, 640),   # YOLOv5n/v8n first layer
    "stem32@320": (3, 32, 3, 2, 320),
    "1x1 32@160": (32, 32, 1, 1, 160),  # C2f / C3 1x1
    "3x3 16@160": (16, 16, 3, 1, 160),  # bottleneck 3x3, stride 1
}


def layer_model(path: Path, cin, cout, k, stride, h, act: str) -> Path:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "b")]
    p = k // 2
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[stride, stride], pads=[p, p, p, p])]
    if act == "silu":
        nodes += [helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"])]
    else:
        nodes += [helper.make_node("Relu", ["c"], ["y"])]
    ho = (h + 2 * p - k) // stride + 1
    g = helper.make_graph(nodes, "layer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, h, h])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, ho, ho])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def bench_case(name, rounds, runs, warmup, target, tmp: Path) -> dict:
    cin, cout, k, s, h = CASES[name]
    tag = name.replace(" ", "_").replace("@", "_")
    silu = layer_model(tmp / f"{tag}_silu.onnx", cin, cout, k, s, h, "silu")
    relu = layer_model(tmp / f"{tag}_relu.onnx", cin, cout, k, s, h, "relu")
    builds = {}
    for key, model, cflags in (("vector", silu, "-O3"), ("libm", silu, "-O3 -DEC_ACT_LIBM"), ("relu", relu, "-O3")):
        b = compile_model(model, tmp / f"{tag}_{key}", target=target)
        builds[key] = (build_project(b.dir, target, cflags=cflags, jobs=2)["bench"], b.layers[0]["algo"])
    feeds = {"x": np.random.default_rng(1).standard_normal((1, cin, h, h)).astype(np.float32)}
    t = {key: [] for key in ("vector", "libm", "relu", "ort", "ort_relu")}
    for _ in range(rounds):
        for key in ("vector", "libm", "relu"):
            t[key] += time_edgec(builds[key][0], 1, runs, warmup)["runs_ms"]
        t["ort"] += time_onnxruntime(silu, feeds, 1, runs, warmup)
        t["ort_relu"] += time_onnxruntime(relu, feeds, 1, runs, warmup)
    return {"case": name, "algo": builds["vector"][1], **{key: median(v) for key, v in t.items()},
            **{f"{key}_min": min(v) for key, v in t.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--target", default="native")
    ap.add_argument("--case", action="append", choices=list(CASES), help="only this layer (repeatable)")
    ap.add_argument("--md", action="store_true", help="markdown table")
    a = ap.parse_args()
    head = ["layer + SiLU", "algo", "edgec libm ms", "edgec vector ms", "libm/vector", "ort ms", "edgec/ort",
            "edgec ReLU ms", "ort ReLU ms", "min: libm/vector", "min: edgec/ort"]
    if a.md:
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    else:
        print("  ".join(head))
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.case or list(CASES):
            r = bench_case(name, a.rounds, a.runs, a.warmup, a.target, Path(tmp))
            vals = [r["case"], r["algo"], f"{r['libm']:.3f}", f"{r['vector']:.3f}", f"{r['libm'] / r['vector']:.2f}",
                    f"{r['ort']:.3f}", f"{r['vector'] / r['ort']:.2f}", f"{r['relu']:.3f}", f"{r['ort_relu']:.3f}",
                    f"{r['libm_min'] / r['vector_min']:.2f}", f"{r['vector_min'] / r['ort_min']:.2f}"]
            print(("| " + " | ".join(vals) + " |") if a.md else "  ".join(vals), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
