"""fp16 models (edgec.optimizer's fp16 conversion of the digits CNN): weights stored as fp16 (half
the weight bytes), fp32 arithmetic, same accuracy; natively and for the Pi 4 target under qemu; on the
Pi 5 target (aarch64-v82, qemu -cpu max) pointwise convs use native fp16 arithmetic."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from edgec.codegen.project import compile_model
from edgec.codegen.targets import get_target
from test_quant_e2e import run_binary


@pytest.fixture(scope="module")
def digits_f16(digits_cnn, tmp_path_factory):
    from edgec.optimizer.fp16 import convert

    path = tmp_path_factory.mktemp("f16") / "digits_f16.onnx"
    onnx.save(convert(onnx.load(str(digits_cnn.model)), []), str(path))
    return path


@pytest.mark.parametrize("target", ["native", "aarch64-neon", "aarch64-v82"])
def test_fp16_weights_halve_bytes_and_keep_accuracy(digits_cnn, digits_f16, target, tmp_path):
    data = np.load(digits_cnn.data)
    x, labels = data["input"], data["labels"]
    if get_target(target).qemu:
        x, labels = x[:64], labels[:64]
    shapes = {"input": list(x.shape)}
    b32 = compile_model(digits_cnn.model, tmp_path / "f32", target=target, input_shapes=shapes)
    b16 = compile_model(digits_f16, tmp_path / "f16", target=target, build=True, input_shapes=shapes)
    assert b16.weights_bytes <= 0.55 * b32.weights_bytes
    convs = [l for l in b16.layers if l["op"] in ("Conv", "Gemm")]
    arith = [l for l in convs if l["algo"] == "f16-arith-conv1x1"]  # fp16 math only where the CPU has it
    assert convs and all(l["algo"].endswith("+f16w") for l in convs if l not in arith)
    assert bool(arith) == (target == "aarch64-v82")
    y = run_binary(b16.binaries["runner"], get_target(target), [x], tmp_path / "w")[0]
    r16 = ort.InferenceSession(str(digits_f16), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    # fp16 accumulation in the pointwise convs; Winograd F(4,3)'s rounding where the cost model picks it
    tol = 2e-3 if target == "aarch64-v82" or any(l["algo"].startswith("winograd") for l in convs) else 1e-3
    assert np.abs(y - r16).max() <= tol * np.abs(r16).max()
    assert (y.argmax(1) == r16.argmax(1)).mean() >= 0.99
    if not get_target(target).qemu:
        assert (y.argmax(1) == labels).mean() >= digits_cnn.accuracy - 0.01
