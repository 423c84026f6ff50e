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
    """Applicable variants of one family, or of the algorithm families (partitioning and blocking apart) when
    None."""
    return [v.name for v in variants.candidates(node, target)
            if (v.family == family if family else v.family not in ("par", "blk"))]


def test_registry_is_one_table_with_unique_names():
    names = [v.name for v in variants.VARIANTS]
    assert len(names) == len(set(names))
    fam = variants.families()
    assert fam["conv3x3"] == ["direct", "winograd-f23", "winograd-f43", "winograd-f63"]
    assert set(fam["gspc"]) == {"gspc-tile", "gspc-ow", "gspc-mg", "gspc-gemm"}
    assert set(fam["dw"]) == {"dw-plane", "dw-cb"}
    assert {"dense", "sparse-1x1", "sparse-4x4"} <= set(fam["sparse"]) and "q8-gspc" in fam["q8conv"]
    for v in variants.VARIANTS:  # every forced value is one CompileOptions accepts
        CompileOptions(**dict(v.forced))


def test_which_variants_apply(tmp_path):
    p = _model(tmp_path / "m.onnx", [
        _conv("1", 16, 32),                          # 3x3 s1: Winograd or direct
        ("Relu", ["t0"], {}, []),
        _conv("2", 32, 32, g=32, x="t1"),            # depthwise
        _conv("3", 32, 32, g=8, x="t2"),             # grouped 3x3 s1 (4 per group): Winograd, GSPC families
        _conv("4", 32, 32, k=3, s=2, x="t3"),        # 3x3 stride 2: GSPC's row kernel as one group or the GEMM
        _conv("5", 32, 32, k=1, x="t4", pruned=True),  # pruned 1x1: dense or sparse blocks
    ], [1, 16, 12, 12])
    n = lower_file(p).nodes
    assert [x.op for x in n] == ["Conv"] * 5
    assert _names(n[0]) == ["direct", "winograd-f23", "winograd-f43", "winograd-f63"]
    assert _names(n[1]) == ["dw-plane", "dw-cb"]
    assert _names(n[1], get_target("generic")) == ["dw-plane"]  # no channel-blocked kernel without SIMD
    assert set(_names(n[2])) == {"direct", "winograd-f23", "winograd-f43", "winograd-f63", "gspc-tile", "gspc-ow",
                                 "gspc-mg", "gspc-gemm"}
    assert _names(n[3]) == ["gspc-tile", "gspc-gemm"]
    # partitioning applies to every covered layer; the split axis to the dense GEMM drivers and to Winograd's
    # (tile blocks or output channels), grouped 3x3 stride-1 layers included
    assert _names(n[3], family="par") == _names(n[0], family="par") == _names(n[2], family="par") == \
        ["par-serial", "par-cols", "par-rows"]
    assert _names(n[1], family="par") == ["par-serial"]
    # cache blocking: the dense GEMM drivers' layers and Winograd's (grouped 3x3 stride-1 too)
    blk = ["blk-nc-half", "blk-nc-double", "blk-kc-whole"]
    assert all(_names(x, family="blk") == blk for x in (n[0], n[2], n[3], n[4]))
    assert _names(n[1], family="blk") == []
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
    # NCHW: a chain of Winograd layers alone runs channel-blocked by default, where records are per region
    opts = CompileOptions(target="x86_64-avx2", layout="nchw")
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


# -- every registry variant, forced through a tuning record, on odd shapes, against onnxruntime ---------------

def _expect(v: variants.Variant, layer: dict) -> bool:
    """Whether a layer's emitted kernel is the one variant v forces (per family, from its forced value)."""
    from edgec.codegen import kernels

    forced, algo = dict(v.forced), layer["algo"]
    op = {k.name: k.op for k in kernels.KERNELS}.get(layer.get("details", {}).get("kernel"))
    checks = {
        "conv3x3": lambda m: algo.startswith(m) if m.startswith("winograd") else not algo.startswith("winograd"),
        "gspc": lambda m: algo.startswith("gemm") if m == "gemm" else op == {"tile": "gspc"}.get(m, f"gspc_{m}"),
        "dw": lambda m: op == {"plane": "dwconv", "cb": "dwconv_cb"}[m],
        "sparse": lambda m: algo in (m.replace("sparse", "spmm"), m.replace("sparse", "spmv")) if m != "dense"
        else not algo.startswith(("spmm", "spmv")),
        "q8conv": lambda m: algo == m,
        "par": lambda m: algo.endswith(f"/{m}"),
        "blk": lambda m: algo.endswith(f"/{m}"),
        "gemm1x1": lambda m: algo.startswith("gemm") and ("-1x1-" in algo) == (m == "inplace"),
        "smallc": lambda m: algo.startswith("direct-smallc") == (m == "direct"),
    }
    assert v.family in checks, f"registry family {v.family} has no check here"
    return checks[v.family](forced[v.family] if v.family != "conv3x3" else forced["conv"])


