"""The cost model learns from a device's tuning records: the Winograd/direct trade-off of measured 3x3 layers
is fitted per device (costmodel.fit_conv3x3, tune.learned_constants) and changes the picks of its untuned
layers; without records, or with tuning off, nothing changes."""

from __future__ import annotations

import numpy as np
import pytest

from edgec.codegen import costmodel, kernels
from edgec.codegen.ops.conv import direct_path_3x3
from edgec.codegen.options import CompileOptions, using
from edgec.codegen.targets import get_target
from edgec.devices.tune import learned_constants
from edgec.devices.tuningdb import Record

T = get_target("x86_64-avx2")
MR, NR = kernels.gemm_kernel(T).params["mr"], kernels.gemm_kernel(T).params["nr"]


def geom(c, k, hw):
    return dict(N=1, C=c, H=hw, W=hw, K=k, G=1, KH=3, KW=3, SH=1, SW=1, DH=1, DW=1, PT=1, PL=1, Ho=hw, Wo=hw)


def choose(g):
    cols, kind = direct_path_3x3(T, g)
    return costmodel.choose_conv3x3(T, g, MR, NR, cols, kind)


def est_ratio(g, m):
    """The cost model's F(m,3) / direct time ratio for a layer."""
    cols, kind = direct_path_3x3(T, g)
    return costmodel.winograd_estimate(T, g, m, MR, NR, costmodel._dense_blocked(T, g))["cost"] / \
        costmodel.direct_cost(T, g, MR, NR, cols, kind)


def measured(g, slower):
    """Trial times of a device where every F(m,3) runs `slower` x what the model expects against direct."""
    return {"direct": 2.0, **{f"winograd-f{m}3": 2.0 * est_ratio(g, m) * slower for m in (2, 4, 6)}}


def record(g, ms, cls="conv3x3s1+relu", dtype="f32"):
    sig = (f"{cls}:N1C{g['C']}H{g['H']}W{g['W']}K{g['K']}G1k3x3s1x1d1x1p1x1o{g['Ho']}x{g['Wo']}:{dtype}:t1")
    trials = [{"variant": "direct", "algo": "gemm-s1-6x16-avx2", "ms": ms["direct"]}] + \
        [{"variant": k, "algo": f"{k}-6x16-avx2", "ms": v} for k, v in ms.items() if k not in ("direct", "winograd-f63")] + \
        [{"variant": "winograd-f63", "algo": "winograd-f63-6x16-avx2", "rejected": "output differs"}]
    return Record("fp", sig, cls, "direct", "conv=direct", "gemm-s1-6x16-avx2", ms["direct"], "winograd-f43",
                  ms["winograd-f43"], "measured", "m.onnx", "local", "2026-11-24", False, {}, trials)


def test_fit_recovers_the_devices_factor():
    layers = [geom(128, 128, 28), geom(64, 96, 56), geom(256, 256, 14)]
    fit = costmodel.fit_conv3x3(T, [(g, measured(g, 2.5)) for g in layers])
    assert fit == pytest.approx({"winograd-f23": 2.5, "winograd-f43": 2.5, "winograd-f63": 2.5}, rel=1e-3)
    assert costmodel.fit_conv3x3(T, [(layers[0], {"winograd-f43": 1.0})]) == {}  # no direct time: nothing learned
    assert costmodel.fit_conv3x3(T, [(layers[0], measured(layers[0], 100.0))])["winograd-f43"] == 4.0  # clamped


