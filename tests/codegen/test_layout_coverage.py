"""Layer families test_layout's graphs leave out, in both layouts against onnxruntime: a chain of depthwise convs
with no 1x1 between them (3x3, 5x5 stride 2, dilated 3x3), standalone LeakyRelu / Tanh / Clip on blocked
tensors, a same-shape Mul of two blocked tensors (not the squeeze-excite scale), and a grouped 3x3 conv (no
blocked kernel) splitting a region in two; 21 channels (a partial block at 4, 8 and 16 lanes), batch 2, odd maps.
Natively in nchw / nchwc / auto, and blocked under qemu for AArch64 and armv7 NEON."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from onnx import numpy_helper

from edgec.codegen import compile_model, verify
from edgec.codegen.options import CompileOptions
from edgec.codegen.targets import get_target
from tests.codegen.test_layout import STRICT, G, _blocked, needs_vectors


def dw_chain_acts(path, c=21, n=2):
    g = G(21)
    g.inits += [numpy_helper.from_array(np.float32(v), nm) for nm, v in (("clip_lo", -0.25), ("clip_hi", 0.5))]
    t = g.conv("x", 3, c, k=3, pad=1)                                     # dense: the region's input edge
    a = g.conv(t, c, c, k=3, group=c, pad=1)
    a = g.conv(a, c, c, k=5, group=c, stride=2, pad=2, bias=False)
    a = g.conv(a, c, c, k=3, group=c, pad=2, dil=2)                       # three depthwise convs back to back
    p = g.op("LeakyRelu", [g.op("MaxPool", [a], kernel_shape=[3, 3], pads=[1, 1, 1, 1])], alpha=0.1)
    q = g.op("Tanh", [g.op("AveragePool", [a], kernel_shape=[3, 3], pads=[1, 1, 1, 1])])
    s = g.op("Add", [g.op("Mul", [p, q]), a])
    clipped = g.op("Clip", [s, "clip_lo", "clip_hi"])                     # s has three readers: not fused
    gr = g.conv(s, c, c, k=3, group=3, pad=1)                            # grouped 3x3: NCHW between two regions
    y = g.op("Sigmoid", [g.conv(g.conv(gr, c, c, k=3, group=c, stride=2, pad=1), c, 10)])
    return g.save(path, [n, 3, 13, 11], [y, s, clipped])


@needs_vectors
@pytest.mark.parametrize("mode", ["nchw", "nchwc", "auto"])
def test_dw_chain_acts_match_onnxruntime_in_both_layouts(mode, tmp_path):
    model = dw_chain_acts(tmp_path / "m.onnx")
    opts = CompileOptions(layout=mode)
    r = verify(model, out_dir=tmp_path / "p", cflags=STRICT, rtol=1e-4, atol=1e-5, options=opts)
    assert r.ok, r.outputs
    layers = compile_model(model, tmp_path / "c", options=opts).layers
    blocked = _blocked(layers)
    if mode == "nchw":
        assert not blocked
    if mode == "nchwc":
        by_op = {}
        for l in blocked:
            by_op.setdefault(l["op"], []).append(l["algo"])
        assert sum(a.startswith("dwconv-nchwc") for a in by_op["Conv"]) == 4, by_op
        for op in ("LeakyRelu", "Tanh", "Clip", "Mul", "MaxPool", "AveragePool"):
            assert op in by_op, (op, by_op)
        grouped = [l for l in layers if l["op"] == "Conv" and l["algo"].startswith("gspc")]
        assert len(grouped) == 1 and grouped[0] not in blocked
        assert sum(l["op"] == "LayoutReorder" for l in layers) >= 4  # into and out of each of the two regions


@pytest.mark.parametrize("target", ["aarch64-neon", "armv7-neon"])
def test_dw_chain_acts_blocked_under_qemu(target, tmp_path):
    t = get_target(target)
    if shutil.which(t.cc) is None or shutil.which(t.qemu[0]) is None:
        pytest.skip(f"{t.cc} or {t.qemu[0]} is not installed")
    r = verify(dw_chain_acts(tmp_path / "m.onnx"), out_dir=tmp_path / "p", cflags=STRICT, rtol=1e-4, atol=1e-5,
               options=CompileOptions(target=target, layout="nchwc"))
    assert r.ok, r.outputs
    assert "f32_nchwc_dwconv__neon" in (tmp_path / "p" / "model.c").read_text()
