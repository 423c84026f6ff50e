"""The per-layer variant registry: which variants apply to which layers, layer signatures, a tuning record
forcing one layer (and only it), and layers extracted for tuning compiling back to their signature."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen import variants
from edgec.codegen.lower import lower_file
from edgec.codegen.options import CompileOptions
from edgec.codegen.project import compile_model
from edgec.codegen.targets import get_target
from edgec.errors import EdgecError

AVX2 = get_target("x86_64-avx2")


def _model(path, layers, x_shape, extra_inputs=(), opset=17):
    """layers: list of (op, inputs, attrs, initializers); the last output is y."""
    rng = np.random.default_rng(3)
    nodes, inits = [], []
    for i, (op, ins, attrs, ws) in enumerate(layers):
        for name, shape in ws:
            a = (rng.standard_normal(shape) * 0.3).astype(np.float32)
            if name.startswith("P"):  # pruned: 4x4 blocks of zeros, about 60%
                m, k = shape[0], int(np.prod(shape[1:]))
                mask = np.kron(rng.random((m // 4, k // 4)) >= 0.6, np.ones((4, 4)))
                a = (a.reshape(m, k) * mask).reshape(shape).astype(np.float32)
            inits.append(numpy_helper.from_array(a, name))
        nodes.append(helper.make_node(op, ins, [f"t{i}" if i < len(layers) - 1 else "y"], name=f"n{i}", **attrs))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)] + \
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in extra_inputs]
    g = helper.make_graph(nodes, "m", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    m = onnx.shape_inference.infer_shapes(m)
    onnx.save(m, path)
    return path


def _conv(name, cin, cout, k=3, g=1, s=1, x="x", out_bias=True, pruned=False):
    w = ("P" if pruned else "W") + name
    ins = [x, w] + ([f"B{name}"] if out_bias else [])
    ws = [(w, (cout, cin // g, k, k))] + ([(f"B{name}", (cout,))] if out_bias else [])
    return ("Conv", ins, {"pads": [k // 2] * 4, "group": g, "strides": [s, s]}, ws)


def _names(node, target=AVX2, family=None):
    """Applicable variants of one family, or of the algorithm families (partitioning apart) when None."""
    return [v.name for v in variants.candidates(node, target)
            if (v.family == family if family else v.family != "par")]


def test_registry_is_one_table_with_unique_names():
    names = [v.name for v in variants.VARIANTS]
    assert len(names) == len(set(names))
    fam = variants.families()
    assert fam["conv3x3"] == ["direct", "winograd-f23", "winograd-f43", "winograd-f63"]
    assert set(fam["gspc"]) == {"gspc-tile", "gspc-ow", "gspc-mg"} and set(fam["dw"]) == {"dw-plane", "dw-cb"}
    assert {"dense", "sparse-1x1", "sparse-4x4"} <= set(fam["sparse"]) and "q8-gspc" in fam["q8conv"]
    for v in variants.VARIANTS:  # every forced value is one CompileOptions accepts
        CompileOptions(**dict(v.forced))


def test_which_variants_apply(tmp_path):
    p = _model(tmp_path / "m.onnx", [
        _conv("1", 16, 32),                          # 3x3 s1: Winograd or direct
        ("Relu", ["t0"], {}, []),
        _conv("2", 32, 32, g=32, x="t1"),            # depthwise
        _conv("3", 32, 32, g=8, x="t2"),             # grouped 3x3 s1 (4 per group): Winograd, GSPC families
        _conv("4", 32, 32, k=3, s=2, x="t3"),        # 3x3 stride 2: nothing to choose
        _conv("5", 32, 32, k=1, x="t4", pruned=True),  # pruned 1x1: dense or sparse blocks
    ], [1, 16, 12, 12])
    n = lower_file(p).nodes
    assert [x.op for x in n] == ["Conv"] * 5
    assert _names(n[0]) == ["direct", "winograd-f23", "winograd-f43", "winograd-f63"]
    assert _names(n[1]) == ["dw-plane", "dw-cb"]
    assert _names(n[1], get_target("generic")) == ["dw-plane"]  # no channel-blocked kernel without SIMD
    assert set(_names(n[2])) == {"direct", "winograd-f23", "winograd-f43", "winograd-f63", "gspc-tile", "gspc-ow",
                                 "gspc-mg"}
    assert _names(n[3]) == []
    # partitioning applies to every covered layer; the split axis to the dense GEMM drivers only
    assert _names(n[3], family="par") == _names(n[0], family="par") == ["par-serial", "par-cols", "par-rows"]
    assert _names(n[1], family="par") == _names(n[2], family="par") == ["par-serial"]
    assert "dense" in _names(n[4]) and "sparse-4x4" in _names(n[4]) and "winograd-f23" not in _names(n[4])
    # the classes transfer-tuning matches on: op, window, stride and the fused epilogue, no sizes
    assert [variants.layer_class(x) for x in n] == ["conv3x3s1+relu", "dwconv3x3s1", "gconv3x3s1", "conv3x3s2",
                                                     "conv1x1s1"]


def test_signature_holds_shapes_epilogue_threads_and_sparsity(tmp_path):
    a = lower_file(_model(tmp_path / "a.onnx", [_conv("1", 8, 8), ("Relu", ["t0"], {}, [])], [1, 8, 10, 10])).nodes[0]
    b = lower_file(_model(tmp_path / "b.onnx", [_conv("1", 8, 8), ("Sigmoid", ["t0"], {}, [])], [1, 8, 10, 10])).nodes[0]
    c = lower_file(_model(tmp_path / "c.onnx", [_conv("1", 8, 8), ("Relu", ["t0"], {}, [])], [1, 8, 11, 10])).nodes[0]
    p = lower_file(_model(tmp_path / "p.onnx", [_conv("1", 8, 8, k=1, pruned=True)], [1, 8, 10, 10])).nodes[0]
    sa, sb, sc = (variants.signature(x, 1) for x in (a, b, c))
    assert len({sa, sb, sc}) == 3 and sa.startswith("conv3x3s1+relu:") and sb.startswith("conv3x3s1+sigmoid:")
    assert variants.signature(a, 2) != sa and sa.endswith(":f32:t1")
    assert ":z0." in variants.signature(p, 1) and ":z" not in sa


def test_a_record_forces_its_layer_only_and_says_so(tmp_path):
    # two layers of the same class and different shapes: the record names one signature
    p = _model(tmp_path / "two.onnx", [_conv("1", 16, 16), ("Relu", ["t0"], {}, []), _conv("2", 16, 16, x="t1"),
                                       ("Relu", ["t2"], {}, [])], [1, 16, 20, 20])
    opts = CompileOptions(target="x86_64-avx2")
    base = compile_model(p, tmp_path / "base", options=opts).layers
    sig = base[1]["details"]["signature"]
    assert base[0]["details"]["signature"] == sig  # same shapes, same epilogue: one signature, tuned once
    # a different forced variant per signature would be ambiguous; force the one signature both share
    other = "winograd-f63" if not base[0]["algo"].startswith("winograd-f63") else "winograd-f23"
    rec = (sig, f"conv={other};sparse=dense", "tuned on bench-box, 2026-01-01: 1.50x over the cost model's pick")
    tuned = compile_model(p, tmp_path / "tuned", options=opts.with_(tuned=(rec,))).layers
    assert all(l["algo"].startswith(other) and l["details"]["tuned"] == rec[2] for l in tuned)
    assert opts.with_(tuned=(rec,)).cache_key() != opts.cache_key()
    assert opts.with_(tuned=(rec,), tuning="off").tuned == ()
    # a record for a signature the model does not have changes nothing
    miss = compile_model(p, tmp_path / "miss", options=opts.with_(tuned=((sig + "x", rec[1], rec[2]),))).layers
    assert [l["algo"] for l in miss] == [l["algo"] for l in base] and "tuned" not in miss[0]["details"]


def test_forced_text_is_validated():
    assert variants.parse_forced("conv=direct;sparse=dense") == {"conv": "direct", "sparse": "dense"}
    for bad in ("conv=fast", "threads=4", "target=generic", "conv"):
        with pytest.raises(EdgecError):
            variants.parse_forced(bad)


@pytest.mark.parametrize("epilogue", ["relu", "clip", "silu", "gelu", "hard_swish", "add+relu", "relu+add"])
def test_extracted_layer_compiles_to_its_signature(tmp_path, epilogue):
    from edgec.devices.tune import extract_layer

    tail = []
    if epilogue == "add+relu":
        tail = [("Add", ["t0", "r"], {}, []), ("Relu", ["t1"], {}, [])]
    elif epilogue == "relu+add":
        tail = [("Relu", ["t0"], {}, []), ("Add", ["t1", "r"], {}, [])]
    elif epilogue == "clip":
        tail = [("Clip", ["t0", "lo", "hi"], {}, [])]
    elif epilogue == "silu":
        tail = [("Sigmoid", ["t0"], {}, []), ("Mul", ["t0", "t1"], {}, [])]
    elif epilogue == "gelu":
        tail = [("Gelu", ["t0"], {}, [])]
    else:
        tail = [({"relu": "Relu", "hard_swish": "HardSwish"}[epilogue], ["t0"], {}, [])]
    extra = [("r", [1, 8, 9, 9])] if "add" in epilogue else []
    p = _model(tmp_path / "m.onnx", [_conv("1", 8, 8)] + tail, [1, 8, 9, 9], extra, opset=20)
    if epilogue == "clip":
        m = onnx.load(p)
        m.graph.initializer.extend([numpy_helper.from_array(np.float32(0), "lo"),
                                    numpy_helper.from_array(np.float32(6), "hi")])
        onnx.save(m, p)
    node = lower_file(p).nodes[0]
    sig = variants.signature(node, 1)
    assert len(lower_file(p).nodes) == 1 and variants.layer_class(node).startswith("conv3x3s1+")
    x = extract_layer(node, tmp_path / "layer.onnx")
    assert variants.signature(lower_file(x).nodes[0], 1) == sig
    # same function as the original model (the extracted layer is what tuning checks candidates against)
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 8, 9, 9)).astype(np.float32)}
    if extra:
        feeds["r"] = np.random.default_rng(1).standard_normal((1, 8, 9, 9)).astype(np.float32)
    want = ort.InferenceSession(str(p)).run(None, feeds)[0]
    s = ort.InferenceSession(str(x))
    got = s.run(None, dict(zip([i.name for i in s.get_inputs()], feeds.values())))[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _q8conv(path, c=16, g=4, hw=8):
    """One int8 QLinearConv (uint8 activations, int8 weights), the form edgec's int8 emitters take."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.float32(0.05), "xs"), numpy_helper.from_array(np.uint8(128), "xz"),
             numpy_helper.from_array(rng.integers(-60, 60, (c, c // g, 3, 3)).astype(np.int8), "w"),
             numpy_helper.from_array(np.full(c, 0.01, np.float32), "ws"),
             numpy_helper.from_array(np.zeros(c, np.int8), "wz"),
             numpy_helper.from_array(np.float32(0.1), "ys"), numpy_helper.from_array(np.uint8(120), "yz")]
    n = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], pads=[1] * 4, group=g)
    gr = helper.make_graph([n], "q", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, c, hw, hw])],
                           [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, c, hw, hw])], inits)
    onnx.save(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_int8_conv_paths_are_variants_too(tmp_path):
    from edgec.devices.tune import extract_layer

    p = _q8conv(tmp_path / "q.onnx")
    node = lower_file(p).nodes[0]
    sig = variants.signature(node, 1)
    assert sig.startswith("q8gconv3x3s1:") and ":uint8:t1" in sig
    assert _names(node) == ["q8-gemm", "q8-gspc"] and _names(node, get_target("generic")) == ["q8-gemm"]
    opts = CompileOptions(target="x86_64-avx2")
    algos = {}
    for v in ("q8-gemm", "q8-gspc"):
        rec = (sig, variants.BY_NAME[v].forced_str(variants.facts(node)), f"tuned: {v}")
        layer = compile_model(p, tmp_path / v, options=opts.with_(tuned=(rec,))).layers[0]
        algos[v] = layer["algo"]
        assert layer["details"]["tuned"] == f"tuned: {v}"
    assert algos["q8-gemm"] != algos["q8-gspc"]
    assert variants.signature(lower_file(extract_layer(node, tmp_path / "x.onnx")).nodes[0], 1) == sig