def test_learned_factors_change_untuned_picks():
    g, big = geom(32, 32, 28), geom(128, 128, 28)  # few channels: a modest predicted gain; many: a large one
    assert choose(g).algo.startswith("winograd") and choose(big).algo.startswith("winograd")
    other = geom(96, 160, 28)  # the records come from other layers of the same device
    slow = dict(costmodel.fit_conv3x3(T, [(other, measured(other, 3.5))]))
    with using(CompileOptions(learned=tuple(slow.items()))):
        c = choose(g)
        assert c.algo == "direct" and "fitted to this device's tuned layers" in c.why
        assert choose(big).algo.startswith("winograd")  # still far ahead after the correction
    same = dict(costmodel.fit_conv3x3(T, [(other, measured(other, 1.0))]))
    assert same == pytest.approx({"winograd-f23": 1.0, "winograd-f43": 1.0, "winograd-f63": 1.0})
    with using(CompileOptions(learned=tuple(same.items()))):
        assert choose(g).algo.startswith("winograd")


def test_records_to_constants_and_options():
    g = geom(96, 160, 28)
    recs = [record(g, measured(g, 3.0)),
            record(g, measured(g, 0.2), cls="dwconv3x3s1+relu"),             # another class: ignored
            record(g, measured(g, 0.2), dtype="int8")]                        # not fp32: ignored
    got = learned_constants(recs, T)
    assert got == pytest.approx({"winograd-f23": 3.0, "winograd-f43": 3.0}, rel=1e-3)  # F(6,3) was rejected
    opts = CompileOptions(learned=tuple(got.items()))
    assert opts.cache_key()["learned"] != CompileOptions().cache_key()["learned"]
    assert CompileOptions(learned=tuple(got.items()), tuning="off").learned == ()


# -- the other hand-set thresholds: sparse break-even, depthwise plane/cb, GSPC family per Kpg ---------------

def trial(variant, algo, ms):
    return {"variant": variant, "algo": algo, "ms": ms}


def rec(sig, cls, trials, fp="fp"):
    best = min((t for t in trials if "ms" in t), key=lambda t: t["ms"])
    return Record(fp, sig, cls, best["variant"], "", best["algo"], best["ms"], trials[0]["algo"], trials[0]["ms"],
                  "measured", "m.onnx", "local", "2026-11-24", False, {}, trials)


SPARSE_SIG = "conv1x1s1:N1C128H28W28K128G1k1x1s1x1d1x1p0x0o28x28:f32:t1:z0.60"
DW_SIG = "dwconv3x3s1+relu:N1C64H8W8K64G64k3x3s1x1d1x1p1x1o8x8:f32:t1"
GSPC_SIG = "gconv3x3s1+relu:N1C64H20W20K64G16k3x3s1x1d1x1p1x1o20x20:f32:t1"  # 4 channels per group


def records(fp="fp"):
    """A device where sparse 1x1 blocks won at 60% zeros, the plane depthwise kernel won on an 8x8 map and the
    T_O tiles beat the along-ow and multi-group kernels at 4 channels per group; cb / mg were the rules' picks."""
    return [rec(SPARSE_SIG, "conv1x1s1", [trial("default", "gemm-1x1-6x16-avx2", 1.0),
                                         trial("sparse-1x1", "spmm-1x1", 0.8),
                                         trial("par-serial", "spmm-1x1/serial", 0.1)], fp),  # partitioning: ignored
            rec(DW_SIG, "dwconv3x3s1+relu", [trial("default", "dwconv-c8-avx2", 0.7),
                                             trial("dw-plane", "dwconv-3x3-avx2", 0.5)], fp),
            rec(GSPC_SIG, "gconv3x3s1+relu", [trial("default", "gspc-ow-avx2", 1.5),
                                              trial("gspc-tile", "gspc-o4-avx2", 1.0),
                                              trial("gspc-mg", "gspc-g2x4-avx2", 1.4),
                                              trial("winograd-f43", "winograd-f43-6x16-avx2", 0.9)], fp)]


