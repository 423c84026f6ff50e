"""codegen/costmodel.py estimates read from target data: the layout constants of a target entry reach the
estimate and the region's pick, a device's learned value still wins over them."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen import costmodel, layout, options
from edgec.codegen.lower import lower_file
from edgec.codegen.options import CompileOptions
from edgec.codegen.targets import get_target

# the AVX2 entry with the Zen 3 host's caches (the layout constants were measured there): host-independent picks
ZEN3 = dataclasses.replace(get_target("x86_64-avx2"), l1d_bytes=32 << 10, l2_bytes=512 << 10)


def with_layout(t, **values):
    """A copy of target t whose targets.yaml layout_cost entries `values` are changed."""
    d = dict(t.layout_cost)
    assert set(values) <= set(d)
    d.update(values)
    return dataclasses.replace(t, layout_cost=tuple(sorted(d.items())))


def geom(c, k, hw, groups=1, kh=1, stride=1):
    ho = (hw - 1) // stride + 1
    return dict(N=1, C=c, K=k, G=groups, H=hw, W=hw, Ho=ho, Wo=ho, KH=kh, KW=kh, SH=stride, SW=stride, DH=1, DW=1,
                PT=kh // 2, PL=kh // 2)


def dw_1x1_chain(path, c, hw):
    """Depthwise 3x3 C -> 1x1 C->C + ReLU: one region of the layout pass, two edge tensors."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((c, 1, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((c, c, 1, 1)) / np.sqrt(c)).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["d"], group=c, pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["d", "w2"], ["p"]),
             helper.make_node("Relu", ["p"], ["y"])]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, hw, hw])], [w1, w2])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("kind,key,args", [
    ("dw", "dw_nchwc_tap", dict(g=geom(256, 256, 14, groups=256, kh=3))),
    ("dw", "dw_s2_tap", dict(g=geom(256, 256, 28, groups=256, kh=3, stride=2))),  # phases split in registers
    ("dw", "dw_s2_row", dict(g=geom(256, 256, 28, groups=256, kh=3, stride=2))),
    ("dw", "dw_plane_row", dict(g=geom(256, 256, 56, groups=256, kh=3, stride=2))),  # AVX2: rows past 2 vectors
    ("dw", "dw_plane_row", dict(g=geom(256, 256, 28, groups=256, kh=7))),  # no fixed 7x7 kernel: the unaligned path
    ("dw", "dw_s1_tap", dict(g=geom(256, 256, 28, groups=256, kh=3))),
    ("dw", "dw_s1_row", dict(g=geom(256, 256, 56, groups=256, kh=3))),
    ("dw", "dw_plane_row", dict(g=geom(256, 256, 56, groups=256, kh=5))),  # 5x5: the unaligned path's figures
    ("1x1", "nchwc_mac", dict(g=geom(256, 256, 14))),
    ("1x1", "gemm_mac", dict(g=geom(256, 256, 14))),
    ("pool", "elem", dict(y_shape=(1, 256, 14, 14))),
])
def test_target_layout_cost_reaches_the_node_estimate(kind, key, args):
    base = costmodel.layout_node_cost(ZEN3, kind, 8, **args)
    more = costmodel.layout_node_cost(with_layout(ZEN3, **{key: 2 * ZEN3.layout_value(key)}), kind, 8, **args)
    assert more != base and all(m >= b for m, b in zip(more, base))


def test_target_layout_cost_reaches_the_reorder_estimate():
    t = with_layout(ZEN3, reorder_byte=0.1, reorder_call=0.0)
    assert costmodel.layout_reorder_cost(t, 1000) == pytest.approx(100.0)
    assert costmodel.layout_reorder_cost(ZEN3, 1000) == pytest.approx(1000 * 0.046 + 2000.0)


def test_region_pick_follows_the_target_entry_and_learned_values_win(tmp_path):
    """256ch 14x14 dw + 1x1 is blocked on the measured constants; a target whose blocked 1x1 costs 0.03 ns a MAC
    (about the rate before its pixel chunks) keeps it NCHW, and a device's learned layout-nchwc_mac overrides the
    entry again."""
    g = lower_file(dw_1x1_chain(tmp_path / "m.onnx", 256, 14))

    def pick(t):
        (r,) = layout.regions(g, t)
        return layout.estimate(g, r, t), layout.pays(g, r, t)

    (nchw, blocked), pays = pick(ZEN3)
    assert pays and blocked < nchw
    slow = with_layout(ZEN3, nchwc_mac=0.03)
    (nchw2, blocked2), pays2 = pick(slow)
    assert not pays2 and nchw2 == pytest.approx(nchw) and blocked2 > blocked
    with options.using(CompileOptions(learned=(("layout-nchwc_mac", ZEN3.layout_value("nchwc_mac")),))):
        (_, blocked3), pays3 = pick(slow)
    assert pays3 and blocked3 == pytest.approx(blocked)


