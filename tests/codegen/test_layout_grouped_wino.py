"""Grouped 3x3 convs with whole channel blocks a group run blocked as one dense Winograd conv per group
(f32-winograd-nchwc.h, G): two images, a residual Add and biases, 1 and 3 threads, against onnxruntime and the NCHW
build (layout=nchw runs the NCHW grouped driver). Groups that are not whole blocks run merged (layout.merge_groups:
block-diagonal weights over fewer groups of whole blocks, the GEMMs on the grouped 1x1's band tile)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen import compile_model
from edgec.codegen.layout import block_width, merged_groups
from edgec.codegen.options import CompileOptions
from edgec.codegen.targets import get_target
from edgec.codegen.verifier import onnxruntime_outputs, run_binary


def _model(path, c, g, hw=15, n=2):
    rng = np.random.default_rng(8)
    inits, nodes, h = [], [], "x"
    for i in range(3):
        inits.append(numpy_helper.from_array((rng.standard_normal((c, c // g, 3, 3)) / 6).astype(np.float32), f"w{i}"))
        inits.append(numpy_helper.from_array((rng.standard_normal(c) * 0.1).astype(np.float32), f"b{i}"))
        nodes.append(helper.make_node("Conv", [h, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1] * 4, group=g))
        if i == 2:  # the last one's residual: the first one's output
            nodes.append(helper.make_node("Add", [f"c{i}", "r0"], ["s"]))
            nodes.append(helper.make_node("Relu", ["s"], ["y"]))
        else:
            nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
            h = f"r{i}"
    graph = helper.make_graph(nodes, "gw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, hw, hw])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(onnx.shape_inference.infer_shapes(m), path)
    return path


def _geom(c, g, hw=28):
    return dict(N=1, C=c, H=hw, W=hw, K=c, Ho=hw, Wo=hw, G=g, KH=3, KW=3, SH=1, SW=1, DH=1, DW=1, PT=1, PL=1)


def test_merged_groups():
    assert merged_groups(_geom(128, 4), 16) == 4  # whole blocks: as they are
    assert merged_groups(_geom(128, 16), 16) == 8  # 8 a group: pairs
    assert merged_groups(_geom(192, 8), 16) == 4  # 24: pairs of 48
    assert merged_groups(_geom(192, 16), 16) == 4  # 12: fours of 48
    assert merged_groups(_geom(144, 2), 16) == 0  # 72: pairs of 144, too wide
    assert merged_groups(_geom(576, 16), 16) == 0  # 36: fours of 144, too wide
    assert merged_groups(_geom(96, 16), 16) == 0  # 6: eights of 48, each block reading 3 groups: 10/3 the reads
    assert merged_groups(_geom(24, 3), 16) == 0  # 8 a group, an odd count: no pairs
    assert merged_groups(dict(_geom(96, 4), K=64), 16) == 2  # 24 in, 16 out a group: inputs need pairs
    assert merged_groups(dict(_geom(128, 4), K=32), 16) == 0  # 32 in (whole, wide), 8 out
    assert merged_groups(_geom(96, 8), 8) == 4  # 12 a group on 8-channel blocks (AVX2)


def test_merge_chosen(tmp_path):
    """192 channels in 8 groups (24 a group) on 28x28 maps run merged into 4 groups of 48 on the blocked driver
    (measured 0.70x the NCHW grouped Winograd's time on a Zen 5 core), their GEMMs on the band tile; 8-channel
    groups in pairs on the dense tile. Code only, for a fixed target."""
    path = _model(tmp_path / "m.onnx", 192, 8, hw=28)
    bld = compile_model(path, tmp_path / "out", build=False, options=CompileOptions(target="x86_64-avx512", threads=1))
    convs = [la for la in bld.layers if la["op"] == "Conv"]
    assert all("nchwc" in la["algo"] and "merged into 4" in la["details"]["why"] for la in convs), convs
    assert all(la["macs"] == 2 * 192 * 24 * 9 * 28 * 28 for la in convs)  # the layer's own, not the zeros'
    assert all("-6x32-" in la["algo"] for la in convs), convs  # the grouped 1x1's band tile: 2 blocks
    # pairs of 8 channels: each 16-lane block reads both groups whole, so the dense 4-block tile runs them
    path = _model(tmp_path / "p.onnx", 128, 16, hw=28)
    bld = compile_model(path, tmp_path / "p", build=False, options=CompileOptions(target="x86_64-avx512", threads=1))
    convs = [la for la in bld.layers if la["op"] == "Conv"]
    assert all("merged into 8" in la["details"]["why"] and "-6x64-" in la["algo"] for la in convs), convs


@pytest.mark.parametrize("groups,blocks", [(2, 2), (3, 2), (4, 0.5), (2, 1.5), (4, 0.75)])
def test_grouped_winograd_blocked_matches_onnxruntime(groups, blocks, tmp_path):
    t = get_target("native")
    b = block_width(t)
    if not b:
        pytest.skip("this target has no channel-blocked kernels")
    c = int(groups * blocks * b)  # blocks a group: 0.5 and 1.5 run merged (pairs into whole blocks), 0.75 in fours
    path = _model(tmp_path / "m.onnx", c, groups)
    x = np.random.default_rng(9).standard_normal((2, c, 15, 15)).astype(np.float32)
    want = onnxruntime_outputs(path, {"x": x})[1][0]
    got = {}
    for layout in ("nchwc", "nchw"):
        bld = compile_model(path, tmp_path / layout, build=True,
                            options=CompileOptions(target="native", threads=3, layout=layout, conv="winograd-f43"))
        convs = [la for la in bld.layers if la["op"] == "Conv"]
        assert all(la["algo"].startswith("winograd-f43" + ("-nchwc" if layout == "nchwc" else "")) for la in convs)
        if layout == "nchwc" and blocks % 1:
            assert all("merged" in la["details"]["why"] for la in convs), convs
        for threads in (1, 3):
            got[layout, threads] = run_binary(bld.binaries["runner"], bld.target, [x], tmp_path / f"{layout}{threads}",
                                              threads=threads)[0]
    for key, y in got.items():
        np.testing.assert_allclose(y, want, rtol=2e-4, atol=2e-4, err_msg=str(key))


def test_few_blocks_split_tiles_among_threads(tmp_path):
    """A dense conv of 2 blocks, one image: its output blocks are one range of the 1x1 kernel's tile, so 3 threads
    get chunks of the tiles instead (winograd.nchwc_tiles); results as onnxruntime's at 1 and 3 threads."""
    from edgec.codegen.ops import nchwc, winograd
    t = get_target("native")
    b = block_width(t)
    if not b:
        pytest.skip("this target has no channel-blocked kernels")
    c = 2 * b
    g = dict(_geom(c, 1, 15), K=c)
    tt, _ = winograd.nchwc_tiles(t, g, 4, 3, nchwc.tile_blocks(t, True), b)
    assert tt < 16  # 16 tiles of F(4,3) in more than one chunk
    path = _model(tmp_path / "m.onnx", c, 1, n=1)
    x = np.random.default_rng(3).standard_normal((1, c, 15, 15)).astype(np.float32)
    want = onnxruntime_outputs(path, {"x": x})[1][0]
    bld = compile_model(path, tmp_path / "b", build=True,
                        options=CompileOptions(target="native", threads=3, layout="nchwc", conv="winograd-f43"))
    assert all(la["algo"].startswith("winograd-f43-nchwc") for la in bld.layers if la["op"] == "Conv")
    for threads in (1, 3):
        y = run_binary(bld.binaries["runner"], bld.target, [x], tmp_path / f"r{threads}", threads=threads)[0]
        np.testing.assert_allclose(y, want, rtol=2e-4, atol=2e-4, err_msg=str(threads))


@pytest.mark.parametrize("threads", [2, 3, 4])
def test_few_work_items_are_a_whole_number_a_thread(threads):
    """nchwc_tiles: where a layer has fewer than 4 work items a thread, their count is a multiple of the thread
    count (a remainder leaves a thread idle for a whole item: SqueezeNet's 55x55 and 13x13 expands had 5 and 3
    on 2 threads); with enough items, or on one thread, the tiles are cut by L2 alone."""
    from edgec.codegen.ops import nchwc, winograd
    t = get_target("native")
    b = block_width(t)
    if not b:
        pytest.skip("this target has no channel-blocked kernels")
    kt = nchwc.tile_blocks(t, True)
    for c, k, hw, m in ((16, 64, 55, 4), (32, 128, 27, 4), (48, 192, 13, 2), (64, 256, 13, 2), (64, 64, 56, 4),
                        (b, b, 15, 4), (128, 128, 28, 4), (256, 256, 14, 2)):
        g = dict(_geom(c, 1, hw), K=k)
        T = (-(-hw // m)) ** 2
        tt1, ks1 = winograd.nchwc_tiles(t, g, m, 1, kt, b)
        tt, ks = winograd.nchwc_tiles(t, g, m, threads, kt, b)
        items = -(-T // tt) * ks
        assert ks1 == 1 and tt >= 1 and ks >= 1, (c, k, hw)
        assert items % threads == 0 or items >= 4 * threads, (c, k, hw, tt, ks)
        assert tt <= tt1  # never fewer chunks than L2 alone asks for


def test_grouped_winograd_picked_on_neon_under_qemu(tmp_path):
    """8-channel groups (two NEON blocks) in a blocked region: the blocked estimate (its transforms at
    costmodel._WG_NCHWC_TRANS) picks F(4,3) where GSPC ran before; the code matches onnxruntime under qemu on
    2 threads."""
    import shutil

    from edgec.codegen import verify
    t = get_target("aarch64-neon")
    if shutil.which(t.cc) is None or shutil.which(t.qemu[0]) is None:
        pytest.skip(f"{t.cc} or {t.qemu[0]} is not installed")
    path = _model(tmp_path / "m.onnx", 32, 4, n=1)
    opts = CompileOptions(target="aarch64-neon", threads=2, layout="nchwc")
    convs = [la for la in compile_model(path, tmp_path / "c", build=False, options=opts).layers if la["op"] == "Conv"]
    assert all(la["algo"].startswith("winograd-f43-nchwc") for la in convs), convs
    r = verify(path, out_dir=tmp_path / "p", rtol=2e-4, atol=2e-4, options=opts, threads=2)
    assert r.ok, r.outputs