def test_threshold_fit():
    above = lambda x, t: x > t  # noqa: E731  the rule picks the first choice above t
    assert costmodel.fit_threshold([], 0.7, above, 0.025) is None
    assert costmodel.fit_threshold([(0.8, True), (0.5, False)], 0.7, above, 0.025) is None  # records agree
    assert costmodel.fit_threshold([(0.6, True)], 0.7, above, 0.025) == pytest.approx(0.575)
    assert costmodel.fit_threshold([(0.75, False), (0.9, True)], 0.7, above, 0.025) == pytest.approx(0.75)
    # contradicting records: the threshold with the fewest contradictions, the default when it is among them
    assert costmodel.fit_threshold([(0.6, True), (0.65, False)], 0.7, above, 0.025) is None


def test_records_to_sparse_dw_and_gspc_constants():
    got = learned_constants(records(), T)
    assert "winograd-f43" in got  # the grouped 3x3 layer timed F(4,3) against its direct (GSPC) path too
    del got["winograd-f43"]
    assert got == {"sparse-be-1x1": pytest.approx(0.575), "dw-cb-px": 63.0, "gspc-mg-k4": 0.0}
    assert learned_constants([r for r in records() if r.cls.startswith("dw")], T) == {"dw-cb-px": 63.0}
    # int8 layers and other dtypes do not teach the fp32 thresholds
    q = [Record(**{**r.__dict__, "signature": r.signature.replace(":f32:", ":uint8:")}) for r in records()]
    assert learned_constants(q, T) == {}
    # stride 2: the plane kernel losing on a row that fills 7/8 of its vectors raises the fill threshold
    s2 = rec("dwconv3x3s2:N1C64H28W28K64G64k3x3s2x2d1x1p1x1o14x14:f32:t1", "dwconv3x3s2",
             [trial("default", "dwconv-3x3-avx2", 1.0), trial("dw-cb", "dwconv-c8-avx2", 0.6)])
    assert learned_constants([s2], T) == {"dw-cb-fill": pytest.approx(14 / 16 + 0.01)}


def test_learned_thresholds_change_the_picks():
    from edgec.codegen.ops.conv import gspc_tiles

    rng = np.random.default_rng(4)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    w[rng.random(w.shape) < 0.62] = 0  # unstructured: 1x1 blocks 62% zero, 4-blocks ~15%
    learned = tuple(learned_constants(records(), T).items())
    assert costmodel.choose_sparse(T, w, 100).algo == "dense"  # AVX2's hand-set 1x1 break-even is 0.70
    with using(CompileOptions(learned=learned)):
        c = costmodel.choose_sparse(T, w, 100)
        assert c.algo == "sparse-1x1" and "fitted to this device" in c.why
    g = dict(N=1, C=32, H=12, W=12, K=32, G=8, KH=3, KW=3, SH=1, SW=1, DH=1, DW=1, PT=1, PL=1, Ho=12, Wo=12)
    with using(CompileOptions()):
        assert gspc_tiles(T, g)[0].op == "gspc_mg"
    with using(CompileOptions(learned=learned)):
        assert gspc_tiles(T, g)[0].op == "gspc"  # T_O tiles: this device's verdict at 4 channels per group
    with using(CompileOptions(learned=learned, tuning="off")):
        assert gspc_tiles(T, g)[0].op == "gspc_mg"


