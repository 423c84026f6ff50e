"""End to end: real models compiled, built with -Wall -Wextra -Werror, run, compared with onnxruntime.

Natively for every model; under qemu (-cpu cortex-a72) for the Arm targets on the small ones.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from edgec.codegen import build_project, compile_model, verify
from edgec.codegen.targets import get_target
from edgec.codegen.verifier import onnxruntime_outputs, run_binary

STRICT = "-O2 -Wall -Wextra -Werror"


def randomized(src, dst, seed=0):
    """The light models build their weights with ConstantOfShape (constant values, so every output is
    identical); give them random variance-preserving weights so a wrong kernel cannot hide."""
    m = onnx.load(src)
    rng = np.random.default_rng(seed)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    keep = []
    for n in m.graph.node:
        if n.op_type == "ConstantOfShape" and n.input[0] in inits:
            shape = tuple(int(d) for d in inits[n.input[0]])
            if len(shape) >= 2:
                fan = int(np.prod(shape[1:]))
                arr = rng.uniform(-1, 1, shape) * np.sqrt(3.0 / fan)
            else:
                arr = rng.uniform(0.5, 1.5, shape)
            m.graph.initializer.append(numpy_helper.from_array(arr.astype(np.float32), n.output[0]))
        else:
            keep.append(n)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    m.ir_version = max(m.ir_version, 4)  # initializers need not be listed as inputs from IR 4 on
    onnx.save(m, dst)
    return dst


@pytest.mark.slow
@pytest.mark.parametrize("name", ["squeezenet", "shufflenet", "resnet50", "inception_v1"])
def test_light_models_match_onnxruntime(onnx_light, tmp_path, name):
    model = randomized(onnx_light(name), tmp_path / f"{name}.onnx")
    r = verify(model, out_dir=tmp_path / "p", cflags=STRICT, rtol=1e-3, atol=1e-5)
    assert r.ok, r.outputs
    assert r.outputs[0]["cosine"] > 0.99999 and r.outputs[0]["argmax_agreement"] == 1.0


@pytest.mark.slow
def test_ppocr_cls_native(ppocr_cls, tmp_path):
    r = verify(ppocr_cls, input_shapes={"x": [1, 3, 48, 192]}, out_dir=tmp_path / "p", cflags=STRICT)
    assert r.ok, r.outputs


@pytest.mark.slow
@pytest.mark.torch
def test_digits_accuracy_unchanged(digits_cnn, tmp_path):
    data = np.load(digits_cnn.data)
    x, labels = data["input"], data["labels"]
    b = compile_model(digits_cnn.model, tmp_path / "p", input_shapes={"input": list(x.shape)})
    bins = build_project(b.dir, b.target, cflags=STRICT)
    got = run_binary(bins["runner"], b.target, [x], tmp_path / "run")[0]
    _, (want,) = onnxruntime_outputs(digits_cnn.model, {"input": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    acc, acc_ref = np.mean(got.argmax(1) == labels), np.mean(want.argmax(1) == labels)
    assert acc == acc_ref and acc > 0.9
    # conv epilogues took the BatchNorms before them, every activation and the residual Add
    assert {l["op"] for l in b.layers} <= {"Conv", "BatchNormalization", "MaxPool", "GlobalAveragePool", "Flatten",
                                          "Gemm", "LayoutReorder"}  # + the edges of a channel-blocked region
    assert any("/9/Add" in l["name"] and l["op"] == "Conv" for l in b.layers)


def _qemu_ready(target):
    t = get_target(target)
    return shutil.which(t.cc) and shutil.which(t.qemu[0])


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.parametrize("target", ["aarch64-neon", "armv7-neon"])
def test_arm_targets_under_qemu(ppocr_cls, digits_cnn, tmp_path, target):
    if not _qemu_ready(target):
        pytest.skip(f"{get_target(target).cc} or qemu not installed")
    r = verify(ppocr_cls, target=target, input_shapes={"x": [1, 3, 48, 192]}, out_dir=tmp_path / "ppocr",
               cflags=STRICT)
    assert r.ok, r.outputs
    r = verify(digits_cnn.model, target=target, input_file=digits_cnn.data, out_dir=tmp_path / "digits",
               cflags=STRICT)
    assert r.ok and r.outputs[0]["argmax_agreement"] == 1.0, r.outputs


@pytest.mark.slow
def test_sanitizers_and_threads(ppocr_cls, tmp_path):
    """ASan + UBSan build, run with 1 and 2 threads: clean and equal to onnxruntime."""
    san = "-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all " + STRICT
    b = compile_model(ppocr_cls, tmp_path / "p", input_shapes={"x": [1, 3, 48, 192]}, threads=2)
    bins = build_project(b.dir, "native", cflags=san, ldflags="-fsanitize=address,undefined", jobs=2)
    x = np.random.default_rng(1).standard_normal((1, 3, 48, 192)).astype(np.float32)
    _, (want,) = onnxruntime_outputs(ppocr_cls, {"x": x})
    for threads in (1, 2):
        got = run_binary(bins["runner"], b.target, [x], tmp_path / f"run{threads}", threads=threads)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_bench_profile_json(ppocr_cls, tmp_path):
    b = compile_model(ppocr_cls, tmp_path / "p", input_shapes={"x": [1, 3, 48, 192]}, build=True, profile=True)
    out = subprocess.run([str(b.binaries["bench"]), "--runs", "5", "--warmup", "1"], capture_output=True,
                         text=True, check=True).stdout
    doc = json.loads(out)
    assert {"model", "target", "threads", "init_ms", "first_ms", "runs_ms", "peak_rss_kb", "arena_bytes",
            "weights_bytes", "layers"} <= set(doc)
    assert len(doc["runs_ms"]) == 5 and doc["arena_bytes"] == b.arena_bytes and doc["peak_rss_kb"] > 0
    assert len(doc["runs_cpu_ms"]) == 5 and all(0 < c < 10 * max(doc["runs_ms"]) for c in doc["runs_cpu_ms"])
    assert len(doc["layers"]) == len(b.layers) and all(layer["ms"] >= 0 for layer in doc["layers"])
    profiled = {nm for layer in doc["layers"] for nm in layer["name"].split(", ")}
    convs = {n.name for n in onnx.load(ppocr_cls).graph.node if n.op_type == "Conv"}
    assert convs and convs <= profiled  # every ONNX conv is named in the profile
    assert b.arena_bytes < b.naive_bytes


@pytest.mark.slow
def test_big_weights_compile_in_seconds(tmp_path):
    """25 MB of weights: the blob is linked with .incbin, so the build does not grow with the weights."""
    from onnx import TensorProto, helper
    w = np.random.default_rng(0).standard_normal((25 * 1024 * 1024 // 4,)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "big",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [w.size])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [w.size])],
                          [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "big.onnx")
    t0 = time.perf_counter()
    r = verify(tmp_path / "big.onnx", out_dir=tmp_path / "p")
    assert r.ok
    assert time.perf_counter() - t0 < 30
    assert (tmp_path / "p" / "weights.bin").stat().st_size >= w.nbytes


def test_generated_code_is_deterministic(tmp_path, ppocr_cls):
    a = compile_model(ppocr_cls, tmp_path / "a", input_shapes={"x": [1, 3, 48, 192]}, command="edgec compile")
    b = compile_model(ppocr_cls, tmp_path / "b", input_shapes={"x": [1, 3, 48, 192]}, command="edgec compile")
    for f in ("model.c", "model.h", "weights.bin", "Makefile"):
        assert (a.dir / f).read_bytes() == (b.dir / f).read_bytes(), f
