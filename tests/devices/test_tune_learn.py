"""The cost model learns from a device's tuning records: the Winograd/direct trade-off of measured 3x3 layers
is fitted per device (costmodel.fit_conv3x3, tune.learned_constants) and changes the picks of its untuned
layers; without records, or with tuning off, nothing changes."""

from __future__ import annotations

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
    return costmodel.winograd_estimate(T, g, m, MR, NR)["cost"] / \
        costmodel.direct_estimate(T, g, MR, NR, cols, kind)["cost"]


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
    slow = dict(costmodel.fit_conv3x3(T, [(other, measured(other, 2.0))]))
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