def _three_layers(path):
    """A pruned 1x1 conv (62% zeros, unstructured), a depthwise 3x3 on 12x12 and a grouped 3x3 conv with 4
    channels per group: shapes no record names, so only learned constants can change their picks."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(9)
    w0 = rng.standard_normal((64, 64, 1, 1)).astype(np.float32)
    w0[rng.random(w0.shape) < 0.62] = 0
    ws = {"w0": w0, "w1": rng.standard_normal((64, 1, 3, 3)).astype(np.float32),
          "w2": rng.standard_normal((64, 4, 3, 3)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], name="pruned"),
             helper.make_node("Conv", ["a", "w1"], ["b"], name="dw", group=64, pads=[1] * 4),
             helper.make_node("Conv", ["b", "w2"], ["y"], name="grouped", group=16, pads=[1] * 4)]
    g = helper.make_graph(nodes, "three", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 12, 12])],
                          [numpy_helper.from_array(v, k) for k, v in ws.items()])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_compile_picks_with_the_devices_learned_thresholds(edgec_env, tmp_path, monkeypatch):
    """Records in a real tuning database, for this machine (the `local` device) and for another fingerprint:
    `edgec compile` fits the thresholds to this machine's records only, picks with them, --explain says so,
    --no-tuning does not."""
    import dataclasses
    import json

    from devkit import run_cli
    from edgec.devices import tuningdb
    from edgec.devices.deploy import choose_mode
    from edgec.devices.inventory import device_from_profile
    from edgec.devices.transport import open_transport

    # a database of its own (codegen only here): the session's holds other tests' real records of this machine,
    # whose Winograd trials fit constants too and move the grouped layer's pick
    monkeypatch.setenv("EDGEC_CACHE_DIR", str(tmp_path / "cache"))
    model = _three_layers(tmp_path / "three.onnx")
    dev = dataclasses.replace(device_from_profile("local", "local"), target="x86_64-avx2")
    with open_transport(dev) as t:
        fp = tuningdb.fingerprint(tuningdb.device_facts(dev, t, choose_mode(dev, "auto"), 1))
    # another device where dense won at 65% zeros: with this machine's record no break-even fits both
    other = rec(SPARSE_SIG.replace("C128", "C96").replace(":z0.60", ":z0.65"), "conv1x1s1",
                [trial("default", "gemm-1x1-6x16-avx2", 1.0), trial("sparse-1x1", "spmm-1x1", 1.3)], fp="other")
    with tuningdb.TuningDB() as db:
        for r in records(fp) + [other]:
            db.put(r)

    monkeypatch.setenv("EDGEC_LAYOUT", "nchw")  # the thresholds under test choose among the NCHW kernels

    def algos(*flags):
        rc, out, err = run_cli("compile", str(model), "-o", str(tmp_path / "p"), "--target", "x86_64-avx2",
                               "--json", *flags)
        assert rc == 0, err
        return {l["name"]: (l["algo"], l.get("details", {}).get("learned", "")) for l in json.loads(out)["layers"]}

    untuned = algos("--no-tuning")
    assert [a for a, _ in untuned.values()] == ["gemm-6x16-avx2", "dwconv-c8-avx2", "gspc-g2x4-avx2"]  # 1x1: packed
    assert not any(n for _, n in untuned.values())
    tuned = algos()
    # grouped: the records timed F(4,3) fastest on their 4-channels-per-group layer (0.9 against the tiles' 1.0)
    assert [a for a, _ in tuned.values()] == ["spmm-1x1", "dwconv-3x3-avx2", "winograd-f43-6x16-avx2"]
    assert [n for _, n in tuned.values()] == ["sparse-be-1x1 0.575 (default 0.7)", "dw-cb-px 63 (default 256)",
                                              "gspc-mg-k4 0 (default 1)"]
    rc, out, err = run_cli("compile", str(model), "-o", str(tmp_path / "e"), "--target", "x86_64-avx2", "--explain")
    assert rc == 0, err
    assert all(w in out for w in ("learned:", "sparse-be-1x1", "dw-cb-px", "gspc-mg-k4")), out  # the table wraps


def test_int8_path_is_learned():
    """int8 depthwise and grouped layers that timed their own kernel against the packed GEMM: where the GEMM won
    (on a key's layers overall), untuned layers of that window / channels per group take the GEMM."""
    dw = "q8dwconv3x3s1:N1C32H6W24K32G32k3x3s1x1d1x1p1x1o6x24:uint8:t1"
    dw2 = "q8dwconv3x3s1:N1C64H12W48K64G64k3x3s1x1d1x1p1x1o12x48:uint8:t1"
    dw5 = "q8dwconv5x5s1:N1C32H6W24K32G32k5x5s1x1d2x2p4x4o6x24:uint8:t1"
    gs = "q8gconv3x3s1:N1C64H20W20K64G16k3x3s1x1d1x1p1x1o20x20:uint8:t1"
    recs = [rec(dw, "q8dwconv3x3s1", [trial("default", "q8-dwconv", 1.0), trial("q8-gemm", "q8-gemm", 0.6)]),
            rec(dw2, "q8dwconv3x3s1", [trial("default", "q8-dwconv", 1.0), trial("q8-gemm", "q8-gemm", 1.2),
                                       trial("par-serial", "q8-gemm/serial", 0.1)]),  # partitioning: ignored
            rec(dw5, "q8dwconv5x5s1", [trial("default", "q8-dwconv", 0.5), trial("q8-gemm", "q8-gemm", 0.9)]),
            rec(gs, "q8gconv3x3s1", [trial("default", "q8-gspc", 1.0), trial("q8-gemm", "q8-gemm", 0.7)])]
    got = learned_constants(recs, T)
    # 3x3: 0.6 and 1.2 against 1.0 -> geometric mean 0.85 < 1: the GEMM wins; 5x5 keeps the rule's kernel
    assert got == {"q8-dwconv-k3x3": 0.0, "q8-gspc-k4": 0.0}
    assert costmodel.fit_q8conv(T, [("dw", "3x3", {"own": 1.0})]) == {}  # no GEMM time: nothing learned
    learned = tuple(got.items())
    with using(CompileOptions()):
        assert costmodel.choose_int8_conv(T, 32, 32, 32, (3, 3), 144).algo == "q8-dwconv"
        assert costmodel.choose_int8_conv(T, 64, 64, 16, (3, 3), 400, gspc=True).algo == "q8-gspc"
    with using(CompileOptions(learned=learned)):
        c = costmodel.choose_int8_conv(T, 48, 48, 48, (3, 3), 900)
        assert c.algo == "q8-gemm" and "fitted to this device" in c.why
        assert costmodel.choose_int8_conv(T, 48, 48, 48, (5, 5), 900).algo == "q8-dwconv"
        assert costmodel.choose_int8_conv(T, 64, 64, 16, (3, 3), 400, gspc=True).algo == "q8-gemm"
        assert costmodel.choose_int8_conv(T, 64, 64, 8, (3, 3), 400, gspc=True).algo == "q8-gspc"  # 8 per group
    with using(CompileOptions(learned=learned, tuning="off")):
        assert costmodel.choose_int8_conv(T, 48, 48, 48, (3, 3), 900).algo == "q8-dwconv"


def test_transfer_tries_the_source_layers_near_ties():
    """A transfer tries the source's winner (or the variants giving the kept pick's code) and the variants timed
    within NEAR_TIE of the fastest there, each with the kernel it gave on the source; a slower one stays out."""
    from edgec.devices.tuningdb import NEAR_TIE

    trials = [{"variant": "default", "algo": "winograd-f43-6x16-avx2", "ms": 1.00},
              {"variant": "conv=winograd-f43", "algo": "winograd-f43-6x16-avx2", "rejected": "same code as default"},
              {"variant": "gspc-tile", "algo": "gspc-o8-avx2/serial", "ms": 1.00 * NEAR_TIE * 0.99},
              {"variant": "conv=direct", "algo": "gemm-s1-6x16-avx2", "ms": 1.00 * NEAR_TIE * 1.05}]
    kept = rec(GSPC_SIG, "gconv3x3s1+relu", trials)  # the cost model's pick measured fastest
    assert kept.variant == "default" and kept.transferable() == ["conv=winograd-f43", "gspc-tile"]
    assert kept.kernel_of("conv=winograd-f43") == "winograd-f43-6x16-avx2"
    assert kept.kernel_of("gspc-tile") == "gspc-o8-avx2"
    trials[2]["ms"] = 0.9  # now the GSPC tile wins: the kept pick is its near tie (a transfer builds it anyway)
    won = rec(GSPC_SIG, "gconv3x3s1+relu", trials)
    assert won.transferable() == ["gspc-tile"] and won.kernel_of("gspc-tile") == "gspc-o8-avx2"


def test_transfer_leaves_out_blockings_that_could_not_be_recorded():
    """A blocking is recorded only at BLK_MIN_GAIN over the cost model's pick: as a near tie of a source layer it
    transfers only when it came within NEAR_TIE of that there (ResNet-50's blockings at 0.95-1.09x made a transfer
    to SqueezeNet build 16 layers' candidates for nothing it could record), and one that gave the default's code
    there (the cost model's blocking) not at all; a kernel's near tie still transfers."""
    from edgec.devices.tuningdb import BLK_MIN_GAIN, NEAR_TIE

    inplace = {"variant": "gemm1x1-inplace", "algo": "gemm-1x1-6x16-avx2", "ms": 1.01}
    kept = _blk_record(64, 64, 28, {"nc-half": 0.98, "nc-double": 1.02})
    kept.trials.append(inplace)
    assert kept.variant == "default" and kept.transferable() == ["gemm1x1-inplace"]
    near = BLK_MIN_GAIN / NEAR_TIE  # within NEAR_TIE of the gain a blocking needs
    kept = _blk_record(64, 64, 28, {"nc-half": near * 1.01, "nc-double": near * 0.99})
    kept.trials.append(inplace)
    assert kept.transferable() == ["blk-nc-half"]  # the kernel's near tie is more than 5% behind the fastest
    won = _blk_record(64, 64, 28, {"nc-double": 1.2}, variant="blk-nc-double")
    assert won.transferable() == ["blk-nc-double"]


def test_transfer_takes_the_variants_of_the_source_layer_nearest_in_shape():
    """A transfer measures the variants of the source model's layer of the class nearest in shape (channels,
    output pixels, channels per group), not the union over all its records of the class: mnv2g8's four grouped
    records between them named every variant, so a transfer to mnv2g16 built what full tuning builds."""
    from edgec.devices.tune import _nearest

    def sig(c, hw, g):
        return f"gconv3x3s1+relu:N1C{c}H{hw}W{hw}K{c}G{g}k3x3s1x1d1x1p1x1o{hw}x{hw}:f32:t1"

    trials = [{"variant": "default", "algo": "gspc-o8-avx2", "ms": 1.0}]
    src = [rec(sig(c, hw, 8), "gconv3x3s1+relu", trials) for c, hw in ((144, 56), (192, 28), (384, 14), (576, 7))]
    for c, hw in ((144, 56), (192, 28), (384, 14), (576, 7)):
        assert [r.signature for r in _nearest(sig(c, hw, 16), src)] == [sig(c, hw, 8)]
    assert [r.signature for r in _nearest(sig(160, 48, 16), src)] == [sig(144, 56, 8)]
    twins = src + [rec(sig(144, 56, 8).replace(":t1", ":t2"), "gconv3x3s1+relu", trials)]
    assert len(_nearest(sig(144, 56, 16), twins)) == 2  # equally near: both
    # no geometry on either side (a region, records made elsewhere): every record of the class
    assert _nearest("region[dwconv3x3s1]:abc:t1", src) == src
    other = src + [rec("gconv3x3s1+relu:src-x", "gconv3x3s1+relu", trials)]
    assert _nearest(sig(144, 56, 16), other) == other


def _gemm_model(path, c=24, hw=45):
    """A 3x3 stride-2 conv (im2col GEMM) and a 1x1 conv (packed GEMM), each + ReLU."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    inits, nodes, cur = [], [], "x"
    for i, (ci, co, k, s) in enumerate(((c, 2 * c, 3, 2), (2 * c, 2 * c, 1, 1))):
        inits.append(numpy_helper.from_array((rng.standard_normal((co, ci, k, k)) * 0.1).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("Conv", [cur, f"w{i}"], [f"c{i}"], pads=[k // 2] * 4, strides=[s, s]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        cur = f"r{i}"
    ho = (hw - 1) // 2 + 1
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                          [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [1, 2 * c, ho, ho])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def _blk_record(c, k, hw, speedups, variant="default"):
    """An fp32 1x1 record whose trials timed the cost model's blocking (1.0 ms) and blockings at these speedups."""
    sig = f"conv1x1s1+relu:N1C{c}H{hw}W{hw}K{k}G1k1x1s1x1d1x1p0x0o{hw}x{hw}:f32:t1"
    trials = [{"variant": "default", "algo": "gemm-6x16-avx2", "ms": 1.0}] + \
        [{"variant": f"blk-{m}", "algo": f"gemm-6x16-avx2/{m}", "ms": 1.0 / x} for m, x in speedups.items()] + \
        [{"variant": "blk-kc-whole", "algo": "gemm-6x16-avx2", "rejected": "same code as default"}]
    return Record("fp", sig, "conv1x1s1+relu", variant, "", "gemm-6x16-avx2", 1.0, "gemm-6x16-avx2", 1.0,
                  "measured", "m.onnx", "local", "2026-11-25", False, {}, trials)


def test_a_blocking_most_layers_preferred_is_learned_for_untuned_layers(tmp_path):
    """Records where nc-double won on 3 of 4 layers that timed it fit blk-nc = 2 (two of three layers, or wins
    under BLK_GAIN, fit nothing); an untuned GEMM layer then compiles with the column block doubled and says it
    learned so, a layer with a record of its own keeps it, and tuning off ignores the constant."""
    from edgec.codegen.options import CompileOptions
    from edgec.codegen.project import compile_model

    recs = [_blk_record(64, 64, 28, {"nc-half": 0.9, "nc-double": 1.2}, "blk-nc-double"),
            _blk_record(128, 64, 28, {"nc-half": 0.95, "nc-double": 1.1}, "blk-nc-double"),
            _blk_record(64, 128, 14, {"nc-half": 0.9, "nc-double": 1.15}, "blk-nc-double"),
            _blk_record(256, 64, 14, {"nc-half": 1.1, "nc-double": 1.0})]
    assert learned_constants(recs, T) == {"blk-nc": 2.0}
    assert learned_constants(recs[:2], T) == {}  # too few layers
    assert costmodel.fit_blk([{"nc-double": 1.02}] * 4) == {}  # within BLK_GAIN: no preference
    assert costmodel.fit_blk([{"kc-whole": 1.1, "nc-half": 0.9}] * 3) == {"blk-kc": 0.0}
    path = _gemm_model(tmp_path / "g.onnx")
    opts = CompileOptions(target="x86_64-avx2", layout="nchw", gspc="gemm")  # strided 3x3: the GEMM too
    base = {l["details"]["signature"]: l for l in compile_model(path, tmp_path / "b", options=opts).layers
            if "signature" in l["details"]}
    learned = opts.with_(learned=(("blk-nc", 2.0),))
    got = {l["details"]["signature"]: l for l in compile_model(path, tmp_path / "l", options=learned).layers
           if "signature" in l["details"]}
    for s, l in got.items():
        assert l["algo"] == base[s]["algo"] + "/nc-double" and l["details"]["nc"] > base[s]["details"]["nc"], l
        assert "blk-nc 2 (default 1)" in l["details"]["learned"]
    s0 = sorted(got)[0]
    rec = (s0, "blk=nc-half", "tuned on local")
    own = {l["details"]["signature"]: l for l in compile_model(path, tmp_path / "r", options=learned.with_(
        tuned=(rec,))).layers if "signature" in l["details"]}
    assert own[s0]["algo"].endswith("/nc-half") and all(own[s]["algo"].endswith("/nc-double") for s in own if s != s0)
    off = {l["details"]["signature"]: l for l in compile_model(path, tmp_path / "o", options=learned.with_(
        tuning="off")).layers if "signature" in l["details"]}
    assert all(off[s]["algo"] == base[s]["algo"] for s in base)
