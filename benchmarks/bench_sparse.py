"""Sparse vs dense convolution in edgec's compiled C (not a timed test).

1. Break-even table: a chain of 1x1 convs C->C at HxW, one per sparsity level, each pruned in
   blocks of the format under test; compiled once per format (EDGEC_SPARSE=sparse-<block>) and
   once dense, built with PROFILE=1; per-layer median of --runs runs. The break-even is the lowest
   measured sparsity at which the sparse layer beats the dense one.
2. Model speedup: a 1x1-heavy stack (8 x [1x1 conv + Relu]) 90% block-sparse (4x4) vs the same
   model dense, whole-model median of --runs runs each, same binary settings.

3. With --int8: the same chain pruned in 4x1 blocks and quantized (QDQ), int8 sparse vs int8 dense.

    python benchmarks/bench_sparse.py [--target native] [--runs 50] [--channels 128] [--hw 28] [--int8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen.project import compile_model

LEVELS = [0.0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
BLOCKS = ["1x1", "1x4", "4x1", "4x4"]


def pruned(rng, c, s, br, bc):
    w = rng.normal(0, 0.1, (c, c)).astype(np.float32)
    keep = rng.random((c // br, c // bc)) >= s
    return (w * np.kron(keep, np.ones((br, bc), np.float32))).reshape(c, c, 1, 1)


def chain(path: Path, weights: list[np.ndarray], c: int, hw: int) -> Path:
    nodes, inits, cur = [], [], "x"
    for i, w in enumerate(weights):
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [helper.make_node("Conv", [cur, f"w{i}"], [f"c{i}"]), helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        cur = f"r{i}"
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, c, hw, hw]) for n in ("x", cur)]
    g = helper.make_graph(nodes, "chain", vi[:1], vi[1:], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def run_bench(model: Path, out: Path, target: str, mode: str, runs: int, profile: bool) -> dict:
    os.environ["EDGEC_SPARSE"] = mode
    b = compile_model(model, out, target=target, build=True, profile=profile)
    r = subprocess.run([str(b.binaries["bench"]), "--runs", str(runs), "--warmup", "5"],
                       capture_output=True, text=True, check=True)
    d = json.loads(r.stdout)
    d["algos"] = [l["algo"] for l in b.layers]
    return d


def break_even(work: Path, target: str, c: int, hw: int, runs: int) -> dict:
    rng = np.random.default_rng(0)
    res = {}
    dense = run_bench(chain(work / "dense.onnx", [pruned(rng, c, 0.0, 1, 1) for _ in LEVELS], c, hw),
                      work / "dense", target, "dense", runs, True)
    dense_ms = statistics.median(l["ms"] for l in dense["layers"] if l["op"] == "Conv")
    for blk in BLOCKS:
        br, bc = (int(v) for v in blk.split("x"))
        m = chain(work / f"{blk}.onnx", [pruned(rng, c, s, br, bc) for s in LEVELS], c, hw)
        d = run_bench(m, work / blk, target, f"sparse-{blk}", runs, True)
        ms = [l["ms"] for l in d["layers"] if l["op"] == "Conv"]
        be = next((s for s, t in zip(LEVELS, ms) if t < dense_ms), None)
        res[blk] = {"sparse_ms": dict(zip(LEVELS, ms)), "dense_ms": dense_ms, "break_even": be}
    return res


def int8_break_even(work: Path, target: str, c: int, hw: int, runs: int) -> dict:
    """Same chain pruned in 4x1 blocks, quantized (QDQ, per-channel int8), int8 sparse vs int8 dense."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": np.random.default_rng(i).normal(0, 1, (1, c, hw, hw)).astype(np.float32)}
                            for i in range(4)])

        def get_next(self):
            return next(self.it, None)

    rng = np.random.default_rng(2)
    f32 = chain(work / "q_chain.onnx", [pruned(rng, c, s, 4, 1) for s in LEVELS], c, hw)
    q = work / "q_chain_int8.onnx"
    quantize_static(str(f32), str(q), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    ms = {}
    for mode in ("dense", "sparse-4x1"):
        d = run_bench(q, work / f"q_{mode}", target, mode, runs, True)
        ms[mode] = [l["ms"] for l in d["layers"] if l["op"] == "QLinearConv"]
    be = next((s for s, a, b in zip(LEVELS, ms["sparse-4x1"], ms["dense"]) if a < b), None)
    return {"dense_ms": dict(zip(LEVELS, ms["dense"])), "sparse_ms": dict(zip(LEVELS, ms["sparse-4x1"])),
            "break_even": be}


def model_speedup(work: Path, target: str, c: int, hw: int, runs: int) -> dict:
    rng = np.random.default_rng(1)
    ws = [pruned(rng, c, 0.9, 4, 4) for _ in range(8)]
    m = chain(work / "stack.onnx", ws, c, hw)
    sp = run_bench(m, work / "stack_sparse", target, "auto", runs, False)
    de = run_bench(m, work / "stack_dense", target, "dense", runs, False)
    a, b = statistics.median(sp["runs_ms"]), statistics.median(de["runs_ms"])
    return {"sparse_ms": a, "dense_ms": b, "speedup": b / a, "algos": sp["algos"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="native")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--channels", type=int, default=128)
    ap.add_argument("--hw", type=int, default=28)
    ap.add_argument("--int8", action="store_true", help="also the int8 4x1 sparse kernel vs the int8 GEMM")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        be = break_even(work, a.target, a.channels, a.hw, a.runs)
        sp = model_speedup(work, a.target, a.channels, a.hw, a.runs)
        q8 = int8_break_even(work, a.target, a.channels, a.hw, a.runs) if a.int8 else None
    print(f"## 1x1 conv {a.channels}->{a.channels} at {a.hw}x{a.hw}, target {a.target}, 1 thread, "
          f"median of {a.runs} runs (ms per layer)\n")
    print("| block | dense | " + " | ".join(f"s={s}" for s in LEVELS) + " | break-even |")
    print("|---|---|" + "---|" * len(LEVELS) + "---|")
    for blk, r in be.items():
        cells = " | ".join(f"{r['sparse_ms'][s]:.3f}" for s in LEVELS)
        print(f"| {blk} | {r['dense_ms']:.3f} | {cells} | {r['break_even']} |")
    print(f"\n8 x (1x1 conv + Relu), 90% 4x4-block sparse: sparse {sp['sparse_ms']:.3f} ms, dense "
          f"{sp['dense_ms']:.3f} ms, speedup {sp['speedup']:.2f}x (layers: {sorted(set(sp['algos']))})")
    if q8:
        print(f"\nint8, 4x1 blocks, target {a.target} (ms per layer; dense = int8 GEMM on the same layer)\n")
        print("| kernel | " + " | ".join(f"s={s}" for s in LEVELS) + " | break-even |")
        print("|---|" + "---|" * len(LEVELS) + "---|")
        for k in ("dense_ms", "sparse_ms"):
            print(f"| {k[:-3]} | " + " | ".join(f"{q8[k][s]:.3f}" for s in LEVELS) + f" | {q8['break_even']} |")
    print(json.dumps({"break_even": be, "stack": sp, "int8": q8}, default=str))


if __name__ == "__main__":
    main()
