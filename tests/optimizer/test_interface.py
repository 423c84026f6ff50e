"""`edgec optimize` keeps the model's interface: symbolic input/output dims stay symbolic unless --fix-shapes."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from edgec.optimizer.runner import session

from opt_helpers import cli


def _dims(vi) -> list:
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


def _interface(path) -> dict:
    m = onnx.load(str(path))
    return {v.name: _dims(v) for v in list(m.graph.input) + list(m.graph.output)}


def _sess(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_symbolic_batch_survives_fusion_int8_and_pruning(digits_cnn, digits_split, tmp_path, capsys):
    calib, ev = digits_split
    out = tmp_path / "digits.opt.onnx"
    rc, _, err = cli(capsys, "optimize", digits_cnn.model, "-o", out, "--quantize", "int8", "--calib", calib,
                     "--eval", ev, "--prune", "channel:0.1")
    assert rc == 0, err
    assert _interface(out) == _interface(digits_cnn.model) == {"input": ["batch", 1, 8, 8], "logits": ["batch", 10]}
    q = onnx.load(str(out))
    assert any(n.op_type == "QuantizeLinear" for n in q.graph.node)  # int8 really ran
    d = np.load(ev)
    x, labels = d["input"], d["labels"]
    # onnxruntime as a user runs it (all optimizations: QLinearConv kernels), and as the oracle edgec's own checks
    # use (QDQ computed as written, no fusion)
    for opt in (_sess(out), session(q)):
        got = np.concatenate([opt.run(None, {"input": x[i:i + 8]})[0] for i in range(0, len(x) - 7, 8)])
        assert got.shape == (len(x) // 8 * 8, 10)
        one = np.concatenate([opt.run(None, {"input": x[i:i + 1]})[0] for i in range(len(got))])
        np.testing.assert_allclose(got, one, rtol=1e-5, atol=1e-5)  # batch 8 computes what batch 1 does
    ref = _sess(digits_cnn.model)
    want = np.concatenate([ref.run(None, {"input": x[i:i + 8]})[0] for i in range(0, len(x) - 7, 8)])
    n = len(got)
    top1_opt, top1_ref = np.mean(got.argmax(1) == labels[:n]), np.mean(want.argmax(1) == labels[:n])
    assert top1_ref - top1_opt <= 0.01, (top1_ref, top1_opt)
    assert np.mean(got.argmax(1) == want.argmax(1)) >= 0.98


def test_fix_shapes_pins_the_analysis_shape(digits_cnn, tmp_path, capsys):
    out = tmp_path / "fixed.onnx"
    rc, _, err = cli(capsys, "optimize", digits_cnn.model, "-o", out, "--fix-shapes", "-s", "input:4,1,8,8")
    assert rc == 0, err
    assert _interface(out) == {"input": [4, 1, 8, 8], "logits": [4, 10]}


def _flatten_by_shape_model(path) -> None:
    """x[N,3,8,8] -> Conv -> BN -> Reshape(x, concat(shape(x)[0], -1)) -> MatMul + b -> y[N,5]: the batch flows
    through shape arithmetic that constant folding at batch 1 would freeze."""
    rng = np.random.default_rng(3)
    f = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.3  # noqa: E731
    inits = [numpy_helper.from_array(a, n) for n, a in (
        ("w", f(4, 3, 3, 3)), ("s", np.abs(f(4)) + 0.5), ("b", f(4)), ("m", f(4)), ("v", np.abs(f(4)) + 0.5),
        ("fc", f(256, 5)), ("fcb", f(5)))]
    inits += [numpy_helper.from_array(np.array([0], np.int64), "zero"),
              numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"]),
             helper.make_node("Shape", ["bn"], ["shp"]),
             helper.make_node("Gather", ["shp", "zero"], ["n"], axis=0),
             helper.make_node("Concat", ["n", "minus1"], ["newshape"], axis=0),
             helper.make_node("Reshape", ["bn", "newshape"], ["flat"]),
             helper.make_node("MatMul", ["flat", "fc"], ["mm"]),
             helper.make_node("Add", ["mm", "fcb"], ["y"])]
    g = helper.make_graph(nodes, "flat", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))


def test_shape_arithmetic_is_not_frozen_at_the_analysis_batch(tmp_path, capsys):
    src, out = tmp_path / "flat.onnx", tmp_path / "flat.opt.onnx"
    _flatten_by_shape_model(src)
    rc, _, err = cli(capsys, "optimize", src, "-o", out)
    assert rc == 0, err
    assert _interface(out) == {"x": ["N", 3, 8, 8], "y": ["N", 5]}
    assert "BatchNormalization" not in {n.op_type for n in onnx.load(str(out)).graph.node}  # the passes ran
    x = np.random.default_rng(0).standard_normal((5, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(_sess(out).run(None, {"x": x})[0], _sess(src).run(None, {"x": x})[0],
                               rtol=1e-4, atol=1e-4)
