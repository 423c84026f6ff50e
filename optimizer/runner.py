"""Running models with onnxruntime: the oracle for every check, evaluation and latency figure."""

from __future__ import annotations

import statistics
import time

import numpy as np
import onnx
import onnxruntime as ort

from edgec.errors import EdgecError
from edgec.model import graph_inputs

_ORT_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
               "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(uint8)": np.uint8,
               "tensor(int8)": np.int8, "tensor(bool)": np.bool_}


def session(model: onnx.ModelProto | bytes, threads: int = 1, optimize: bool = False) -> ort.InferenceSession:
    """A CPU session. Graph optimizations are off by default so we measure the model as written."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model if isinstance(model, bytes) else model.SerializeToString()
    try:
        return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise EdgecError(f"onnxruntime cannot load the model: {' '.join(str(e).split())[:300]}") from None


def run(sess: ort.InferenceSession, samples: list[dict[str, np.ndarray]], progress=None) -> list[list[np.ndarray]]:
    """Run one feed per sample; returns the outputs of each."""
    outs = []
    for feed in samples:
        outs.append(sess.run(None, feed))
        if progress is not None:
            progress()
    return outs


def random_feeds(model: onnx.ModelProto, n: int = 2, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Random inputs for equivalence checks: normal floats, small non-negative ints."""
    rng = np.random.default_rng(seed)
    feeds = []
    for _ in range(n):
        feed = {}
        for info in graph_inputs(model):
            if not info.is_static():
                raise EdgecError(f"input {info.name!r} has dynamic shape {list(info.shape)}; pass --input-shape")
            dt = np.dtype(info.dtype)
            if dt.kind == "f":
                feed[info.name] = rng.standard_normal(info.shape).astype(dt)
            else:
                feed[info.name] = rng.integers(0, 4, size=info.shape).astype(dt)
        feeds.append(feed)
    return feeds


def latency_ms(model: onnx.ModelProto, feed: dict[str, np.ndarray], runs: int = 30, warmup: int = 5) -> float:
    """Median single-thread latency with onnxruntime's default optimizations, as a user would deploy it."""
    sess = session(model, threads=1, optimize=True)
    for _ in range(warmup):
        sess.run(None, feed)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feed)
        times.append((time.perf_counter() - t0) * 1e3)
    return float(statistics.median(times))


def with_outputs(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """A copy that also exposes the given intermediate tensors as graph outputs (dtype/shape left open)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for name in names:
        if name not in have:
            m.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
            have.add(name)
    return m


def compare(ref: list[np.ndarray], got: list[np.ndarray]) -> float:
    """Largest absolute difference relative to the reference's magnitude (0 means identical)."""
    worst = 0.0
    for a, b in zip(ref, got):
        a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
        if a64.shape != b64.shape:
            return float("inf")
        scale = max(1.0, float(np.abs(a64).max(initial=0.0)))
        worst = max(worst, float(np.abs(a64 - b64).max(initial=0.0)) / scale)
    return worst
