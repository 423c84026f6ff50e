"""The generated bench program's warm-up (by count and by time), its long-lived --serve mode, and the benchmark
harness that keeps one bench process across its rounds (benchmarks/common.py, benchmarks/engines.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen import compile_model

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def conv_build(tmp_path_factory):
    """Conv 3x3 (8 -> 16 channels, 24x24) + ReLU + Conv 1x1, built for this machine with a 2-thread pool."""
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.2, "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((8, 16, 1, 1)).astype(np.float32) * 0.2, "w2")
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["a"], ["r"]),
         helper.make_node("Conv", ["r", "w2"], ["y"])],
        "benchconv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 24, 24])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 24, 24])], [w1, b1, w2])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    d = tmp_path_factory.mktemp("benchprog")
    onnx.save(m, d / "benchconv.onnx")
    b = compile_model(d / "benchconv.onnx", d / "out", threads=2, build=True)
    return d / "benchconv.onnx", b


def _bench(b, *args, stdin=None):
    return subprocess.run([str(b.binaries["bench"]), *args], input=stdin, capture_output=True, text=True,
                          timeout=120)


def test_warmup_by_count_and_by_time(conv_build):
    _, b = conv_build
    res = _bench(b, "--runs", "3", "--warmup", "4", "--warmup-ms", "0")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["warmup_runs"] == 4 and len(doc["runs_ms"]) == len(doc["runs_cpu_ms"]) == 3
    assert isinstance(doc["timed_minflt"], int) and doc["timed_minflt"] >= 0
    assert isinstance(doc["timed_nivcsw"], int) and doc["timed_nivcsw"] >= 0
    # a layer this small runs in well under a millisecond: 60 ms of warm-up takes many more runs than 1
    doc = json.loads(_bench(b, "--runs", "2", "--warmup", "1", "--warmup-ms", "60").stdout)
    assert doc["warmup_ms"] >= 60 and doc["warmup_runs"] > 1
    # the default: at least 5 runs and 250 ms
    doc = json.loads(_bench(b, "--runs", "1").stdout)
    assert doc["warmup_runs"] >= 5 and doc["warmup_ms"] >= 250


def test_serve_answers_each_request_from_one_process(conv_build):
    _, b = conv_build
    res = _bench(b, "--serve", "--threads", "2", stdin="3 2 0\n2 0 40\n5 1 0\n")
    assert res.returncode == 0, res.stderr
    docs = [json.loads(ln) for ln in res.stdout.splitlines()]
    assert [len(d["runs_ms"]) for d in docs] == [3, 2, 5]
    assert docs[0]["warmup_runs"] == 2 and docs[1]["warmup_ms"] >= 40 and docs[2]["warmup_runs"] == 1
    assert all(d["threads"] == 2 for d in docs)
    assert len({d["init_ms"] for d in docs}) == 1  # started once: every answer carries the same start-up


@pytest.mark.parametrize("args, stdin", [(["--serve"], "3 x 0\n"), (["--serve"], "0 1 0\n"), (["--runs"], None),
                                         (["--bogus", "1"], None)])
def test_bad_arguments_and_requests_are_one_line(conv_build, args, stdin):
    _, b = conv_build
    res = _bench(b, *args, stdin=stdin)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and res.stderr.startswith("bench: ")


def test_harness_keeps_one_bench_process_across_rounds(conv_build, monkeypatch):
    """compare() times edgec through one bench --serve child and ends it; onnxruntime is the output oracle."""
    path, b = conv_build
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from common import BenchServer
        from engines import Edgec, OnnxRuntime, compare
    finally:
        sys.path.remove(str(BENCHMARKS))
    srv = BenchServer(b.binaries["bench"], 2)
    first, second = srv.time(3, 1), srv.time(2, 0, 30.0)
    assert srv.close() == "" and srv.proc.returncode == 0
    assert first["init_ms"] == second["init_ms"] and len(second["runs_ms"]) == 2 and second["warmup_ms"] >= 30
    with pytest.raises(RuntimeError, match="bench --serve ended"):
        srv.time(1, 0)

    feeds = {"x": np.random.default_rng(0).standard_normal((1, 8, 24, 24)).astype(np.float32)}
    engines = [Edgec(), OnnxRuntime()]
    made = []
    real = BenchServer.__init__

    def spy(self, *a, **k):
        real(self, *a, **k)
        made.append(self)

    monkeypatch.setattr(BenchServer, "__init__", spy)
    rows = compare("benchconv", path, feeds, engines, [1], 6, 3, 1, 1e-3, path.parent / "cmp",
                   out=lambda *a, **k: None, pause=0.0)
    assert rows[0]["status"] == {} and set(rows[0]["ms"]) == {"edgec", "onnxruntime"}
    assert all(v > 0 for v in rows[0]["ms"].values())
    assert len(made) == 1 and made[0].proc.returncode == 0  # one process for all 3 rounds, ended afterwards
