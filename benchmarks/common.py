"""Shared timing for benchmarks: onnxruntime and edgec's compiled bench program, in the same run.

Absolute times on shared machines are noisy; what counts is the ratio measured in one run. Every time here is
wall-clock milliseconds per inference unless a name says CPU. Warm-up is at least `warmup` runs and at least
WARMUP_MS of wall time for both engines: a fresh process or session is not timed in its first milliseconds
(docs/benchmarks.md, "A young process").
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

WARMUP_MS = 250.0  # the generated bench program's own default


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


def time_onnxruntime(model_path: Path, feeds: dict, threads: int, runs: int, warmup: int,
                     warmup_ms: float = WARMUP_MS) -> list[float]:
    """Per-run wall-clock milliseconds of ort_session(model_path, threads), after at least `warmup` runs and
    `warmup_ms` of warm-up."""
    sess = ort_session(model_path, threads)
    n, t0 = 0, time.perf_counter()
    while n < warmup or (time.perf_counter() - t0) * 1e3 < warmup_ms:
        sess.run(None, feeds)
        n += 1
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def time_edgec(bench_binary: Path, threads: int, runs: int, warmup: int, warmup_ms: float = WARMUP_MS) -> dict:
    """Run the generated bench program once (a fresh process); returns its JSON report: runs_ms (wall clock),
    runs_cpu_ms (the process's CPU time), warmup_runs, init_ms, ..."""
    proc = subprocess.run([str(bench_binary), "--runs", str(runs), "--warmup", str(warmup), "--warmup-ms",
                           str(warmup_ms), "--threads", str(threads)], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


class BenchServer:
    """One generated bench program kept running (`bench --serve`): each time() is a request for warm-up and
    timed runs in the same warm process, as the engines timed inside this Python process get. close() ends it."""

    def __init__(self, bench_binary: Path, threads: int):
        self.proc = subprocess.Popen([str(bench_binary), "--serve", "--threads", str(threads)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def time(self, runs: int, warmup: int, warmup_ms: float = 0.0) -> dict:
        """The bench JSON report of `runs` timed runs after at least `warmup` runs and `warmup_ms` ms."""
        try:
            self.proc.stdin.write(f"{int(runs)} {int(warmup)} {float(warmup_ms)}\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (OSError, ValueError):  # the program ended, or close() was called
            line = ""
        if not line:
            err = self.close()
            raise RuntimeError(f"bench --serve ended without a result: {err or 'no message'}")
        return json.loads(line)

    def close(self) -> str:
        """Ends the program; returns the last line it wrote to stderr, if any."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        err = self.proc.stderr.read() if self.proc.stderr and not self.proc.stderr.closed else ""
        if self.proc.stderr:
            self.proc.stderr.close()
        if self.proc.stdout:
            self.proc.stdout.close()
        lines = [ln for ln in err.splitlines() if ln.strip()]
        return lines[-1] if lines else ""


def check_target(ap, name: str) -> None:
    """--target NAME for a benchmark that runs its builds here: an unknown or foreign target is one line."""
    from edgec.codegen.targets import get_target

    try:
        runs_here = get_target(name).runs_natively()
    except Exception as e:  # an unknown name: the CLI's line
        ap.error(f"--target {name}: {' '.join(str(e).split())[:200]}")
    if not runs_here:
        ap.error(f"--target {name}: this CPU cannot run it")


def median(xs) -> float:
    return float(statistics.median(xs))


ENGINE_MIN_OPSET = 13


def without_initializer_inputs(src: Path, dst: Path) -> Path:
    """Copy of a model whose graph inputs no longer list its initializers (old exporters did): engines must not
    treat weights as overridable inputs, which keeps onnxruntime from folding them and trips some converters.
    An older opset is converted to ENGINE_MIN_OPSET (onnx's version converter) for every engine: pnnx and MNN's
    converter read an opset-9 Softmax with opset 13's default axis (-1), so SqueezeNet's softmax over
    [1, 1000, 1, 1] became one over the last, size-1 axis (every output 1.0: "wrong output"); the converted graph
    states the axis (Flatten, Softmax axis -1, Reshape) and gives onnxruntime exactly the same output."""
    import onnx
    from onnx import version_converter
    m = onnx.load(str(src))
    names = {t.name for t in m.graph.initializer}
    keep = [i for i in m.graph.input if i.name not in names]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    if next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), ENGINE_MIN_OPSET) < ENGINE_MIN_OPSET:
        m = version_converter.convert_version(m, ENGINE_MIN_OPSET)
    onnx.save(m, str(dst))
    return dst


def quantize_qdq(src: Path, dst: Path, input_name: str, batches: list, reduce_range: bool) -> Path:
    """onnxruntime quantize_static of src into dst: QDQ, per-channel int8 weights, uint8 activations, calibrated on
    batches of input_name; reduce_range: 7-bit weights (onnxruntime's advice for x86 without VNNI)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{input_name: b} for b in batches])

        def get_next(self):
            return next(self.it, None)

    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    reduce_range=reduce_range, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return dst
