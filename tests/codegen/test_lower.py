"""Lowering passes checked by structure (ops left after folding/fusion) and targets as data."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen import SUPPORTED_OPS, unsupported_nodes
from edgec.codegen.emit import EmitContext
from edgec.codegen.lower import lower_file
from edgec.codegen.registry import get
from edgec.codegen.targets import detect_native, get_target, target_names
from edgec.errors import EdgecError


def _save(path, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def test_shape_subgraph_is_folded(tmp_path):
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "ax"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    p = _save(tmp_path / "m.onnx", nodes, [_vi("x", [2, 3, 4])], [_vi("y", [2, 12])], inits)
    g = lower_file(p)
    assert [n.op for n in g.nodes] == ["Reshape"]
    assert g.nodes[0].inputs[1].is_const and list(g.nodes[0].inputs[1].const) == [2, -1]


def test_activation_and_residual_fuse_into_epilogue_producers(tmp_path):
    nodes = [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Mul", ["r", "x"], ["m"]), helper.make_node("Sigmoid", ["m"], ["s"]),
             helper.make_node("Mul", ["m", "s"], ["y"])]
    inits = [numpy_helper.from_array(np.ones(4, np.float32), "b")]
    p = _save(tmp_path / "m.onnx", nodes, [_vi("x", [1, 4])], [_vi("y", [1, 4])], inits)
    g = lower_file(p)
    assert [(n.op, n.epilogue.act) for n in g.nodes] == [("Add", "relu"), ("Mul", "silu")]
    assert g.nodes[0].onnx_names == ["Add_0", "Relu_1"]


def test_batchnorm_folds_into_convtranspose(tmp_path):
    c = 3
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((2, c, 3, 3)).astype(np.float32), "w")]
    for name, v in (("g", 1.5), ("beta", 0.1), ("mean", 0.2), ("var", 2.0)):
        inits.append(numpy_helper.from_array(np.full(c, v, np.float32), name))
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["t"]),
             helper.make_node("BatchNormalization", ["t", "g", "beta", "mean", "var"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["y"])]
    p = _save(tmp_path / "m.onnx", nodes, [_vi("x", [1, 2, 5, 5])], [_vi("y", [1, c, 7, 7])], inits)
    g = lower_file(p)
    assert [n.op for n in g.nodes] == ["ConvTranspose"]
    assert g.nodes[0].epilogue.act == "relu" and g.nodes[0].inputs[2].shape == (c,)
    from edgec.codegen import verify
    assert verify(p).ok


def test_unsupported_nodes_listed_all_at_once(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("Det", ["a"], ["d"], name="det1"),
             helper.make_node("NonMaxSuppression", ["a", "a"], ["y"], name="nms")]
    m = helper.make_model(helper.make_graph(nodes, "m", [_vi("x", [2, 2])], [_vi("y", [1, 3], TensorProto.INT64)]))
    assert unsupported_nodes(m) == [("det1", "Det"), ("nms", "NonMaxSuppression")]
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    with pytest.raises(EdgecError, match="2 node.*det1 \\(Det\\), nms"):
        lower_file(p)


def test_supported_ops_cover_the_issue_list():
    wanted = {"ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Resize", "Upsample",
              "Softmax", "LogSoftmax", "LayerNormalization", "BatchNormalization", "InstanceNormalization", "Add",
              "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Abs", "Neg", "Max", "Min", "Where", "Relu", "Clip",
              "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Gelu", "Erf", "ReduceMean", "ReduceSum",
              "ReduceMax", "ArgMax", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split",
              "Slice", "Gather", "Pad", "Expand", "Identity", "Dropout", "Cast"}
    assert wanted <= SUPPORTED_OPS


def test_emitter_text_without_compiling():
    from edgec.codegen.ir import Node, Tensor
    x, y = Tensor("x", (2, 3), np.float32), Tensor("y", (2, 3), np.float32)
    node = Node("r", "Relu", [x], [y])
    ctx = EmitContext(get_target("generic"))
    ctx.begin(node)
    body = get("Relu").emit(node, ctx)
    assert "for (size_t i = 0; i < 6u; i++)" in body and "> 0.0f" in body


def test_targets_are_data():
    assert detect_native("x86_64", frozenset({"avx512f", "avx512bw", "avx512vl", "avx2", "fma"})) == "x86_64-avx512"
    vnni = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512vbmi", "avx2", "fma"}
    assert detect_native("x86_64", frozenset(vnni)) == "x86_64-avx512-vnni"
    assert detect_native("x86_64", frozenset({"avx2", "fma"})) == "x86_64-avx2"
    assert detect_native("x86_64", frozenset({"avx2", "fma", "avx_vnni"})) == "x86_64-avx2-vnni"  # Alder Lake, N100
    assert detect_native("x86_64", frozenset(vnni | {"avx_vnni"})) == "x86_64-avx512-vnni"
    amx = {"amx_tile", "amx_int8"}  # Sapphire Rapids and newer: int8 GEMMs on tiles
    assert detect_native("x86_64", frozenset(vnni | amx | {"avx_vnni"})) == "x86_64-avx512-amx"
    assert detect_native("x86_64", frozenset(vnni | {"amx_tile"})) == "x86_64-avx512-vnni"  # no AMX-INT8
    t = get_target("x86_64-avx512-amx")
    assert {"-mamx-tile", "-mamx-int8"} <= set(t.cflags) and set(get_target("x86_64-avx512-vnni").features) < set(t.features)
    from edgec.codegen.ops.qpack import Q8_GEMM, gemm_variant
    assert gemm_variant(t)[0] == Q8_GEMM["amx"][0] and gemm_variant(t, np.ones((4, 12), np.int8))[0] == Q8_GEMM["amx"][0]
    assert gemm_variant(t, np.ones((4, 11), np.int8))[0] == Q8_GEMM["avx512vnni"][0]  # shallow: the VNNI GEMM
    assert detect_native("x86_64", frozenset({"sse2"})) == "generic"
    assert detect_native("aarch64", frozenset({"asimd"})) == "aarch64-neon"
    assert detect_native("aarch64", frozenset({"asimd", "asimddp", "asimdhp"})) == "aarch64-v82"
    t = get_target("aarch64-neon")
    assert t.qemu == ("qemu-aarch64", "-cpu", "cortex-a72") and "-mcpu=cortex-a72" in t.cflags and t.f32_lanes == 4
    assert set(target_names()) >= {"native", "generic", "x86_64-avx2", "x86_64-avx512", "aarch64-neon",
                                   "aarch64-v82", "armv7-neon"}
    with pytest.raises(EdgecError, match="unknown target"):
        get_target("riscv")


def test_native_target_uses_this_machines_caches():
    """Blocking for native builds follows the host's L1d/L2 as sysfs gives them; named targets keep the table's."""
    from pathlib import Path

    from edgec.codegen.targets import _parse_size, host_caches

    assert (_parse_size("32K"), _parse_size("512K\n"), _parse_size("2M"), _parse_size("0K"), _parse_size("x")) == \
        (32768, 524288, 2 << 20, None, None)
    want = {}
    for d in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        level, kind = (d / "level").read_text().strip(), (d / "type").read_text().strip()
        if (level, kind) == ("1", "Data"):
            want["l1"] = _parse_size((d / "size").read_text())
        elif level == "2" and kind != "Instruction":
            want["l2"] = _parse_size((d / "size").read_text())
    native, named = get_target("native"), get_target(detect_native())
    assert host_caches() == (want.get("l1"), want.get("l2"))
    assert native.l1d_bytes == (want.get("l1") or named.l1d_bytes)
    assert native.l2_bytes == (want.get("l2") or named.l2_bytes)
    assert get_target("aarch64-neon").l2_bytes == 1 << 20  # a named target: the table's


def test_decomposed_layernorm_becomes_one_node(tmp_path):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.array([-1], np.int64), "ax"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two"),
             numpy_helper.from_array(np.array(1e-5, np.float32), "eps"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "gamma"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "beta")]
    nodes = [helper.make_node("ReduceMean", ["x", "ax"], ["m"], keepdims=1),
             helper.make_node("Sub", ["x", "m"], ["d"]), helper.make_node("Pow", ["d", "two"], ["p"]),
             helper.make_node("ReduceMean", ["p", "ax"], ["v"], keepdims=1),
             helper.make_node("Add", ["v", "eps"], ["e"]), helper.make_node("Sqrt", ["e"], ["s"]),
             helper.make_node("Div", ["d", "s"], ["n"]), helper.make_node("Mul", ["n", "gamma"], ["g"]),
             helper.make_node("Add", ["g", "beta"], ["y"])]
    p = _save(tmp_path / "m.onnx", nodes, [_vi("x", [2, 5, 16])], [_vi("y", [2, 5, 16])], inits, opset=18)
    g = lower_file(p)
    assert [n.op for n in g.nodes] == ["LayerNormalization"]
    from edgec.codegen import verify
    assert verify(p).ok


@pytest.mark.parametrize("hardswish_form", ["div", "mul"])
def test_gelu_and_hardswish_patterns_fuse_into_gemm_epilogues(tmp_path, hardswish_form):
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "w2")]
    for name, v in (("sqrt2", 1.4142135), ("one", 1.0), ("half", 0.5), ("three", 3.0), ("zero", 0.0), ("six", 6.0),
                    ("sixth", 1 / 6)):
        inits.append(numpy_helper.from_array(np.array(v, np.float32), name))
    scale = helper.make_node("Div", ["hm", "six"], ["y"]) if hardswish_form == "div" else \
        helper.make_node("Mul", ["hm", "sixth"], ["y"])
    nodes = [helper.make_node("Gemm", ["x", "w"], ["a"]),
             helper.make_node("Div", ["a", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["a", "p"], ["q"]),
             helper.make_node("Mul", ["q", "half"], ["gelu"]),
             helper.make_node("Gemm", ["gelu", "w2"], ["b"]),
             helper.make_node("Add", ["b", "three"], ["b3"]), helper.make_node("Clip", ["b3", "zero", "six"], ["r6"]),
             helper.make_node("Mul", ["b", "r6"], ["hm"]), scale]
    p = _save(tmp_path / "m.onnx", nodes, [_vi("x", [4, 8])], [_vi("y", [4, 8])], inits)
    g = lower_file(p)
    assert [(n.op, n.epilogue.act) for n in g.nodes] == [("Gemm", "gelu"), ("Gemm", "hard_swish")]
    from edgec.codegen import verify
    assert verify(p).ok


def test_declared_dynamic_output_dims_are_inferred_anew(tmp_path):
    """Some exporters declare 'any size' as dim_value -1 on outputs; with the inputs pinned, the output's shape is
    inferred again instead of the declaration keeping it unknown (an optimized PaddleOCR model hit this)."""
    import onnx
    from onnx import TensorProto, helper

    from edgec.model import load_model, tensor_shapes

    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])
    out.type.tensor_type.shape.dim[0].Clear()
    out.type.tensor_type.shape.dim[0].dim_value = -1
    g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])], [out])
    p = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    m = load_model(p, {"x": [3, 2]})
    assert tuple(tensor_shapes(m)["y"].shape) == (3, 2)