def test_winograd_call_overhead_picks():
    """Per-call cycles of the Winograd GEMMs (costmodel._WG_CALL, learned wino-call). Zen 3, AVX2, thread CPU time
    (docs/benchmarks.md, "Grouped Winograd: tail panels and per-call cycles"): with them the grouped GEMM phases come
    within 0.94-1.15x of the estimate; 4-layer stacks: 144ch 56x56 g=16 GSPC 8.20 against F(4,3) 10.40 ms, 192ch
    28x28 g=16 a near tie (F(4,3) / GSPC 0.93-1.27 over four passes), both F(4,3) with neither change. g=8 (24 a
    group: F(4,3) the fastest in three of four passes) stays on F(4,3); the same cycles weigh fewer K steps on
    AVX-512's 12x32 tile. The output transform is charged whole vectors of a group's channels (12 a group on 8
    lanes as 16: measured alone 0.114 ms at 192ch g=16 F(4,3), estimated 0.087 for 192 channels, 0.116 for 256)."""
    from edgec.codegen import kernels
    from edgec.codegen.ops.conv import direct_path_3x3

    gk = kernels.gemm_kernel(ZEN3)
    mr, nr = gk.params["mr"], gk.params["nr"]

    def pick(c, hw, groups):
        g = geom(c, c, hw, groups, kh=3)
        return costmodel.choose_conv3x3(ZEN3, g, mr, nr, *direct_path_3x3(ZEN3, g)).algo

    assert pick(192, 28, 16) == "direct"  # the GSPC row kernel
    assert pick(144, 56, 16) == "direct"
    assert pick(192, 28, 8) == "winograd-f43"
    g = geom(192, 192, 28, 16, kh=3)
    out = {G: costmodel.winograd_estimate(ZEN3, geom(192, 192, 28, G, kh=3), 4, mr, nr)["transforms"] for G in (8, 16)}
    assert out[16] - out[8] == pytest.approx(64 * 49 * 36 * costmodel._WG_OUT)  # 4 idle lanes x 16 groups
    est = costmodel.winograd_estimate(ZEN3, g, 4, mr, nr)
    with options.using(CompileOptions(learned=(("wino-call", 0.0),))):
        none = costmodel.winograd_estimate(ZEN3, g, 4, mr, nr)
    cells = 16 * 36 * 16 * 54  # GEMM outputs: groups x alpha^2 x Kpg padded to NR x tiles padded to MR
    assert est["gemm"] - none["gemm"] == pytest.approx(cells * costmodel._WG_CALL / 6)  # 6 cycles a 6x16 K step
    avx512 = get_target("x86_64-avx512")
    k512 = kernels.gemm_kernel(avx512)
    m5, n5 = k512.params["mr"], k512.params["nr"]
    est5 = costmodel.winograd_estimate(avx512, g, 4, m5, n5)
    with options.using(CompileOptions(learned=(("wino-call", 0.0),))):
        none5 = costmodel.winograd_estimate(avx512, g, 4, m5, n5)
    units = costmodel._peak_lpc(avx512) // avx512.f32_lanes  # FMA units: a K step is 12 x 2 vector FMAs on them
    assert est5["gemm"] - none5["gemm"] == pytest.approx(16 * 36 * 32 * 60 * costmodel._WG_CALL / (24 / units))


def test_blocked_winograd_picks_its_tile_on_the_blocked_estimate(tmp_path):
    """A grouped conv of whole-block groups on the channel-blocked Winograd driver: the transforms priced at
    costmodel._WG_NCHWC_TRANS of the NCHW driver's, and the tile picked on that estimate even where the NCHW
    estimate chose Winograd (384ch 14x14 g=8: F(2,3) there, F(4,3) measured 0.86x its time blocked; Zen 5, AVX-512).
    A dense conv's choice already prices the blocked driver; a forced algorithm stays as forced."""
    from edgec.codegen import kernels
    from edgec.codegen.ops import winograd
    from edgec.codegen.ops.conv import direct_path_3x3

    t = get_target("x86_64-avx512-vnni")
    gk = kernels.gemm_kernel(t)
    mr, nr = gk.params["mr"], gk.params["nr"]
    g = geom(384, 384, 14, 8, kh=3)
    dense = dict(g, C=48, K=48, G=1, N=8)
    nchw = costmodel.winograd_estimate(t, dense, 4, mr, nr)
    blocked = costmodel.winograd_estimate(t, dense, 4, mr, nr, blocked=True)
    assert blocked["transforms"] == pytest.approx(nchw["transforms"] * costmodel._WG_NCHWC_TRANS)
    assert blocked["gemm"] == nchw["gemm"] and blocked["u_passes"] == nchw["u_passes"]
    cols, kind = direct_path_3x3(t, g)
    assert winograd.choose(t, g, cols, kind).algo == "winograd-f23"
    c = winograd.choose_blocked(t, g, cols, kind)
    assert c.algo == "winograd-f43" and "blocked" in c.why and "F(2,3)" in c.why
    with options.using(CompileOptions(conv="winograd-f23")):
        assert winograd.choose_blocked(t, g, cols, kind).algo == "winograd-f23"
    db = tmp_path / "db.json"  # a device's measured choice for the layer stays too
    key = costmodel.layer_key("conv3x3", C=384, OC=384, g=8, px=196)
    db.write_text(json.dumps({t.name: {key: "winograd-f23"}}))
    with options.using(CompileOptions(tuning_db=str(db))):
        assert winograd.choose_blocked(t, g, cols, kind).algo == "winograd-f23"
    g1 = geom(256, 256, 14, kh=3)
    assert winograd.choose_blocked(t, g1, *direct_path_3x3(t, g1)) == winograd.choose(t, g1, *direct_path_3x3(t, g1))


