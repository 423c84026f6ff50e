"""Shared timing for benchmarks: onnxruntime and edgec's compiled bench program, in the same run.

Absolute times on shared machines are noisy; what counts is the ratio measured in one run.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

from edgec.model import graph_inputs, load_model


def random_inputs(model_path: Path, shapes: dict | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    model = load_model(model_path, shapes)
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in graph_inputs(model)}


def ort_session(model_path: Path, threads: int) -> "ort.InferenceSession":
    """onnxruntime as the benchmarks run it: intra-op threads = `threads`, sequential execution, all graph
    optimizations, CPU provider."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"])


def time_onnxruntime(model_path: Path, feeds: dict, threads: int, runs: int, warmup: int) -> list[float]:
    """Per-run milliseconds of ort_session(model_path, threads)."""
    sess = ort_session(model_path, threads)
    for _ in range(warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def time_edgec(bench_binary: Path, threads: int, runs: int, warmup: int) -> dict:
    """Run the generated bench program; returns its JSON report (runs_ms, init_ms, ...)."""
    proc = subprocess.run([str(bench_binary), "--runs", str(runs), "--warmup", str(warmup), "--threads", str(threads)],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def median(xs) -> float:
    return float(statistics.median(xs))


def without_initializer_inputs(src: Path, dst: Path) -> Path:
    """Copy of a model whose graph inputs no longer list its initializers (old exporters did): engines must not
    treat weights as overridable inputs, which keeps onnxruntime from folding them and trips some converters."""
    import onnx
    m = onnx.load(str(src))
    names = {t.name for t in m.graph.initializer}
    keep = [i for i in m.graph.input if i.name not in names]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    onnx.save(m, str(dst))
    return dst
