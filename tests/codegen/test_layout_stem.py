"""A few-channel stem (dense conv, at most 4 input channels, on the direct kernel) writing a channel-blocked region:
its input stays NCHW, its output is blocked, so no reorder follows it (codegen/layout.py kind "stem"). Stem ->
MaxPool -> depthwise / 1x1 chain with 24 and 20 output channels (20: a partial block on 8 lanes and a partial
weight block of 16), one model also returning the stem's output (a reorder out of the region); against
onnxruntime in nchw / nchwc / auto natively, blocked for AArch64 and armv7 NEON under qemu, and with
EDGEC_SMALLC=gemm (the GEMM path keeps its NCHW output and the reorder)."""

from __future__ import annotations

import shutil

import pytest

from edgec.codegen import compile_model, verify
from edgec.codegen.options import CompileOptions
from edgec.codegen.targets import get_target
from tests.codegen.test_layout import LANES, STRICT, G, needs_vectors


def stem_chain(path, k=24, stem_out=False, n=1, hw=(66, 58)):
    g = G(8)
    s = g.op("Relu", [g.conv("x", 3, k, k=3, stride=2, pad=1)])          # the stem
    p = g.op("MaxPool", [s], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    a = g.op("Relu", [g.conv(g.conv(p, k, k, k=3, group=k, pad=1), k, 32)])
    b = g.conv(g.conv(a, 32, 32, k=3, group=32, stride=2, pad=1), 32, 40)
    y = g.op("Relu", [b])
    return g.save(path, [n, 3, *hw], [y, s] if stem_out else [y])


def _check(model, tmp_path, opts):
    r = verify(model, out_dir=tmp_path / "p", cflags=STRICT, rtol=1e-4, atol=1e-5, options=opts)
    assert r.ok, r.outputs
    return compile_model(model, tmp_path / "c", options=opts).layers


@needs_vectors
@pytest.mark.parametrize("k", [24, 20])
@pytest.mark.parametrize("mode", ["nchw", "nchwc", "auto"])
def test_stem_writes_blocked_region(k, mode, tmp_path):
    layers = _check(stem_chain(tmp_path / "m.onnx", k), tmp_path, CompileOptions(layout=mode))
    convs = [l for l in layers if l["op"] == "Conv"]
    stem, reorders = convs[0], [l for l in layers if l["op"] == "LayoutReorder"]
    assert stem["algo"].startswith("direct-smallc-"), stem
    if mode == "nchw":
        assert "nchw" not in stem["algo"].split("smallc-")[1] and not reorders
        return
    # blocked (auto too: the region holds depthwise convs): the stem writes it, one reorder out after the last conv
    assert f"-nchw{LANES}c-" in stem["algo"], stem
    assert stem["details"]["layout"] == f"nchw -> nchw{LANES}c"
    assert len(reorders) == 1 and reorders[0]["details"]["layout"] == f"nchw{LANES}c -> nchw", reorders
    assert layers.index(reorders[0]) > layers.index(convs[-1])


@needs_vectors
def test_stem_output_also_returned(tmp_path):
    layers = _check(stem_chain(tmp_path / "m.onnx", 20, stem_out=True, n=2, hw=(37, 45)), tmp_path,
                    CompileOptions(layout="nchwc"))
    assert f"-nchw{LANES}c-" in layers[0]["algo"], layers[0]
    reorders = [l for l in layers if l["op"] == "LayoutReorder"]
    assert len(reorders) == 2 and all(r["details"]["layout"].endswith("-> nchw") for r in reorders), reorders


@needs_vectors
def test_gemm_stem_keeps_nchw_output(tmp_path):
    layers = _check(stem_chain(tmp_path / "m.onnx", 20), tmp_path, CompileOptions(layout="nchwc", smallc="gemm"))
    stem = layers[0]
    assert "smallc" not in stem["algo"] and stem["details"].get("layout", "nchw") == "nchw", stem
    reorders = [l["details"]["layout"] for l in layers if l["op"] == "LayoutReorder"]
    assert reorders == [f"nchw -> nchw{LANES}c", f"nchw{LANES}c -> nchw"], reorders


@pytest.mark.parametrize("target", ["aarch64-neon", "armv7-neon"])
@pytest.mark.parametrize("k", [24, 20])
def test_stem_writes_blocked_region_under_qemu(target, k, tmp_path):
    t = get_target(target)
    if shutil.which(t.cc) is None or shutil.which(t.qemu[0]) is None:
        pytest.skip(f"{t.cc} or {t.qemu[0]} is not installed")
    layers = _check(stem_chain(tmp_path / "m.onnx", k, n=2, hw=(37, 45)), tmp_path,
                    CompileOptions(target=target, layout="nchwc"))
    assert "-nchw4c-neon" in layers[0]["algo"], layers[0]
    assert sum(l["op"] == "LayoutReorder" for l in layers) == 1
    assert "f32_conv_smallc__neon" in (tmp_path / "p" / "model.c").read_text()
