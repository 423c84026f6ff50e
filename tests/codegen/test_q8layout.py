"""The int8 layout pass (codegen/q8layout.py): activations between convolutions stored blocked (NCHW4c, 16-pixel
pitch) where every reader reads them that way. Whole QDQ models compiled with the pass and without it (layout=nchw)
give the same bytes, at 1 and 3 threads, on both int8 GEMM families, and match the exact QDQ arithmetic."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen.project import compile_model
from test_quant_e2e import _out_scale, exact, quantize


def _resnet_like(path, rng):
    """Batch 2, a 13x13 map (169 pixels: a pitch of 176) and a 7x7 one after the stride-2 block (49: 64). A 3x3 stem on
    the quantized input; a bottleneck with its residual; a downsampling bottleneck (1x1 stride 2 on the shortcut, 3x3
    stride 2 inside); a side MaxPool on a 3x3's output (an NCHW reader: that tensor stays NCHW); an 18-channel 1x1
    (not a multiple of 4: NCHW) and a 3-channel input (NCHW); a GlobalAveragePool at the end."""
    specs = {"w0": (32, 3, 3, 3), "w1": (16, 32, 1, 1), "w2": (16, 16, 3, 3), "w3": (32, 16, 1, 1),
             "w4": (48, 32, 1, 1), "w5": (16, 32, 1, 1), "w6": (16, 16, 3, 3), "w7": (48, 16, 1, 1),
             "w8": (18, 48, 1, 1), "w9": (20, 18, 1, 1)}
    inits = [numpy_helper.from_array(rng.normal(0, 1.0 / np.sqrt(np.prod(s[1:])), s).astype(np.float32), k)
             for k, s in specs.items()]
    conv = lambda i, w, o, **kw: helper.make_node("Conv", [i, w], [o], **kw)  # noqa: E731
    relu = lambda i, o: helper.make_node("Relu", [i], [o])  # noqa: E731
    nodes = [conv("x", "w0", "a0", pads=[1] * 4), relu("a0", "a"),
             conv("a", "w1", "b0"), relu("b0", "b"), conv("b", "w2", "c0", pads=[1] * 4), relu("c0", "c"),
             conv("c", "w3", "d"), helper.make_node("Add", ["d", "a"], ["e0"]), relu("e0", "e"),
             helper.make_node("MaxPool", ["c"], ["side"], kernel_shape=[3, 3], strides=[2, 2]),
             conv("e", "w4", "f", strides=[2, 2]),
             conv("e", "w5", "g0"), relu("g0", "g"), conv("g", "w6", "h0", pads=[1] * 4, strides=[2, 2]), relu("h0", "h"),
             conv("h", "w7", "i"), helper.make_node("Add", ["i", "f"], ["j0"]), relu("j0", "j"),
             conv("j", "w8", "k0"), relu("k0", "k"), conv("k", "w9", "l"),
             helper.make_node("GlobalAveragePool", ["l"], ["y"])]
    g = helper.make_graph(nodes, "rn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 13, 13])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("side", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


@pytest.fixture(scope="module")
def resnet_like(tmp_path_factory):
    d = tmp_path_factory.mktemp("q8l")
    rng = np.random.default_rng(21)
    src = _resnet_like(d / "m.onnx", rng)
    return quantize(src, d / "q.onnx", "x", [rng.normal(0, 1, (2, 3, 13, 13)).astype(np.float32) for _ in range(8)])


@pytest.mark.parametrize("q8conv", ["auto", "q8-gemm"])
def test_blocked_int8_layout_gives_the_nchw_bytes(resnet_like, q8conv, tmp_path):
    from edgec.codegen.options import CompileOptions
    from edgec.codegen.targets import get_target
    from edgec.codegen.verifier import run_binary
    t = get_target("native")
    if not (t.arch == "x86_64" and "avx512_vnni" in t.features):
        pytest.skip("the blocked int8 layout needs the AVX-512 VNNI GEMMs' _c4 forms; this CPU lacks avx512_vnni")
    x = np.random.default_rng(5).normal(0, 1, (2, 3, 13, 13)).astype(np.float32)
    outs, builds = {}, {}
    for layout in ("auto", "nchw"):
        opts = CompileOptions(target="native", threads=3, q8conv=q8conv, layout=layout)
        b = builds[layout] = compile_model(resnet_like, tmp_path / layout, options=opts, build=True,
                                           input_shapes={"x": [2, 3, 13, 13]})
        for threads in (1, 3):
            outs[layout, threads] = run_binary(b.binaries["runner"], b.target, [x], tmp_path / f"{layout}{threads}",
                                               threads=threads)
    # written blocked: the stem (3 channels in: reads NCHW), the bottleneck's 1x1, the residual 1x1 with the Add (reads
    # the 3x3's NCHW output: the MaxPool reads that too; the residual, the stem's output, blocked with it), the
    # next block's four convs, the 18-channel 1x1's input; NCHW: the 3x3's and the 18-channel 1x1's outputs, the last
    blocked = [la["details"].get("layout") for la in builds["auto"].layers if la["op"] == "QLinearConv"]
    if q8conv == "auto":
        assert blocked == ["nchw -> nchw4c", "nchw4c -> nchw4c", "nchw4c -> nchw", "nchw -> nchw4c"] + \
            ["nchw4c -> nchw4c"] * 4 + ["nchw4c -> nchw", None], blocked
    else:  # the pixel-lane GEMM's implicit 3x3s read and write NCHW: the 1x1s around them keep the blocked sides
        assert blocked[2] is None and blocked[6] is None and "nchw4c -> nchw4c" in blocked, blocked
    assert not any("layout" in la.get("details", {}) for la in builds["nchw"].layers)
    want = outs["nchw", 1]
    for key, got in outs.items():
        assert all(np.array_equal(g, w) for g, w in zip(got, want)), key
    ref = exact(resnet_like, {"x": x})
    assert np.abs(want[0] - ref).max() <= _out_scale(resnet_like) * 1.001


def test_blocked_int8_layout_under_sanitizers(resnet_like, tmp_path):
    """The blocked build with AddressSanitizer + UBSan: no read past a tensor (the GEMMs read whole 16-pixel
    vectors of a plane, the pitch holds them)."""
    from edgec.codegen import build_project
    from edgec.codegen.options import CompileOptions
    from edgec.codegen.targets import get_target
    from edgec.codegen.verifier import run_binary
    t = get_target("native")
    if not (t.arch == "x86_64" and "avx512_vnni" in t.features):
        pytest.skip("the blocked int8 layout needs the AVX-512 VNNI GEMMs' _c4 forms; this CPU lacks avx512_vnni")
    b = compile_model(resnet_like, tmp_path / "p", options=CompileOptions(target="native", threads=2),
                      input_shapes={"x": [2, 3, 13, 13]})
    san = "-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all -Wall -Wextra -Werror"
    bins = build_project(b.dir, "native", cflags=san, ldflags="-fsanitize=address,undefined", jobs=2)
    x = np.random.default_rng(6).normal(0, 1, (2, 3, 13, 13)).astype(np.float32)
    got = run_binary(bins["runner"], b.target, [x], tmp_path / "run", threads=2)
    assert np.abs(got[0] - exact(resnet_like, {"x": x})).max() <= _out_scale(resnet_like) * 1.001


def _fires(path, batch, rng):
    """Two SqueezeNet fire modules (squeeze 1x1, expand 1x1 and 3x3, their Concat: the expands have their own
    scales, so one reaches the Concat through a requantization table), a 3x3 stride-2 MaxPool after the second and
    a 1x1 conv; 13x13 maps."""
    specs = {"s1": (16, 8, 1, 1), "e1": (32, 16, 1, 1), "f1": (32, 16, 3, 3), "s2": (16, 64, 1, 1), "e2": (32, 16, 1, 1),
             "f2": (32, 16, 3, 3), "w": (8, 64, 1, 1)}
    inits = [numpy_helper.from_array(rng.normal(0, 1.0 / np.sqrt(np.prod(s[1:])), s).astype(np.float32), k)
             for k, s in specs.items()]
    nodes = []
    for i, src in ((1, "x"), (2, "c1")):
        nodes += [helper.make_node("Conv", [src, f"s{i}"], [f"q{i}"]), helper.make_node("Relu", [f"q{i}"], [f"r{i}"]),
                  helper.make_node("Conv", [f"r{i}", f"e{i}"], [f"a{i}"]), helper.make_node("Relu", [f"a{i}"], [f"ar{i}"]),
                  helper.make_node("Conv", [f"r{i}", f"f{i}"], [f"b{i}"], pads=[1] * 4),
                  helper.make_node("Relu", [f"b{i}"], [f"br{i}"]),
                  helper.make_node("Concat", [f"ar{i}", f"br{i}"], [f"c{i}"], axis=1)]
    nodes += [helper.make_node("MaxPool", ["c2"], ["p"], kernel_shape=[3, 3], strides=[2, 2]),
              helper.make_node("Conv", ["p", "w"], ["y"])]
    g = helper.make_graph(nodes, "fires", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8, 13, 13])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


@pytest.mark.parametrize("batch", [1, 2])
def test_blocked_int8_concat_and_table(batch, tmp_path):
    """One image: both fires' Concats, their inputs (one through the table each, applied by its conv as it stores),
    the MaxPool and the convs around them blocked; the expands write their planes straight into the Concats'. Two
    images: a blocked Concat would
    interleave the images' planes, so both stay NCHW (the MaxPool with them). The NCHW build's bytes at 1 and 3
    threads either way, and the exact QDQ result."""
    from edgec.codegen.options import CompileOptions
    from edgec.codegen.targets import get_target
    from edgec.codegen.verifier import run_binary
    t = get_target("native")
    if not (t.arch == "x86_64" and "avx512_vnni" in t.features):
        pytest.skip("the blocked int8 layout needs the AVX-512 VNNI GEMMs' _c4 forms; this CPU lacks avx512_vnni")
    rng = np.random.default_rng(22)
    shape = (batch, 8, 13, 13)
    q = quantize(_fires(tmp_path / "m.onnx", batch, rng), tmp_path / "q.onnx", "x",
                 [rng.normal(0, 1, shape).astype(np.float32) for _ in range(8)])
    x = rng.normal(0, 1, shape).astype(np.float32)
    outs, builds = {}, {}
    for layout in ("auto", "nchw"):
        opts = CompileOptions(target="native", threads=3, layout=layout)
        b = builds[layout] = compile_model(q, tmp_path / layout, options=opts, build=True, input_shapes={"x": list(shape)})
        for threads in (1, 3):
            outs[layout, threads] = run_binary(b.binaries["runner"], b.target, [x], tmp_path / f"{layout}{threads}",
                                               threads=threads)[0]
    cats = [la for la in builds["auto"].layers if la["op"] == "Concat"]
    luts = [la for la in builds["auto"].layers if la.get("details", {}).get("fused_lut")]
    assert len(cats) == 2 and len(luts) == 2, [la["algo"] for la in builds["auto"].layers]
    assert not any(la["algo"] == "q8-lut" for la in builds["auto"].layers)
    pool = [la for la in builds["auto"].layers if la["algo"] == "q8-maxpool"]
    if batch == 1:
        assert all(c["algo"] == "in-place" and c["details"].get("layout") == "nchw4c" for c in cats), cats
        assert pool[0]["details"]["kernel"] == "q8_maxpool_c4__avx512", pool
    else:
        assert all("layout" not in c.get("details", {}) for c in cats + pool), cats + pool
    want = outs["nchw", 1]
    for key, got in outs.items():
        assert np.array_equal(got, want), key
    assert np.abs(want - exact(q, {"x": x})).max() <= _out_scale(q) * 1.001
