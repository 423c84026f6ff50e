"""Bad input gets one clear line and a non-zero exit, never a traceback."""

from __future__ import annotations

import re
import subprocess
import sys

import onnx
import pytest
from onnx import TensorProto, helper


def edgec(*args):
    return subprocess.run([sys.executable, "-m", "edgec", *args], capture_output=True, text=True)


def one_line_error(proc, *needles):
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_missing_file(tmp_path):
    one_line_error(edgec("inspect", str(tmp_path / "nope.onnx")), "not found", "nope.onnx")


def test_not_onnx(tmp_path):
    p = tmp_path / "x.onnx"
    p.write_text("hello, I am not a protobuf\n" * 10)
    one_line_error(edgec("inspect", str(p)), "not a readable ONNX model")


def test_truncated(tmp_path, digits_cnn):
    data = digits_cnn.model.read_bytes()
    p = tmp_path / "cut.onnx"
    p.write_bytes(data[: len(data) // 2])
    one_line_error(edgec("inspect", str(p)), "cut.onnx")


def test_empty_file(tmp_path):
    p = tmp_path / "empty.onnx"
    p.write_bytes(b"")
    one_line_error(edgec("inspect", str(p)), "empty")


def test_invalid_graph(tmp_path):
    # a node consumes a tensor nobody produces
    g = helper.make_graph([helper.make_node("Relu", ["ghost"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    p = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    one_line_error(edgec("inspect", str(p)), "not a valid ONNX graph")


def test_debug_shows_traceback(tmp_path):
    proc = edgec("--debug", "inspect", str(tmp_path / "nope.onnx"))
    assert proc.returncode != 0 and "Traceback" in proc.stderr


@pytest.mark.parametrize("spec,needle", [
    ("nosuch:1,1,8,8", "unknown input 'nosuch'"),
    ("input:1,1,8", "rank 3"),
    ("input:1,a,8,8", "whole numbers"),
    ("input1,1,8,8", "NAME:D1,D2"),
    ("input:1,2,8,8", "fixed to 1"),
    ("input:0,1,8,8", "positive"),
])
def test_bad_input_shape(digits_cnn, spec, needle):
    one_line_error(edgec("inspect", str(digits_cnn.model), "--input-shape", spec), needle)


@pytest.mark.parametrize("shape, needle", [
    ([0, 3, 48, 192], "dim 0 is 0 (an empty tensor) where the model declares"),
    ([1, 3, -1, 192], "dim 2 must be an integer from 0"),
    ([1, 3, 48.0, 192], "dim 2 must be an integer from 0"),
    ([True, 3, 48, 192], "dim 0 must be an integer from 0"),
])
def test_python_api_refuses_bad_dims(ppocr_cls, shape, needle, tmp_path):
    # the CLI parses --input-shape; the library takes the list as given, e.g. a 0 read off a symbolic dim
    from edgec.codegen.project import compile_model
    from edgec.errors import EdgecError

    with pytest.raises(EdgecError, match=re.escape(needle)):
        compile_model(ppocr_cls, tmp_path / "out", input_shapes={"x": shape})
    assert not (tmp_path / "out").exists()


def test_python_api_keeps_empty_tensors_the_model_declares(tmp_path):
    # a dim the model fixes to 0 is an empty tensor (ONNX allows them; conformance cases use them)
    from edgec.model import load_model

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 0, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 0, 4])])
    path = tmp_path / "empty.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    m = load_model(path, {"x": [2, 0, 4]})
    assert [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim] == [2, 0, 4]


def test_dynamic_dims_need_a_shape(ppocr_cls):
    one_line_error(edgec("inspect", str(ppocr_cls)), "--input-shape x:")


def test_version_and_help():
    v = edgec("--version")
    assert v.returncode == 0 and v.stdout.startswith("edgec ")
    h = edgec("inspect", "--help")
    assert h.returncode == 0 and "Example" in h.stdout


@pytest.mark.parametrize("args, needle", [
    (["compile", "--bogus"], "No such option"),
    (["frobnicate"], "No such command"),
    (["compile"], "Missing argument"),
    (["compile", "m.onnx", "--threads", "abc"], "--threads"),
    (["optimize", "m.onnx"], "Missing option"),
])
def test_usage_errors_print_usage_and_exit_2(args, needle):
    """Usage errors are the usual usage line, a hint and the problem, exit code 2: never 'internal error'."""
    proc = edgec(*args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert proc.stderr.lstrip().startswith("Usage: edgec"), proc.stderr
    assert needle in proc.stderr, proc.stderr


def test_bare_edgec_prints_the_help():
    proc = edgec()
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "internal error" not in out
    assert "Usage: edgec" in out and "compile" in out and "optimize" in out


def test_model_text_in_an_error_is_one_plain_line(tmp_path):
    """A hostile node name in an error message: no markup crash, no second line, no terminal escape sequence."""
    name = "bad\nname [/red] [bold]\x1b[2J\r"
    g = helper.make_graph([helper.make_node("NoSuchOpHere", ["x"], ["y"], name=name, domain="example.custom")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("example.custom", 1)])
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    proc = edgec("compile", str(p), "-o", str(tmp_path / "out"))
    one_line_error(proc)
    assert "\x1b" not in proc.stderr and "\r" not in proc.stderr
    assert not (tmp_path / "out").exists()
