"""int8 (QDQ) on the trained digits CNN and ppocr cls, the accuracy guard, and fp16."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.optimizer.data import Dataset
from edgec.optimizer.evaluate import fidelity, predict
from edgec.optimizer.fp16 import to_fp16
from edgec.optimizer.runner import session

from opt_helpers import cli, ops


def _optimize(capsys, tmp_path, model, *args):
    out, rep = tmp_path / "out.onnx", tmp_path / "report.json"
    rc, stdout, stderr = cli(capsys, "optimize", model, "-o", out, "--report", rep, *args)
    return rc, out, (json.loads(rep.read_text()) if rep.exists() else None), stdout, stderr


def test_int8_digits_within_one_point(digits_cnn, digits_split, tmp_path, capsys):
    calib, ev = digits_split
    rc, out, doc, _, stderr = _optimize(capsys, tmp_path, digits_cnn.model, "--quantize", "int8", "--calib", calib,
                                        "--eval", ev)
    assert rc == 0, stderr
    before, after = doc["before"]["eval"]["top1"], doc["after"]["eval"]["top1"]
    assert before - after <= 0.01, (before, after)
    q = onnx.load(str(out))
    onnx.checker.check_model(q)
    counts = ops(q)
    assert counts["QuantizeLinear"] > 0 and counts["DequantizeLinear"] > 0
    inits = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
    conv_w = [inits[n.input[0]] for n in q.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in inits
              and inits[n.input[0]].ndim == 4]
    assert conv_w and all(w.dtype == np.int8 for w in conv_w)  # int8 weights, per output channel:
    per_channel = [n for n in q.graph.node if n.op_type == "DequantizeLinear" and inits.get(n.input[1]) is not None
                   and inits[n.input[1]].ndim == 1 and inits[n.input[1]].size > 1]
    assert per_channel and all(not np.any(inits[n.input[2]]) for n in per_channel if len(n.input) > 2)  # symmetric
    d = np.load(ev)
    sess = session(q)
    acc = np.mean([sess.run(None, {"input": d["input"][i:i + 1]})[0].argmax() == d["labels"][i] for i in range(len(d["labels"]))])
    assert acc == pytest.approx(after)
    assert (tmp_path / "out.edgec.yaml").exists()


@pytest.mark.parametrize("method", ["percentile", "entropy"])
def test_int8_calibration_methods(digits_cnn, digits_split, tmp_path, capsys, method):
    calib, ev = digits_split
    rc, _, doc, _, stderr = _optimize(capsys, tmp_path, digits_cnn.model, "--quantize", "int8", "--calib", calib,
                                      "--eval", ev, "--calib-method", method, "--no-fuse")
    assert rc == 0, stderr
    assert doc["before"]["eval"]["top1"] - doc["after"]["eval"]["top1"] <= 0.02


def _tight_budget(doc_first) -> float:
    c = doc_first
    return c + (1 - c) * 0.6  # all-int8 misses it, the fp32 model meets it


def test_guard_falls_back_layers(digits_cnn, digits_split, tmp_path, capsys):
    calib, ev = digits_split
    rc, _, plain, _, _ = _optimize(capsys, tmp_path, digits_cnn.model, "--quantize", "int8", "--calib", calib, "--eval", ev)
    assert rc == 0
    all_int8 = plain["after"]["eval"]["fidelity"]["cosine"]
    budget = _tight_budget(all_int8)
    rc, out, doc, stdout, stderr = _optimize(capsys, tmp_path, digits_cnn.model, "--quantize", "int8", "--calib", calib,
                                             "--eval", ev, "--min-cosine", f"{budget:.8f}")
    assert rc == 0, stderr
    g = doc["guard"]
    assert g["all_int8"]["cosine"] < budget  # it had to act ...
    assert len(g["float_layers"]) >= 1 and g["final"]["cosine"] >= budget  # ... and it met the budget
    assert doc["after"]["eval"]["fidelity"]["cosine"] >= budget
    kept = {f["name"] for f in g["float_layers"]}
    q = onnx.load(str(out))
    dq = {n.output[0] for n in q.graph.node if n.op_type == "DequantizeLinear"}
    for n in q.graph.node:
        if n.name in kept and n.op_type == "Conv":
            w_src = n.input[1]
            assert w_src not in dq  # float weights in the output model
    assert "kept float" in stdout


def test_guard_no_mix_exits_nonzero_and_writes_nothing(digits_cnn, digits_split, tmp_path, capsys):
    calib, ev = digits_split
    rc, out, doc, _, stderr = _optimize(capsys, tmp_path, digits_cnn.model, "--quantize", "int8", "--calib", calib,
                                        "--eval", ev, "--min-cosine", "0.999999", "--max-float-layers", "1")
    assert rc != 0 and "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "no mix" in errors[0]
    assert not out.exists() and not (tmp_path / "out.edgec.yaml").exists() and doc is None
    assert list(tmp_path.iterdir()) == []


def test_guard_accuracy_budget_uses_labels(digits_cnn, digits_split, tmp_path, capsys):
    calib, ev = digits_split
    rc, _, doc, _, stderr = _optimize(capsys, tmp_path, digits_cnn.model, "--quantize", "int8", "--calib", calib,
                                      "--eval", ev, "--max-accuracy-drop", "1")
    assert rc == 0, stderr
    assert doc["guard"]["final"]["drop_points"] <= 1.0


def test_int8_ppocr_fidelity(ppocr_cls, text_images, tmp_path, capsys):
    folder, cfg = text_images
    rc, out, doc, _, stderr = _optimize(capsys, tmp_path, ppocr_cls, "-c", cfg, "--quantize", "int8", "--calib", folder,
                                        "--eval", folder, "--calib-method", "percentile")
    assert rc == 0, stderr
    fid = doc["after"]["eval"]["fidelity"]
    assert fid["cosine"] >= 0.99 and fid["argmax_agreement"] >= 0.9
    assert doc["after"]["latency_ms"] > 0 and doc["before"]["latency_ms"] > 0
    session(onnx.load(str(out)))


def test_fp16_ppocr_halves_file(ppocr_cls, text_images, tmp_path, capsys):
    folder, cfg = text_images
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    rc, fp32_out, fp32, _, _ = _optimize(capsys, tmp_path / "a", ppocr_cls, "-c", cfg, "--eval", folder)
    assert rc == 0
    rc, out, doc, _, stderr = _optimize(capsys, tmp_path / "b", ppocr_cls, "-c", cfg, "--quantize", "fp16", "--eval", folder)
    assert rc == 0, stderr
    # half of the same graph in fp32 (a few int64 shape tensors and the graph itself stay as they are)
    assert out.stat().st_size <= 0.55 * fp32_out.stat().st_size
    assert out.stat().st_size <= 0.5 * ppocr_cls.stat().st_size
    assert doc["after"]["eval"]["fidelity"]["cosine"] >= 0.999
    h = onnx.load(str(out))
    assert h.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT  # float32 I/O kept
    assert any(t.data_type == TensorProto.FLOAT16 for t in h.graph.initializer)


def test_fp16_blocklist_grows_on_overflow():
    """x*3e4*3e4/9e8: the second product overflows fp16 (max 65504) and the divisor is clamped by the
    converter (outputs 14000x off with a perfect cosine). Both nodes must be found, in order, and kept fp32."""
    inits = [numpy_helper.from_array(np.array(3e4, np.float32), "big"),
             numpy_helper.from_array(np.array(9e8, np.float32), "norm"),
             numpy_helper.from_array(np.ones((4, 4), np.float32) * 0.1, "w")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
             helper.make_node("Mul", ["a", "big"], ["b"], name="up1"),
             helper.make_node("Mul", ["b", "big"], ["c"], name="up2"),
             helper.make_node("Div", ["c", "norm"], ["y"], name="down")]
    g = helper.make_graph(nodes, "ovf", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    rng = np.random.default_rng(0)
    data = Dataset([{"x": rng.random((1, 4)).astype(np.float32) + 1} for _ in range(4)], None, "random")
    notes: list[str] = []
    h, block, fid = to_fp16(m, data, 0.999, notes=notes)
    assert block == ["up2", "down"]
    assert any("down: kept in fp32" in n for n in notes)
    assert not any(n.op_type == "Cast" for n in h.graph.node if n.input[0] == "c_cast_to_fp16")  # no fp16 hop between
    assert fid["cosine"] >= 0.999 and np.isfinite(fid["max_abs_err"])
    assert fidelity(predict(m, data), predict(h, data))["cosine"] >= 0.999


def test_keep_float_and_activation_int8(digits_cnn, digits_split, tmp_path, capsys):
    calib, _ = digits_split
    rc, out, doc, _, stderr = _optimize(capsys, tmp_path, digits_cnn.model, "--quantize", "int8", "--calib", calib,
                                        "--keep-float", "/15/Gemm", "-c", _int8_acts(tmp_path))
    assert rc == 0, stderr
    q = onnx.load(str(out))
    gemm = next(n for n in q.graph.node if n.name == "/15/Gemm")
    producers = {o: n.op_type for n in q.graph.node for o in n.output}
    assert producers.get(gemm.input[1]) != "DequantizeLinear"  # float weights (its input may still be Q/DQ)
    assert "/15/Gemm" not in next(p for p in doc["passes"] if p["name"] == "quantize-int8")["int8_nodes"]
    zps = [numpy_helper.to_array(t) for t in q.graph.initializer if t.name.endswith("zero_point")]
    act = [z for z in zps if z.dtype != np.int32]  # int32 ones belong to biases
    assert act and all(z.dtype == np.int8 and not np.any(z) for z in act)  # activations int8, symmetric


def _int8_acts(tmp_path):
    cfg = tmp_path.parent / f"{tmp_path.name}-acts.yaml"
    cfg.write_text("optimize:\n  activations: int8\n")
    return cfg
