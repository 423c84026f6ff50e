"""`edgec compile` / `edgec verify` through the real entry point: outputs, JSON, one-line errors, exit codes."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgec.cli.main import main
from edgec.codegen.verifier import compare


def _model(path):
    w = numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), "w")
    nodes = [helper.make_node("Mul", ["x", "w"], ["m"]), helper.make_node("Softmax", ["m"], ["y"], axis=-1)]
    g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 4])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def test_compile_writes_the_project(tmp_path, capsys):
    model = _model(tmp_path / "tiny.onnx")
    rc = main(["compile", str(model), "-o", str(tmp_path / "out"), "--target", "generic", "-s", "x:2,3,4", "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["target"] == "generic" and doc["arena_bytes"] <= doc["naive_bytes"]
    for f in ("model.c", "model.h", "weights.bin", "weights.S", "Makefile", "runner.c", "bench.c"):
        assert (tmp_path / "out" / f).is_file(), f
    head = (tmp_path / "out" / "model.c").read_text().splitlines()[:5]
    assert any("sha256" in ln for ln in head) and any("edgec compile" in ln for ln in head)
    assert "MODEL_WORKSPACE_BYTES" in (tmp_path / "out" / "model.h").read_text()


def test_verify_json_and_input_file(tmp_path, capsys):
    model = _model(tmp_path / "tiny.onnx")
    np.savez(tmp_path / "in.npz", x=np.random.default_rng(0).standard_normal((5, 3, 4)).astype(np.float32))
    rc = main(["verify", str(model), "--input", str(tmp_path / "in.npz"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["ok"] is True
    out = doc["outputs"][0]
    assert out["shape"] == [5, 3, 4] and out["max_abs_err"] < 1e-5 and out["cosine"] > 0.99999


def test_errors_are_one_line(tmp_path, capsys):
    assert main(["compile", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "o")]) == 2
    assert "model file not found" in capsys.readouterr().err
    model = _model(tmp_path / "tiny.onnx")
    assert main(["compile", str(model), "-o", str(tmp_path / "o"), "--target", "sparc"]) == 2
    assert "unknown target 'sparc'" in capsys.readouterr().err
    np.savez(tmp_path / "bad.npz", z=np.zeros(3, np.float32))
    assert main(["verify", str(model), "--input", str(tmp_path / "bad.npz")]) == 2
    assert "no data for model input 'x'" in capsys.readouterr().err


def test_compare_flags_mismatches():
    want = np.array([[0.1, 0.7, 0.2]], np.float32)
    bad = compare("y", np.array([[0.7, 0.1, 0.2]], np.float32), want, rtol=1e-3, atol=1e-4)
    assert bad["ok"] is False and bad["argmax_agreement"] == 0.0 and abs(bad["max_abs_err"] - 0.6) < 1e-6
    good = compare("y", want + 1e-6, want, rtol=1e-3, atol=1e-4)
    assert good["ok"] and good["cosine"] > 0.999999
