"""Convs with few input channels (stems): edgec's direct kernel (EDGEC_SMALLC=direct) against its GEMM path
(EDGEC_SMALLC=gemm) and onnxruntime, one-node models (Conv + bias + ReLU), same run.

Each round runs every build once, in alternating order (A, B, onnxruntime, then B, A, ... next round), so a
busy spell on a shared host hits every column. A build's figure per round is the minimum of the bench
program's per-run process CPU time (runs_cpu_ms, 1 thread: the layer's thread CPU time plus the bench loop);
the table gives the median over rounds and the best round. onnxruntime: process_time per run, 1 thread.

    python benchmarks/bench_smallc.py --rounds 7 --md
    python benchmarks/bench_smallc.py --threads 2 --rounds 7   # wall time (runs_ms), 2 threads
    python benchmarks/bench_smallc.py --models squeezenet,resnet50 --threads 1 --rounds 7 --md

--models: whole models (the onnx light fixtures with random weights, as bench_models.py runs them) built twice, the
cost model's picks (stems on the direct kernel) against EDGEC_SMALLC=gemm, and onnxruntime, same protocol.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ort_session, random_inputs, time_edgec  # noqa: E402

from edgec.codegen import build_project, compile_model  # noqa: E402
from edgec.codegen.options import CompileOptions  # noqa: E402

# name, C, K, H = W, kernel, stride, pad
LAYERS = [
    ("SqueezeNet 1.1 stem 3x3 s2 3->64 @224", 3, 64, 224, 3, 2, 0),
    ("ResNet-50 stem 7x7 s2 3->64 @224", 3, 64, 224, 7, 2, 3),
    ("MobileNet stem 3x3 s2 3->32 @224", 3, 32, 224, 3, 2, 1),
    ("3x3 s1 3->16 @64", 3, 16, 64, 3, 1, 1),
    ("3x3 s1 1->32 @28", 1, 32, 28, 3, 1, 1),
    ("5x5 s1 4->24 @96", 4, 24, 96, 5, 1, 2),
]


def conv_model(path: Path, c: int, k: int, hw: int, ks: int, stride: int, pad: int) -> Path:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((k, c, ks, ks)) / np.sqrt(c * ks * ks)).astype(np.float32)
    b = (0.1 * rng.standard_normal(k)).astype(np.float32)
    ho = (hw + 2 * pad - ks) // stride + 1
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", strides=[stride, stride], pads=[pad] * 4),
             helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, k, ho, ho])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def ab(bins: dict, sess, feeds: dict, threads: int, rounds: int, runs: int) -> dict[str, list[float]]:
    """Per round, the minimum per-run ms of each build and of onnxruntime, the builds' order alternating."""
    key = "runs_cpu_ms" if threads == 1 else "runs_ms"
    res: dict[str, list[float]] = {m: [] for m in [*bins, "ort"]}
    for r in range(rounds):
        order = list(bins) if r % 2 == 0 else list(bins)[::-1]
        for m in [*order, "ort"]:
            if m == "ort":
                for _ in range(5):
                    sess.run(None, feeds)
                ts = []
                for _ in range(runs):
                    t0, c0 = time.perf_counter(), time.process_time()
                    sess.run(None, feeds)
                    ts.append((time.process_time() - c0 if threads == 1 else time.perf_counter() - t0) * 1e3)
                res[m].append(min(ts))
            else:
                res[m].append(min(time_edgec(bins[m], threads, runs, 5)[key]))
    return res


def models(a) -> int:
    from bench_models import engine_model as model_path

    head = ["model", "threads", "stems (auto)", "auto ms", "smallc=gemm ms", "auto / gemm", "onnxruntime ms",
            "auto / ort", "gemm / ort"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head) if a.md else "  ".join(head))
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        for name in a.models.split(","):
            path, _ = model_path(name, tmp)
            bins, stems = {}, ""
            for mode in ("auto", "gemm"):
                b = compile_model(path, tmp / f"{name}-{mode}", options=CompileOptions(threads=a.threads, smallc=mode))
                bins[mode] = build_project(b.dir)["bench"]
                if mode == "auto":
                    stems = ", ".join(l["algo"] for l in b.layers if l["algo"].startswith("direct-smallc")) or "none"
            feeds = random_inputs(path)
            res = ab(bins, ort_session(path, a.threads), feeds, a.threads, a.rounds, a.runs)
            med = {m: statistics.median(v) for m, v in res.items()}
            row = [name, str(a.threads), stems, f"{med['auto']:.3f}", f"{med['gemm']:.3f}",
                   f"{med['auto'] / med['gemm']:.3f}", f"{med['ort']:.3f}", f"{med['auto'] / med['ort']:.3f}",
                   f"{med['gemm'] / med['ort']:.3f}"]
            print(("| " + " | ".join(row) + " |") if a.md else "  ".join(row), flush=True)
    with open("/proc/loadavg") as f:
        print(f"# load average after: {f.read().split()[:3]}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--md", action="store_true")
    ap.add_argument("--only", help="substring of the layer names to run")
    ap.add_argument("--models", help="comma-separated bench_models.py names: whole models instead of layers")
    a = ap.parse_args()
    if a.models:
        return models(a)
    key = "runs_cpu_ms" if a.threads == 1 else "runs_ms"
    head = ["layer", "edgec algo (auto)", "direct ms", "GEMM ms", "direct / GEMM", "onnxruntime ms",
            "direct / ort", "best rounds d / g / ort"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head) if a.md else "  ".join(head))
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        for i, (name, c, k, hw, ks, st, pad) in enumerate(LAYERS):
            if a.only and a.only not in name:
                continue
            path = conv_model(tmp / f"m{i}.onnx", c, k, hw, ks, st, pad)
            bins, algos = {}, {}
            for mode in ("direct", "gemm", "auto"):
                b = compile_model(path, tmp / f"{mode}{i}", options=CompileOptions(threads=a.threads, smallc=mode))
                algos[mode] = b.layers[0]["algo"]
                if mode != "auto":
                    bins[mode] = build_project(b.dir)["bench"]
            feeds = {"x": np.random.default_rng(0).standard_normal((1, c, hw, hw)).astype(np.float32)}
            sess = ort_session(path, a.threads)
            res: dict[str, list[float]] = {"direct": [], "gemm": [], "ort": []}
            for r in range(a.rounds):
                order = ["direct", "gemm", "ort"] if r % 2 == 0 else ["gemm", "direct", "ort"]
                for m in order:
                    if m == "ort":
                        for _ in range(5):
                            sess.run(None, feeds)
                        ts = []
                        for _ in range(a.runs):
                            t0, c0 = time.perf_counter(), time.process_time()
                            sess.run(None, feeds)
                            ts.append((time.process_time() - c0 if a.threads == 1 else time.perf_counter() - t0) * 1e3)
                        res[m].append(min(ts))
                    else:
                        res[m].append(min(time_edgec(bins[m], a.threads, a.runs, 5)[key]))
            med = {m: statistics.median(v) for m, v in res.items()}
            best = {m: min(v) for m, v in res.items()}
            row = [name, algos["auto"], f"{med['direct']:.3f}", f"{med['gemm']:.3f}",
                   f"{med['direct'] / med['gemm']:.2f}", f"{med['ort']:.3f}", f"{med['direct'] / med['ort']:.2f}",
                   f"{best['direct']:.3f} / {best['gemm']:.3f} / {best['ort']:.3f}"]
            print(("| " + " | ".join(row) + " |") if a.md else "  ".join(row), flush=True)
    with open("/proc/loadavg") as f:
        print(f"# load average after: {f.read().split()[:3]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
