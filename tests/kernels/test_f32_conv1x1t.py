"""1x1 convs on small maps as the transposed GEMM (runtime_c/f32-conv/f32-conv1x1t.h): the driver on
every fp32 GEMM microkernel against the naive reference (odd shapes, every epilogue, K blocks, items
on two thread slices; NEON under qemu), under ASan/UBSan, and the emitter's choice end to end against
onnxruntime on every target kind."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from edgec.codegen import kernels
from edgec.codegen.ops.conv import transposed_1x1
from edgec.runtime_c import root as runtime_root
from test_f32_emitters import G, run_against_ort

CDIR = Path(__file__).with_name("c")
WFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror"]
SAN = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
GEMMS = [k for k in kernels.KERNELS if k.op == "gemm"]


def _build(k: kernels.Kernel, out: Path, flags=("-O2",)) -> list[str]:
    t = kernels.build_target(k)
    cc = t.cc if t.arch not in ("x86_64", "any") else "gcc"
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed")
    if t.qemu and shutil.which(t.qemu[0]) is None:
        pytest.skip(f"{t.qemu[0]} is not installed")
    if not t.qemu and not t.runs_natively():
        pytest.skip(f"this CPU lacks {k.isa} ({', '.join(t.features)})")
    rt = runtime_root()
    cmd = [cc, *flags, *WFLAGS, *t.cflags, *(["-static"] if t.qemu else []), f"-I{rt}", f"-I{CDIR}",
           f"-DT_UK={k.name}", f"-DT_MR={k.params['mr']}", f"-DT_NR={k.params['nr']}",
           str(CDIR / "test_conv1x1t.c"), str(rt / "ec_threadpool.c"), str(rt / k.file), "-o", str(out), "-lm",
           "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, " ".join(cmd) + "\n" + r.stderr
    return [*(t.qemu or []), str(out), *(["quick"] if t.qemu else [])]


@pytest.mark.parametrize("k", GEMMS, ids=lambda k: f"{k.name}-{k.arch}" if k.arch else k.name)
def test_driver_matches_reference(k, tmp_path):
    r = subprocess.run(_build(k, tmp_path / "t"), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "cases ok" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("name", ["f32_gemm_ukernel_4x4__scalar", "f32_gemm_ukernel_6x16__avx2"])
def test_driver_sanitizers(name, tmp_path):
    k = next(k for k in GEMMS if k.name == name)
    r = subprocess.run(_build(k, tmp_path / "t", SAN), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "cases ok" in r.stdout, r.stdout + r.stderr


def test_choice_follows_tile_padding():
    g = dict(N=1, C=512, H=7, W=7, K=2048, Ho=7, Wo=7, G=1, KH=1, KW=1, SH=1, SW=1, DH=1, DW=1, PT=0, PL=0)
    assert transposed_1x1(g, 6, 16)                                   # 49 of 64 columns vs 54 rows
    assert not transposed_1x1({**g, "H": 28, "W": 28, "Ho": 28, "Wo": 28}, 6, 16)  # 784 pixels fill tiles
    assert not transposed_1x1({**g, "K": 20}, 6, 16)                  # 20 channels fill 16-wide tiles worse
    assert not transposed_1x1({**g, "SH": 2, "SW": 2, "Ho": 4, "Wo": 4}, 6, 16)    # strided: not in place
    assert not transposed_1x1({**g, "G": 2}, 6, 16)


# (N, C, H, W, K) of the model's convs, in graph order
SMALL_MAP_CONVS = [(2, 48, 7, 7, 48), (2, 48, 7, 7, 80), (2, 48, 7, 7, 37), (1, 300, 7, 7, 64)]


def small_map_model(path):
    g = G()
    x = g.input("x", [2, 48, 7, 7])
    g.out(g.node("Relu", [g.node("Add", [g.conv(x, 48, 48, 1), x])]))          # residual after the conv
    g.out(g.node("HardSwish", [g.conv(x, 48, 80, 1)]))
    g.out(g.conv(x, 48, 37, 1, bias=False))                                    # K not a multiple of NR
    y = g.input("y", [1, 300, 7, 7])                                           # C past one K block
    g.out(g.node("Sigmoid", [g.conv(y, 300, 64, 1)]))
    return g.save(path)


@pytest.mark.parametrize("target,threads", [("native", 1), ("native", 2), ("generic", 1), ("aarch64-neon", 1)])
def test_emitter_matches_onnxruntime(tmp_path, target, threads):
    b = run_against_ort(small_map_model(tmp_path / "m.onnx"), target, tmp_path, threads=threads)
    algos = [l["algo"] for l in b.layers if l["op"] == "Conv"]
    k = kernels.gemm_kernel(b.target)
    want = [transposed_1x1(dict(N=n, C=c, H=h, W=w, K=kk, Ho=h, Wo=w, G=1, KH=1, KW=1, SH=1, SW=1, DH=1, DW=1,
                                PT=0, PL=0), k.params["mr"], k.params["nr"]) for n, c, h, w, kk in SMALL_MAP_CONVS]
    assert ["-1x1t-" in a for a in algos] == want, algos
    if b.target.isa in ("avx2", "avx512"):  # 16/32-wide tiles on a 7x7 map: transposed unless K pads badly
        assert want == [True, True, False, True], algos