def _odd_f32_model(path):
    """One layer per input, odd sizes: 3x3 stride-1 convs, grouped (stride 1 and 2) and depthwise convs, 1x1 convs and one-row
    Gemm/MatMul pruned in 4x4 blocks (60%), strided convs, 1x1s for the packed / in-place choice
    and a short 3x3 on the in-place stride-1 path for the split axes and blockings, a long-K 1x1 for kc-whole."""
    rng = np.random.default_rng(11)
    nodes, inits, ins, outs = [], [], [], []

    def weight(shape, pruned=False):
        a = (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)
        if pruned:
            m, k = shape[0], int(np.prod(shape[1:]))
            mask = np.kron(rng.random((-(-m // 4), k // 4)) >= 0.6, np.ones((4, 4)))[:m]
            a = (a.reshape(m, k) * mask).reshape(shape).astype(np.float32)
        name = f"w{len(inits)}"
        inits.append(numpy_helper.from_array(a, name))
        return name

    def conv(c, k, hw, ks=3, g=1, s=1, pruned=False, relu=True):
        i = len(ins)
        ins.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [1, c, *hw]))
        b = f"b{i}"
        inits.append(numpy_helper.from_array((rng.standard_normal(k) * 0.1).astype(np.float32), b))
        nodes.append(helper.make_node("Conv", [f"x{i}", weight((k, c // g, ks, ks), pruned), b],
                                      [f"c{i}"], name=f"conv{i}", pads=[ks // 2] * 4, group=g, strides=[s, s]))
        out = f"c{i}"
        if relu:
            nodes.append(helper.make_node("Relu", [out], [f"y{i}"], name=f"relu{i}"))
            out = f"y{i}"
        outs.append(out)

    def gemv(k, m, op):
        i = len(ins)
        ins.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [1, k]))
        if op == "MatMul":
            w = weight((m, k), pruned=True)
            wt = numpy_helper.to_array(inits[-1]).T.copy()
            inits[-1] = numpy_helper.from_array(wt, w)
            nodes.append(helper.make_node("MatMul", [f"x{i}", w], [f"y{i}"], name=f"mm{i}"))
        else:
            nodes.append(helper.make_node("Gemm", [f"x{i}", weight((m, k), pruned=True)], [f"y{i}"], name=f"gemm{i}",
                                          transB=1))
        outs.append(f"y{i}")

    for c, k, hw in ((13, 20, (11, 13)), (32, 36, (23, 19)), (24, 40, (15, 17)), (40, 24, (13, 9))):
        conv(c, k, hw)
    for hw in ((13, 11), (17, 9), (11, 21)):
        conv(24, 24, hw, g=6)                      # 4 channels per group
    conv(40, 40, (9, 11), g=2, s=2)                # 20 a group, strided: GSPC tile or a GEMM per group
    conv(20, 20, (11, 13), g=20)
    conv(12, 12, (23, 21), ks=5, g=12, s=2)
    for c, k, hw in ((24, 20, (7, 9)), (28, 12, (9, 7)), (32, 28, (5, 11))):
        conv(c, k, hw, ks=1, pruned=True, relu=False)
    gemv(36, 20, "MatMul")
    gemv(40, 24, "Gemm")
    conv(7, 24, (31, 33), s=2)
    conv(9, 16, (19, 23), s=2)
    conv(27, 21, (8, 8), ks=1, relu=False)
    for c, k, hw in ((19, 22, (9, 10)), (22, 26, (7, 12))):  # 1x1 B panels packed or read in place
        conv(c, k, hw, ks=1)
    conv(16, 20, (4, 10))  # 3x3 on the in-place stride-1 path with few column blocks (split axes)
    conv(3, 20, (17, 19), s=2)  # few input channels: direct kernel or GEMM
    conv(4, 12, (13, 15), ks=5)
    conv(2600, 9, (5, 5), ks=1, s=2, relu=False)  # K beyond one K block on every target: whole K forced
    conv(11, 18, (29, 27), s=2)  # dense strided: GSPC's row kernel as one group, or the GEMM
    conv(99, 18, (29, 27), ks=1, s=2)  # more GEMM-path layers, one per blocking variant
    conv(30, 17, (13, 11), ks=1)
    g = helper.make_graph(nodes, "odd", ins, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(onnx.shape_inference.infer_shapes(m), path)
    return path


def _odd_q8_model(path):
    """int8 QLinearConv layers, one per input: plain, grouped (4 per group) and depthwise, odd sizes; and 48 output
    channels (the channel-lane GEMM's 16-channel multiples, a last half panel)."""
    rng = np.random.default_rng(12)
    nodes, inits, ins, outs = [], [], [], []
    for i, (c, k, g, hw) in enumerate(((13, 19, 1, (9, 11)), (16, 16, 4, (11, 7)), (12, 12, 12, (9, 13)),
                                       (23, 48, 1, (7, 9)))):
        p = f"l{i}"
        inits += [numpy_helper.from_array(np.float32(0.05), f"{p}xs"), numpy_helper.from_array(np.uint8(128), f"{p}xz"),
                  numpy_helper.from_array(rng.integers(-60, 60, (k, c // g, 3, 3)).astype(np.int8), f"{p}w"),
                  numpy_helper.from_array(np.full(k, 0.01, np.float32), f"{p}ws"),
                  numpy_helper.from_array(np.zeros(k, np.int8), f"{p}wz"),
                  numpy_helper.from_array(np.float32(0.1), f"{p}ys"), numpy_helper.from_array(np.uint8(120), f"{p}yz")]
        args = [f"x{i}"] + [p + s for s in ("xs", "xz", "w", "ws", "wz", "ys", "yz")]
        nodes.append(helper.make_node("QLinearConv", args, [f"y{i}"], name=f"q{i}", pads=[1] * 4, group=g))
        ins.append(helper.make_tensor_value_info(f"x{i}", TensorProto.UINT8, [1, c, *hw]))
        outs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.UINT8, [1, k, *hw]))
    g = helper.make_graph(nodes, "q", ins, outs, inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def _match(edges: dict, order: list) -> dict:
    """Variant -> layer, each layer at most once (augmenting paths); edges[v] lists v's layers, preferred first."""
    owner: dict = {}

    def take(v, seen) -> bool:
        for l in edges.get(v, []):
            if l not in seen:
                seen.add(l)
                if l not in owner or take(owner[l], seen):
                    owner[l] = v
                    return True
        return False

    for v in order:
        take(v, set())
    return {v: l for l, v in owner.items()}


def test_every_registry_variant_runs_on_odd_shapes(tmp_path):
    """Every variant of the registry is forced (a tuning record) on a layer of odd shape where it applies on this
    host's target, preferably one where it changes the cost model's code; built with -Werror, run at 2 threads
    and compared with onnxruntime. A variant no layer here can take fails the test: extend the models."""
    from edgec.codegen import build_project
    from edgec.codegen.verifier import onnxruntime_outputs, run_binary

    target = get_target("native")
    opts = CompileOptions(target="native", threads=2)
    models = {"f32": _odd_f32_model(tmp_path / "f32.onnx"), "q8": _odd_q8_model(tmp_path / "q8.onnx")}
    sig_model, applies, base = {}, {}, {}
    for key, path in models.items():
        for node in lower_file(path).nodes:
            sig = variants.signature(node, opts.threads)
            if sig is not None:
                sig_model[sig] = key
                applies[sig] = {v.name for v in variants.candidates(node, target)}
        base.update({l["details"]["signature"]: l for l in compile_model(path, tmp_path / f"{key}-base",
                                                                         options=opts).layers
                     if "signature" in l.get("details", {})})
    edges = {}
    for v in variants.VARIANTS:
        sigs = sorted(s for s in applies if v.name in applies[s])
        got = {}
        for key in models:
            recs = tuple((s, v.forced_str({}) if v.family == "par" else
                          v.forced_str(variants.facts(next(n for n in lower_file(models[key]).nodes
                                                          if variants.signature(n, opts.threads) == s))),
                          f"forced {v.name}") for s in sigs if sig_model[s] == key)
            if recs:
                got.update({l["details"]["signature"]: l for l in compile_model(models[key], tmp_path / "probe",
                                                                                options=opts.with_(tuned=recs)).layers
                            if "signature" in l.get("details", {})})
        ok = [s for s in sigs if _expect(v, got[s])]
        edges[v.name] = sorted(ok, key=lambda s: got[s]["algo"] == base[s]["algo"])  # changed code first
    chosen = _match(edges, [v.name for v in variants.VARIANTS])
    # the channel-lane int8 GEMM exists for the AVX-512 VNNI GEMM only: no layer takes it on other targets
    from edgec.codegen.ops.qpack import cgemm_variant, gemm_variant
    absent = set() if cgemm_variant(gemm_variant(target)[0], 16, 16, (1, 1)) else {"q8-cgemm"}
    missing = [v.name for v in variants.VARIANTS if v.name not in chosen and v.name not in absent]
    assert not missing, f"no layer of the test models takes {missing} on {target.name}"
    for key, path in models.items():
        recs = tuple((s, variants.BY_NAME[v].forced_str(variants.facts(next(
            n for n in lower_file(path).nodes if variants.signature(n, opts.threads) == s))), f"forced {v}")
            for v, s in chosen.items() if sig_model[s] == key)
        b = compile_model(path, tmp_path / key, options=opts.with_(tuned=recs))
        layers = {l["details"]["signature"]: l for l in b.layers if "signature" in l.get("details", {})}
        for v, s in chosen.items():
            if sig_model[s] == key:
                assert _expect(variants.BY_NAME[v], layers[s]), (v, layers[s])
        runner = build_project(b.dir, "native", cflags="-O2 -Wall -Wextra -Werror", jobs=2)["runner"]
        sess = ort.InferenceSession(str(path))
        rng = np.random.default_rng(2)
        feeds = {i.name: (rng.integers(0, 256, i.shape).astype(np.uint8) if key == "q8" else
                          rng.standard_normal(i.shape).astype(np.float32)) for i in sess.get_inputs()}
        want = onnxruntime_outputs(path, feeds)[1]
        got = run_binary(runner, b.target, list(feeds.values()), tmp_path / f"run-{key}", threads=2)
        for name, g, w in zip([o.name for o in sess.get_outputs()], got, want):
            if key == "q8":  # requantization may round one step apart
                assert np.abs(g.astype(np.int32) - w.astype(np.int32)).max() <= 1, name
            else:
                assert float(np.max(np.abs(g - w) / (1 + np.abs(w)))) <= 1e-3, name


@pytest.mark.parametrize("target", ["native", "aarch64-neon"])
def test_winograd_blockings_change_its_code_and_compute_the_same(tmp_path, target):
    """Blockings on Winograd layers (F(4,3) forced globally, each blocking by a record on its own layer): tile block
    halved / doubled, KC halved (EDGEC_BLK's kc-half, not a registry variant) / whole, each a code of its own, built with -Werror at 2 threads against
    onnxruntime (NEON under qemu-aarch64)."""
    from edgec.codegen import build_project
    from edgec.codegen.verifier import onnxruntime_outputs, run_binary

    rng = np.random.default_rng(4)
    shapes = {"nc-half": (24, 30, 26), "nc-double": (20, 29, 27), "kc-half": (40, 9, 11), "kc-whole": (700, 6, 7)}
    nodes, inits, ins, outs = [], [], [], []
    for i, (c, h, w) in enumerate(shapes.values()):
        inits += [numpy_helper.from_array((rng.standard_normal((16, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32),
                                          f"w{i}")]
        nodes.append(helper.make_node("Conv", [f"x{i}", f"w{i}"], [f"y{i}"], pads=[1] * 4, name=f"c{i}"))
        ins.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [1, c, h, w]))
        outs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [1, 16, h, w]))
    path = tmp_path / "w.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "w", ins, outs, inits),
                                opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    # NCHW: the blockings are the NCHW driver's (channel-blocked Winograd has its own, f32-winograd-nchwc.h)
    opts = CompileOptions(target=target, threads=2, conv="winograd-f43", layout="nchw")
    base = [l for l in compile_model(path, tmp_path / "base", options=opts).layers if l["op"] == "Conv"]
    recs = tuple((l["details"]["signature"], f"blk={m}", f"forced {m}") for l, m in zip(base, shapes))
    b = compile_model(path, tmp_path / "blk", options=opts.with_(tuned=recs))
    layers = [l for l in b.layers if l["op"] == "Conv"]
    from edgec.codegen import kernels
    mr, key = kernels.gemm_kernel(get_target(target)).params["mr"], {"nc": "tb", "kc": "kc"}
    for l0, l, m in zip(base, layers, shapes):
        assert l["algo"] == l0["algo"] + f"/{m}" and l0["algo"].startswith("winograd-f43"), (l, m)
        k, tb, tiles = key[m[:2]], l0["details"]["tb"], -(-shapes[m][1] // 4) * -(-shapes[m][2] // 4)
        want = {"nc-half": max(mr, tb // 2 // mr * mr), "nc-double": min(2 * tb, -(-tiles // mr) * mr),
                "kc-half": 24, "kc-whole": 700}[m]
        assert l["details"][k] == want, (m, l0["details"], l["details"])
    runner = build_project(b.dir, target, cflags="-O2 -Wall -Wextra -Werror", jobs=2)["runner"]
    feeds = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
             for i in ins}
    want = onnxruntime_outputs(path, feeds)[1]
    got = run_binary(runner, b.target, list(feeds.values()), tmp_path / "run", threads=2)
    for g, w in zip(got, want):
        assert float(np.max(np.abs(g - w) / (1 + np.abs(w)))) <= 1e-3


def test_int8_conv_with_fused_relu_extracts_as_qdq(tmp_path):
    """A QDQ Conv -> Relu lowers to one QLinearConv with the Relu fused; extracted for tuning it becomes the
    QDQ pattern again (a standalone QLinearConv cannot hold the Relu), which compiles to the same signature and
    computes the same function as the layer in its model."""
    from edgec.devices.tune import extract_layer

    rng = np.random.default_rng(5)
    c, k, g, hw = 16, 24, 4, 9
    ws = (rng.random(k) * 0.01 + 0.005).astype(np.float32)  # per output channel
    inits = [numpy_helper.from_array(np.float32(0.05), "xs"), numpy_helper.from_array(np.uint8(128), "xz"),
             numpy_helper.from_array(rng.integers(-100, 100, (k, c // g, 3, 3)).astype(np.int8), "wq"),
             numpy_helper.from_array(ws, "ws"), numpy_helper.from_array(np.zeros(k, np.int8), "wz"),
             numpy_helper.from_array((rng.standard_normal(k) * 0.2).astype(np.float32), "bias"),
             numpy_helper.from_array(np.float32(0.04), "ys"), numpy_helper.from_array(np.uint8(3), "yz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wf"], axis=0),
             helper.make_node("Conv", ["xf", "wf", "bias"], ["c"], pads=[1] * 4, group=g),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    gr = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, k, hw, hw])], inits)
    p = tmp_path / "qdq.onnx"
    onnx.save(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), p)
    node = next(n for n in lower_file(p).nodes if n.op == "QLinearConv")
    sig = variants.signature(node, 1)
    assert node.attr("ec_act") == "relu" and sig.startswith("q8gconv3x3s1+relu:")
    x = extract_layer(node, tmp_path / "layer.onnx")
    layer = lower_file(x).nodes
    assert [n.op for n in layer] == ["QLinearConv"] and variants.signature(layer[0], 1) == sig
    assert _names(layer[0]) == _names(node) and "q8-gemm" in _names(layer[0])
    xf = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    xq = np.clip(np.round(xf / np.float32(0.05)) + 128, 0, 255).astype(np.uint8)
    want = np.round(ort.InferenceSession(str(p)).run(None, {"x": xf})[0] / np.float32(0.04)) + 3
    got = ort.InferenceSession(str(x)).run(None, {"in0": xq})[0]
    assert got.dtype == np.uint8 and np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1
    # and the tuner's candidates compile from it: the forced int8 paths differ
    opts = CompileOptions(target="x86_64-avx2")
    algos = {compile_model(x, tmp_path / v, options=opts.with_(tuned=(
        (sig, variants.BY_NAME[v].forced_str(variants.facts(layer[0])), v),))).layers[0]["algo"]
        for v in _names(layer[0])}
    assert len(algos) == len(_names(layer[0])) >= 2