def test_dw_aligned_path_matches_the_plane_kernels_rule():
    """dw_s1_aligned mirrors dw_s1a_band (f32-dwconv-tmpl.h): fixed 3x3 / 5x5 x86 kernels, stride 1 along rows,
    no dilation, rows of at least a vector, and a band of rows that fits the row buffer."""
    avx2 = get_target("x86_64-avx2")
    assert costmodel.dw_s1_aligned(avx2, geom(32, 32, 112, groups=32, kh=3))
    assert costmodel.dw_s1_aligned(avx2, dict(geom(32, 32, 96, groups=32, kh=5), H=6, Ho=3, SH=2))  # ppocr s2x1
    assert not costmodel.dw_s1_aligned(avx2, geom(32, 32, 112, groups=32, kh=3, stride=2))
    assert not costmodel.dw_s1_aligned(avx2, geom(32, 32, 112, groups=32, kh=7))
    assert not costmodel.dw_s1_aligned(avx2, dict(geom(32, 32, 28, groups=32, kh=3), DW=2))
    assert not costmodel.dw_s1_aligned(avx2, geom(32, 32, 7, groups=32, kh=3))  # rows shorter than a vector
    assert not costmodel.dw_s1_aligned(avx2, geom(4, 4, 2000, groups=4, kh=3))  # rows past a band's buffer
    assert not costmodel.dw_s1_aligned(get_target("generic"), geom(32, 32, 112, groups=32, kh=3))
    assert not costmodel.dw_s1_aligned(get_target("aarch64-neon"), geom(32, 32, 112, groups=32, kh=3))


def test_dw_s2_split_matches_the_plane_kernels_rule():
    """dw_s2_split mirrors dw_s2v_ok (f32-dwconv-tmpl.h): fixed 3x3 / 5x5 x86 kernels, stride 2 both ways, no
    dilation, left pads of at most 2; AVX2 rows of up to 2 vectors (3x3) or 1 (5x5). Where it holds a 3x3 layer
    stays on the plane kernel at any row fill (dw_uses_cb)."""
    avx2, avx512 = get_target("x86_64-avx2"), get_target("x86_64-avx512")
    s2 = geom(576, 576, 14, groups=576, kh=3, stride=2)  # 7-wide rows: 7 of 16 lanes on AVX-512
    assert costmodel.dw_s2_split(avx512, s2) and costmodel.dw_s2_split(avx2, s2)
    assert not costmodel.dw_uses_cb(avx512, s2)
    assert costmodel.dw_s2_split(avx512, geom(96, 96, 112, groups=96, kh=3, stride=2))
    assert not costmodel.dw_s2_split(avx2, geom(96, 96, 112, groups=96, kh=3, stride=2))  # 56 > 2 x 8
    assert costmodel.dw_s2_split(avx2, geom(72, 72, 14, groups=72, kh=5, stride=2))
    assert not costmodel.dw_s2_split(avx2, geom(72, 72, 28, groups=72, kh=5, stride=2))  # 14 > 8
    assert costmodel.dw_uses_cb(avx512, geom(120, 120, 14, groups=120, kh=5, stride=2))  # 5x5: the fill rule
    assert not costmodel.dw_s2_split(avx512, geom(32, 32, 112, groups=32, kh=3))
    assert not costmodel.dw_s2_split(avx512, dict(geom(32, 32, 28, groups=32, kh=3, stride=2), DW=2))
    assert not costmodel.dw_s2_split(avx512, geom(32, 32, 28, groups=32, kh=7, stride=2))
    assert not costmodel.dw_s2_split(get_target("aarch64-neon"), geom(32, 32, 28, groups=32, kh=3, stride=2))


def test_blocked_1x1_tiles_share_evenly_among_threads():
    """nchwc.balanced_kt: 3-block tiles where 4-block ones leave a thread idle (576 channels, 36 blocks: 9 items on
    two threads, 12 in threes); unchanged where 4-block tiles share evenly, on one thread, and for grouped convs."""
    from edgec.codegen.ops.nchwc import balanced_kt
    assert balanced_kt(36, 4, 1, 2, True) == 3
    assert balanced_kt(60, 4, 1, 2, True) == 3  # 960 channels: 15 items -> 20
    assert balanced_kt(32, 4, 1, 2, True) == 4  # 512 channels: 8 items
    assert balanced_kt(36, 4, 2, 2, True) == 4  # two pixel chunks: 18 items
    assert balanced_kt(36, 4, 1, 1, True) == 4
    assert balanced_kt(36, 2, 1, 2, False) == 2
    assert balanced_kt(36, 4, 1, 4, True) == 3  # 9 items on 4 threads idle 1.33x, 12 share evenly
