"""PP-OCRv4 detection and recognition from the rapidocr wheel, compiled and compared with onnxruntime.

The recogniser computes its attention Reshape shapes from Shape/Cast/Slice/Concat chains and Softmax comes
through the opset 12 -> 13 converter as Flatten/Softmax/Reshape(Shape(x)): every shape there is only known
after folding those sub-graphs, one attention block per shape-inference round. The inputs are rendered text
(normalised as PaddleOCR does), so the detector's map and the recogniser's CTC path are not degenerate.
"""

from __future__ import annotations

import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec import zoo
from edgec.codegen import build_project, compile_model
from edgec.codegen.targets import get_target
from edgec.codegen.verifier import compare, onnxruntime_outputs, run_binary
from edgec.model import graph_inputs, load_model, tensor_shapes

STRICT = "-O2 -Wall -Wextra -Werror"
DET_MEAN, DET_STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])


@pytest.fixture(scope="module")
def ppocr_det():
    return zoo.ppocr_det()


@pytest.fixture(scope="module")
def ppocr_rec():
    return zoo.ppocr_rec()


def _text(h: int, w: int, lines: list[str], size: int) -> np.ndarray:
    """Black text on white, HxWx3 in [0, 1]."""
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw, font = ImageDraw.Draw(img), ImageFont.load_default(size=size)
    y = max(2, (h - len(lines) * int(size * 1.3)) // 2)
    for line in lines:
        draw.text((4, y), line, fill=(0, 0, 0), font=font)
        y += int(size * 1.3)
    return np.asarray(img, dtype=np.float32) / 255.0


def det_input(side: int) -> np.ndarray:
    img = _text(side, side, ["edgec", "2025 ocr", "text", "line four"][:max(2, side // 40)], side // 7)
    return ((img - DET_MEAN) / DET_STD).transpose(2, 0, 1)[None].astype(np.float32)


def rec_input(width: int) -> np.ndarray:
    img = _text(48, width, ["edgec 2025 ocr" if width >= 256 else "edgec 25"], 30)
    return ((img - 0.5) / 0.5).transpose(2, 0, 1)[None].astype(np.float32)


def ctc_greedy(scores: np.ndarray) -> list[int]:
    best = scores.argmax(-1).ravel()
    return [int(c) for i, c in enumerate(best) if c != 0 and (i == 0 or c != best[i - 1])]


def _run(model, x, tmp_path, target="native"):
    b = compile_model(model, tmp_path / "p", target=target, input_shapes={"x": list(x.shape)})
    bins = build_project(b.dir, b.target, cflags=STRICT)
    got = run_binary(bins["runner"], b.target, [x], tmp_path / "run")[0]
    _, (want,) = onnxruntime_outputs(model, {"x": x})
    return b, got, want


def _check_rec(got, want):
    r = compare("rec", got, want, rtol=1e-3, atol=1e-4)
    assert r["ok"], r
    steps = np.mean(got.argmax(-1) == want.argmax(-1))
    assert steps == 1.0, steps
    path = ctc_greedy(want)
    assert len(path) >= 4  # the rendered line is read as text, not blanks
    assert ctc_greedy(got) == path


def _check_det(got, want):
    r = compare("det", got, want, rtol=1e-3, atol=1e-4)
    assert r["ok"], r
    mask = want > 0.3  # DBNet's binarisation threshold
    assert 0.01 < mask.mean() < 0.5  # text regions found, not all background
    assert np.mean((got > 0.3) == mask) > 0.9999


def test_rec_shapes_static_after_folding(ppocr_rec):
    m = load_model(ppocr_rec, {"x": [1, 3, 48, 320]}, min_opset=13)
    infos = tensor_shapes(m)
    unknown = [o for n in m.graph.node for o in n.output if o and not (o in infos and infos[o].is_static())]
    assert unknown == []
    assert infos[m.graph.output[0].name].shape == (1, 40, 6625)
    assert not any(n.op_type == "Shape" for n in m.graph.node)


def _shape_chain_model(blocks: int) -> onnx.ModelProto:
    """paddle2onnx's pattern: each Reshape's target comes from Shape(previous result) through Cast(int32),
    Slice and Cast back, with Constant-node operands; each block's shape depends on the previous Reshape.
    The residual Add keeps values from collapsing to a uniform softmax (a wrong layout could not hide)."""
    nodes, inits, cur = [], [], "x"
    consts = {"c0": [0], "c1": [1], "c2": [2], "m1": [-1]}
    for k, v in consts.items():
        nodes.append(helper.make_node("Constant", [], [k], value=numpy_helper.from_array(np.array(v, np.int64))))
    for b in range(blocks):
        p = f"b{b}_"
        nodes += [helper.make_node("Shape", [cur], [p + "s"]),
                  helper.make_node("Cast", [p + "s"], [p + "s32"], to=TensorProto.INT32),
                  helper.make_node("Slice", [p + "s32", "c0", "c2", "c0", "c1"], [p + "lead"]),
                  helper.make_node("Cast", [p + "lead"], [p + "lead64"], to=TensorProto.INT64),
                  helper.make_node("Concat", [p + "lead64", "m1", p + "two"], [p + "shape"], axis=0),
                  helper.make_node("Reshape", [cur, p + "shape"], [p + "r"]),
                  helper.make_node("Transpose", [p + "r"], [p + "t"], perm=[0, 1, 3, 2]),
                  helper.make_node("Softmax", [p + "t"], [p + "sm"], axis=-1),
                  helper.make_node("Shape", [cur], [p + "s2"]),
                  helper.make_node("Reshape", [p + "sm", p + "s2"], [p + "back"]),
                  helper.make_node("Add", [p + "back", cur], [p + "y"])]
        inits.append(numpy_helper.from_array(np.array([(2, 3, 4, 6, 8, 12, 16)[b % 7]], np.int64), p + "two"))
        cur = p + "y"
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, 6, 8])],
                          [helper.make_tensor_value_info(cur, TensorProto.FLOAT, ["n", 4, 6, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)])
    m.ir_version = 7
    return m


def test_shape_chains_fold_to_a_fixpoint(tmp_path):
    """More dependent computed-shape blocks than a fixed number of rounds would cover; opset 12 as exported."""
    p = tmp_path / "chain.onnx"
    onnx.save(_shape_chain_model(7), p)
    x = np.random.default_rng(0).standard_normal((2, 4, 6, 8)).astype(np.float32)
    m = load_model(p, {"x": list(x.shape)}, min_opset=13)
    infos = tensor_shapes(m)
    assert all(o in infos and infos[o].is_static() for n in m.graph.node for o in n.output if o)
    b, got, want = _run(p, x, tmp_path)
    assert {layer["op"] for layer in b.layers} <= {"Reshape", "Transpose", "Softmax", "Flatten", "Add"}
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("producer", ["Conv", "ConvTranspose", "Gemm"])
def test_affine_constants_fold_into_the_producer(tmp_path, producer):
    """PP-LCNet's learnable affine block (x * a + b, scalar or per channel) after a conv: one layer, the
    activation as its epilogue, same numbers as onnxruntime."""
    rng = np.random.default_rng(0)
    c = 8
    if producer == "Gemm":
        xshape, w, k_shape = [3, 5], rng.standard_normal((5, c)), [c]
        first = helper.make_node("Gemm", ["x", "w", "b"], ["p"], alpha=0.5, beta=2.0)
    else:
        xshape, k_shape = [1, 4, 6, 6], [c, 1, 1]
        w = rng.standard_normal((c, 4, 3, 3) if producer == "Conv" else (4, c // 2, 3, 3))
        first = helper.make_node(producer, ["x", "w", "b"], ["p"], pads=[1, 1, 1, 1],
                                 **({"group": 2} if producer == "ConvTranspose" else {}))
    inits = [numpy_helper.from_array(w.astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "b"),
             numpy_helper.from_array(np.array([1.7], np.float32), "a"),
             numpy_helper.from_array(rng.standard_normal(k_shape).astype(np.float32), "d"),
             numpy_helper.from_array(np.array(0.3, np.float32), "e")]
    nodes = [first, helper.make_node("Mul", ["a", "p"], ["m"]), helper.make_node("Add", ["m", "d"], ["s"]),
             helper.make_node("Sub", ["s", "e"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    yshape = [3, c] if producer == "Gemm" else [1, c, 6, 6]
    g = helper.make_graph(nodes, "aff", [helper.make_tensor_value_info("x", TensorProto.FLOAT, xshape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, yshape)], inits)
    p = tmp_path / "aff.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), p)
    x = rng.standard_normal(xshape).astype(np.float32)
    b, got, want = _run(p, x, tmp_path)
    assert [layer["op"] for layer in b.layers][0] == producer
    assert b.layers[0]["name"].split(", ")[:3] == [first.name or f"{producer}_0", "Mul_1", "Add_2"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_dynamic_input_still_asks_for_a_shape(tmp_path):
    p = tmp_path / "chain.onnx"
    m = _shape_chain_model(2)
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "c"
    onnx.save(m, p)
    from edgec.errors import EdgecError
    with pytest.raises(EdgecError, match="pass --input-shape x:"):
        load_model(p)


def test_det_input_size_that_does_not_fit_says_where(ppocr_det):
    """100 is no multiple of the detector's stride 32: its FPN adds 7- and 8-pixel maps. The error names the node."""
    from edgec.codegen.lower import lower_file
    from edgec.errors import EdgecError
    with pytest.raises(EdgecError, match=r"no static shape: at these input shapes .*p2o\.Add\.248.*Incompatible"):
        lower_file(ppocr_det, {"x": [1, 3, 100, 100]})


def test_zoo_paths(ppocr_det, ppocr_rec, capsys):
    assert zoo.main(["ppocr-det"]) == 0 and capsys.readouterr().out.strip() == str(ppocr_det)
    assert zoo.main(["ppocr-rec"]) == 0 and capsys.readouterr().out.strip() == str(ppocr_rec)
    for path in (ppocr_det, ppocr_rec):
        (x,) = graph_inputs(onnx.load(str(path), load_external_data=False))
        assert x.name == "x" and x.shape[1] == 3


@pytest.mark.slow
def test_rec_native(ppocr_rec, tmp_path):
    b, got, want = _run(ppocr_rec, rec_input(320), tmp_path)
    _check_rec(got, want)
    ops = {layer["op"] for layer in b.layers}
    assert {"MatMul", "Softmax", "LayerNormalization", "Transpose"} <= ops


@pytest.mark.slow
def test_det_native(ppocr_det, tmp_path):
    b, got, want = _run(ppocr_det, det_input(320), tmp_path)
    _check_det(got, want)
    assert {"Resize", "ConvTranspose"} <= {layer["op"] for layer in b.layers}


def _qemu_ready(target):
    t = get_target(target)
    return shutil.which(t.cc) and shutil.which(t.qemu[0])


@pytest.mark.slow
@pytest.mark.qemu
def test_rec_aarch64_under_qemu(ppocr_rec, tmp_path):
    if not _qemu_ready("aarch64-neon"):
        pytest.skip("aarch64 cross compiler or qemu not installed")
    _, got, want = _run(ppocr_rec, rec_input(320), tmp_path, target="aarch64-neon")
    _check_rec(got, want)


@pytest.mark.slow
@pytest.mark.qemu
def test_det_aarch64_under_qemu(ppocr_det, tmp_path):
    if not _qemu_ready("aarch64-neon"):
        pytest.skip("aarch64 cross compiler or qemu not installed")
    _, got, want = _run(ppocr_det, det_input(160), tmp_path, target="aarch64-neon")
    _check_det(got, want)
