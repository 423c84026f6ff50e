"""Dense convs on small maps as the transposed GEMM (runtime_c/f32-conv/f32-convt.h): the driver on
every fp32 GEMM microkernel against the naive reference (odd shapes, windows, strides, dilations,
asymmetric pads, every epilogue, K blocks, items on two thread slices; NEON under qemu), under
ASan/UBSan, and the emitter's choice end to end against onnxruntime on every target kind."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from edgec.codegen import kernels
from edgec.codegen.ops.conv import transposed
from test_f32_emitters import G, run_against_ort
from test_f32_kernels import SAN, _build

GEMMS = [k for k in kernels.KERNELS if k.op == "gemm"]


def _run(k: kernels.Kernel, out: Path, flags=(), opt="-O2") -> subprocess.CompletedProcess:
    """test_convt.c on GEMM microkernel k (NEON under qemu on the quick case set)."""
    exe, qemu = _build(k, out, flags, opt, test=("test_convt.c", {"T_UK": k.name, "T_MR": k.params["mr"],
                                                                "T_NR": k.params["nr"]}, []))
    return subprocess.run([*qemu, str(exe), *(["quick"] if qemu else [])], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("k", GEMMS, ids=lambda k: f"{k.name}-{k.arch}" if k.arch else k.name)
def test_driver_matches_reference(k, tmp_path):
    r = _run(k, tmp_path / "t")
    assert r.returncode == 0 and "cases ok" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("name", ["f32_gemm_ukernel_4x4__scalar", "f32_gemm_ukernel_6x16__avx2"])
def test_driver_sanitizers(name, tmp_path):
    k = next(k for k in GEMMS if k.name == name)
    r = _run(k, tmp_path / "t", SAN, opt="-O1")
    assert r.returncode == 0 and "cases ok" in r.stdout, r.stdout + r.stderr


def geom(n, c, hw, k, ks=1, s=1, p=0, g=1) -> dict:
    ho = (hw + 2 * p - ks) // s + 1
    return dict(N=n, C=c, H=hw, W=hw, K=k, Ho=ho, Wo=ho, G=g, KH=ks, KW=ks, SH=s, SW=s, DH=1, DW=1, PT=p, PL=p)


def test_choice_follows_tile_padding():
    assert transposed(geom(1, 512, 7, 2048), 6, 16, 16)                  # 49 of 64 columns vs 54 rows
    assert transposed(geom(1, 512, 14, 512, 3, 2, 1), 6, 16, 16)         # strided 3x3 into a 7x7 map
    assert transposed(geom(1, 512, 7, 512, 3, 1, 1), 6, 16, 16)          # indirect: 61 of 64 columns for 49
    assert not transposed(geom(1, 1024, 14, 256), 6, 16, 16)            # 14x14: 208 columns for 196
    assert not transposed(geom(1, 512, 28, 2048), 6, 16, 16)             # 784 pixels fill the tiles
    assert not transposed(geom(1, 512, 28, 128, 3, 1, 1), 6, 16, 16)
    assert not transposed(geom(1, 512, 7, 20), 6, 16, 16)                # 20 channels fill 16-wide tiles worse
    assert not transposed(geom(1, 64, 55, 16), 6, 16, 16)                # SqueezeNet's squeeze: row copies are cheap
    assert not transposed(geom(1, 256, 27, 32), 6, 16, 16)
    assert not transposed(geom(1, 512, 7, 512, 3, 1, 1, g=2), 6, 16, 16)  # grouped: GSPC's


# (N, C, H = W, K, kernel, stride, pad) of the model's convs, in graph order
SMALL_MAP_CONVS = [(2, 48, 7, 48, 1, 1, 0), (2, 48, 7, 80, 1, 1, 0), (2, 48, 7, 37, 1, 1, 0),
                   (1, 300, 7, 64, 1, 1, 0), (2, 48, 7, 48, 3, 1, 1), (1, 24, 14, 64, 3, 2, 1),
                   (1, 24, 28, 32, 3, 1, 1)]


def small_map_model(path):
    g = G()
    x = g.input("x", [2, 48, 7, 7])
    g.out(g.node("Relu", [g.node("Add", [g.conv(x, 48, 48, 1), x])]))          # residual after the conv
    g.out(g.node("HardSwish", [g.conv(x, 48, 80, 1)]))
    g.out(g.conv(x, 48, 37, 1, bias=False))                                    # K not a multiple of NR
    y = g.input("y", [1, 300, 7, 7])                                           # C past one K block
    g.out(g.node("Sigmoid", [g.conv(y, 300, 64, 1)]))
    g.out(g.node("Relu", [g.conv(x, 48, 48, 3, pads=[1, 1, 1, 1])]))          # 3x3 stride 1
    z = g.input("z", [1, 24, 14, 14])
    g.out(g.node("Clip", [g.conv(z, 24, 64, 3, strides=[2, 2], pads=[1, 1, 1, 1]), g.const(np.array(0.0)),
                          g.const(np.array(6.0))]))
    u = g.input("u", [1, 24, 28, 28])
    g.out(g.conv(u, 24, 32, 3, pads=[1, 1, 1, 1]))                            # a map that fills the tiles
    return g.save(path)


@pytest.mark.parametrize("target,threads", [("native", 1), ("native", 2), ("generic", 1), ("aarch64-neon", 1)])
def test_emitter_matches_onnxruntime(tmp_path, monkeypatch, target, threads):
    monkeypatch.setenv("EDGEC_CONV", "direct")  # 3x3 stride 1 would otherwise be Winograd's to take
    monkeypatch.setenv("EDGEC_GSPC", "gemm")  # the strided 3x3 on the GEMM, not the row kernel
    b = run_against_ort(small_map_model(tmp_path / "m.onnx"), target, tmp_path, threads=threads)
    algos = [l["algo"] for l in b.layers if l["op"] == "Conv"]
    k, ik = kernels.gemm_kernel(b.target), kernels.igemm_kernel(b.target)
    want = [transposed(geom(n, c, hw, kk, ks, s, p), k.params["mr"], k.params["nr"], ik.params["nr"])
            for n, c, hw, kk, ks, s, p in SMALL_MAP_CONVS]
    assert [a.startswith("gemm-t-") for a in algos] == want, algos
    if b.target.isa == "avx2":  # 16-wide tiles on 7x7 maps: transposed unless K pads badly
        assert want == [True, True, False, True, False, True, False], algos
    elif b.target.isa == "avx512":  # 12x32 tiles: the channels pad the 32-wide columns more, fewer layers flip
        assert want == [False, False, False, True, False, True, False], algos
