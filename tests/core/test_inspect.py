"""`edgec inspect` on real models, checked against MACs and params computed by hand."""

from __future__ import annotations

import json

import pytest

from edgec.cli.main import main


def run_json(capsys, *args):
    assert main(["inspect", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def layer(doc, name):
    return next(l for l in doc["layers"] if l["name"] == name)


def test_digits_cnn_layers(capsys, digits_cnn):
    doc = run_json(capsys, str(digits_cnn.model))
    assert doc["inputs"][0]["shape"] == [1, 1, 8, 8]
    assert doc["inputs"][0]["declared_shape"] == ["batch", 1, 8, 8]
    assert doc["opset"] == {"ai.onnx": 17}
    convs = [l for l in doc["layers"] if l["op"] == "Conv"]
    # stem 1->16 3x3 on 8x8: 16*8*8*1*9
    assert convs[0]["macs"] == 16 * 64 * 9 and convs[0]["kind"] == "dense"
    # depthwise 16 3x3: 16*64*1*9
    assert convs[1]["macs"] == 16 * 64 * 9 and convs[1]["kind"] == "depthwise" and convs[1]["groups"] == 16
    # 1x1 16->32: 32*64*16
    assert convs[2]["macs"] == 32 * 64 * 16 and convs[2]["kind"] == "pointwise"
    # grouped 3x3 32->32 g=2: 32*64*(32/2)*9 ; g=4: 32*64*8*9 ; after 2x2 pool 32->64 g=4 on 4x4: 64*16*8*9
    assert [c["groups"] for c in convs[3:]] == [2, 4, 4]
    assert [c["macs"] for c in convs[3:]] == [32 * 64 * 16 * 9, 32 * 64 * 8 * 9, 64 * 16 * 8 * 9]
    assert convs[3]["params"] == 32 * 16 * 9
    gemm = next(l for l in doc["layers"] if l["op"] == "Gemm")
    assert gemm["macs"] == 64 * 10 and gemm["params"] == 640
    assert doc["macs"] == sum(l["macs"] for l in doc["layers"])
    assert doc["conv_breakdown"]["grouped_by_groups"] == {"2": 1, "4": 2}
    assert doc["op_histogram"]["BatchNormalization"] == 1


def test_digits_cnn_batch_override(capsys, digits_cnn):
    one = run_json(capsys, str(digits_cnn.model))
    four = run_json(capsys, str(digits_cnn.model), "--input-shape", "input:4,1,8,8")
    assert four["macs"] == 4 * one["macs"] and four["params"] == one["params"]


def test_ppocr_cls(capsys, ppocr_cls):
    doc = run_json(capsys, str(ppocr_cls), "--input-shape", "x:1,3,48,192")
    assert doc["opset"]["ai.onnx"] == 11
    assert doc["inputs"][0]["declared_shape"][1:2] == [3]
    first = doc["layers"][0]
    # 3->8 3x3 stride 2 on 48x192 -> 24x96: 8*24*96*3*9
    assert first["macs"] == 8 * 24 * 96 * 27 and first["params"] == 8 * 3 * 9
    assert doc["conv_breakdown"]["depthwise"] == 11
    fc = layer(doc, "MatMul@0")
    assert fc["macs"] == 200 * 2  # reached through a Shape->Cast->Concat->Reshape chain
    assert doc["params"] == 133700


@pytest.mark.parametrize("name,params,macs", [
    ("bvlc_alexnet", 60_965_224, 654_560_384),   # 61M params; grouped g=2 convs halve conv2/4/5
    ("resnet50", 25_610_152, 4_089_184_256),     # 25.56M conv/fc + BatchNorm scale/bias/mean/var
])
def test_light_models(capsys, onnx_light, name, params, macs):
    doc = run_json(capsys, str(onnx_light(name)))
    assert doc["params"] == params and doc["macs"] == macs


def test_alexnet_grouped_layer(capsys, onnx_light):
    doc = run_json(capsys, str(onnx_light("bvlc_alexnet")))
    convs = [l for l in doc["layers"] if l["op"] == "Conv"]
    # 224 input: conv1 11x11/4 -> 54, pool 3/2 -> 26; conv2 96->256, 5x5 pad 2, g=2: 256*26*26*(96/2)*25
    assert doc["inputs"][0]["shape"] == [1, 3, 224, 224]
    assert convs[1]["groups"] == 2 and convs[1]["macs"] == 256 * 26 * 26 * 48 * 25


def test_shufflenet_groups(capsys, onnx_light):
    doc = run_json(capsys, str(onnx_light("shufflenet")))
    assert doc["conv_breakdown"]["grouped"] > 0 and doc["conv_breakdown"]["depthwise"] == 16


def test_unsupported_list_names_nodes(capsys, tmp_path):
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("Det", ["a"], ["b"], name="det_1"),
             helper.make_node("Einsum", ["b", "b"], ["y"], name="einsum_1", equation="ij,jk->ik")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    doc = run_json(capsys, str(path))
    if doc["unsupported"]["checked"]:
        names = {n["name"] for n in doc["unsupported"]["nodes"]}
        assert {"det_1", "einsum_1"} <= names and "ok" not in names
    else:
        assert doc["unsupported"]["reason"]


def test_table_output(capsys, digits_cnn):
    assert main(["inspect", str(digits_cnn.model)]) == 0
    text = capsys.readouterr().out
    assert "[batch, 1, 8, 8]" in text and "depthwise" in text and "g=2: 1" in text
