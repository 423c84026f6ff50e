"""q8 GEMM variants bit-exact against the scalar reference (odd shapes, extreme values), natively
and under qemu (cortex-a72 for ARMv8.0 NEON, max for dotprod); the dotprod build must SIGILL on A72."""

from __future__ import annotations

import re

import numpy as np
import pytest

from qkit import A72, ISAS, SANITIZE, build, require, run

from edgec.codegen.ops.qpack import Q8_GEMV

VARIANTS = {  # isa -> (function, file, reads X signed)
    "scalar": ("q8_gemm_4x8__scalar", "q8-gemm/q8-gemm-4x8-scalar.c", 0),
    "avx2": ("q8_gemm_4x8__avx2", "q8-gemm/q8-gemm-4x8-avx2.c", 0),
    "avx512": ("q8_gemm_4x16__avx512bw", "q8-gemm/q8-gemm-4x16-avx512bw.c", 0),
    "avx512vnni": ("q8_gemm_8x32__avx512vnni", "q8-gemm/q8-gemm-8x32-avx512vnni.c", 0),
    "avxvnni": ("q8_gemm_4x16__avxvnni", "q8-gemm/q8-gemm-4x16-avxvnni.c", 0),
    "amx": ("q8_gemm_32x32__amx", "q8-gemm/q8-gemm-32x32-amx.c", 0),
    "neon": ("q8_gemm_4x8__neon", "q8-gemm/q8-gemm-4x8-neon.c", 1),
    "neon-v82": ("q8_gemm_4x8__neondot", "q8-gemm/q8-gemm-4x8-neondot.c", 1),
}


# GEMMs with a weight layout of their own: the files and defines that give it to the tests' drivers
OWN_LAYOUT = {"amx": (["q8-gemm/q8-gemm-amx-scalar.c"],
                      {"PACK_W": "q8_pack_w_amx", "PACK_W_BYTES": "q8_pack_w_amx_bytes"})}
AMX_KS = ",64,65,128,132,260"  # K4 16, 17, 32, 33, 65: whole 16-step blocks and a last block overlapping the one before
CASES = {"amx": 5040}  # 9 x 10 x 14 x 4 with AMX_KS; the others 9 x 10 x 9 x 4


def variant_build(name):
    """(files besides the driver, defines) a GEMM variant's tests need."""
    fn, src, signed = VARIANTS[name]
    files, defs = OWN_LAYOUT.get(name, ([], {}))
    return [src, *files], {"KERNEL": fn, **defs, **({"KS_EXTRA": AMX_KS} if name == "amx" else {})}


def _build(name, tmp_path, extra=(), defines=None, tag=""):
    isa = ISAS[name]
    require(isa)
    fn, src, signed = VARIANTS[name]
    files, defs = variant_build(name)
    files = ["q8_gemm_test.c", "q8-gemm/q8-pack.c", "q8-gemm/q8-gemm-4x8-scalar.c",
             *[f for f in files if f != "q8-gemm/q8-gemm-4x8-scalar.c"]]
    return isa, build(isa, tmp_path / f"t_{name}{tag}", files,
                      {**defs, "KERNEL_NAME": f'"{name}{tag}"', "X_SIGNED": str(signed), **(defines or {})}, extra)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_q8_gemm_matches_reference(name, tmp_path):
    isa, exe = _build(name, tmp_path)
    r = run(isa, exe)
    assert r.returncode == 0, r.stdout + r.stderr
    n = CASES.get(name, 3240)
    assert f"{n}/{n} cases match" in r.stdout


def test_q8_gemm_amx_layout_reference(tmp_path):
    """The AMX kernel's scalar form over q8_pack_w_amx's layout (its test reference, and what runs where the OS
    grants no tile state) against the plain scalar GEMM, any host; and the Python packing gives the C one's bytes."""
    isa = ISAS["scalar"]
    exe = build(isa, tmp_path / "amxref", ["q8_gemm_test.c", "q8-gemm/q8-pack.c", "q8-gemm/q8-gemm-4x8-scalar.c",
                                           "q8-gemm/q8-gemm-amx-scalar.c"],
                {"KERNEL": "q8_gemm_amx__scalar", "KERNEL_NAME": '"amx-scalar"', "X_SIGNED": "0",
                 "PACK_W": "q8_pack_w_amx", "PACK_W_BYTES": "q8_pack_w_amx_bytes", "KS_EXTRA": AMX_KS, "NMODES": "6"})
    r = run(isa, exe, timeout=300)
    assert r.returncode == 0 and "7560/7560 cases match" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    from edgec.codegen.ops.qpack import pack_w_amx

    # the same layout from the packing's definition: row m, k in block b at ((m/16 nb + b) 16 + m%16) kb 4 + k - 4 s
    rng = np.random.default_rng(3)
    for m, k in [(1, 1), (5, 9), (17, 64), (33, 65), (16, 132), (40, 260)]:
        w = rng.integers(-128, 128, (m, k)).astype(np.int8)
        p = pack_w_amx(w)
        k4 = (k + 3) // 4
        kb = min(16, k4)
        nb = -(-k4 // kb)
        assert p.size == -(-m // 16) * 16 * nb * kb * 4
        seen = np.zeros((m, k), np.int32)
        for r_ in range(m):
            for b in range(nb):
                s = min(b * kb, k4 - kb)
                for j in range(kb * 4):
                    kk = s * 4 + j
                    v = p[(((r_ // 16) * nb + b) * 16 + r_ % 16) * kb * 4 + j]
                    if kk < b * kb * 4 or kk >= k:
                        assert v == 0
                    else:
                        assert v == w[r_, kk]
                        seen[r_, kk] += 1
        assert (seen == 1).all()


@pytest.mark.parametrize("name,extra", [("avx512", ()), ("avx512vnni", ()), ("avx512vnni", SANITIZE), ("avxvnni", ()),
                                        ("avxvnni", SANITIZE), ("amx", ()), ("amx", SANITIZE)],
                         ids=["avx512", "avx512vnni", "avx512vnni-asan-ubsan", "avxvnni", "avxvnni-asan-ubsan", "amx",
                              "amx-asan-ubsan"])
def test_q8_gemm_fp32_requant_matches_reference(name, extra, tmp_path):
    """rq.scale set: the AVX-512, AVX-VNNI and AMX kernels' fp32 requantization bit-exact against q8_rq1 (ties
    included)."""
    isa, exe = _build(name, tmp_path, extra, {"FP32_RQ": "1"}, "-fp32")
    r = run(isa, exe)
    n = CASES.get(name, 3240)
    assert r.returncode == 0 and f"{n}/{n} cases match" in r.stdout, r.stdout + r.stderr


def test_q8_gemm_avxvnni_under_sanitizers(tmp_path):
    isa = ISAS["avxvnni"]
    require(isa)
    fn, src, signed = VARIANTS["avxvnni"]
    exe = build(isa, tmp_path / "vnni_san", ["q8_gemm_test.c", "q8-gemm/q8-pack.c", "q8-gemm/q8-gemm-4x8-scalar.c", src],
                {"KERNEL": fn, "KERNEL_NAME": '"avxvnni-san"', "X_SIGNED": str(signed), "SHIFT_MIN": "33",
                 "SHIFT_SPAN": "30"}, SANITIZE)
    r = run(isa, exe)
    assert r.returncode == 0 and "3240/3240 cases match" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]


def test_q8_gemm_avxvnni_is_vex_encoded(tmp_path):
    """Alder Lake-class cores decode AVX-VNNI's VEX vpdpbusd only; the plain mnemonic assembles to the EVEX
    (AVX512-VNNI) form, which runs on this project's AVX-512 hosts and faults there. No qemu emulates AVX-VNNI,
    so the object's encoding is checked: every vpdpbusd VEX (c4/c5), no EVEX (62) instruction at all."""
    import shutil
    import subprocess

    from qkit import WFLAGS, runtime_root

    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("not an x86-64 host: its gcc does not take the AVX-VNNI flags")
    if shutil.which("gcc") is None or shutil.which("objdump") is None:
        pytest.skip("gcc or objdump not installed")
    rt = runtime_root()
    obj = tmp_path / "k.o"
    subprocess.run(["gcc", *WFLAGS, *ISAS["avxvnni"].cflags, "-O2", f"-I{rt}", "-c",
                    str(rt / VARIANTS["avxvnni"][1]), "-o", str(obj)], check=True)
    lines = [ln.split("\t") for ln in subprocess.run(["objdump", "-d", str(obj)], capture_output=True, text=True,
                                                       check=True).stdout.splitlines()]
    insns = [(b.split(), m) for _, b, m, *_ in (ln for ln in lines if len(ln) >= 3)]
    dp = [(b, m) for b, m in insns if "vpdpbusd" in m]
    assert len(dp) >= 8 and all(b[0] in ("c4", "c5") for b, _ in dp), dp[:4]
    assert not [m for b, m in insns if b[0] == "62"]


@pytest.mark.parametrize("name", ["scalar", "avx2", "avx512"])
def test_q8_pack_x_layout(name, tmp_path):
    """The input packing's SIMD steps (SSE2 16 / 8 pixels, AVX-512BW 64) give the layout's bytes."""
    isa = ISAS[name]
    require(isa)
    r = run(isa, build(isa, tmp_path / f"pack_{name}", ["q8_pack_test.c", "q8-gemm/q8-pack.c"]))
    assert r.returncode == 0 and "156/156 cases match" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


MADDUBS = "q8-gemm/q8-gemm-4x16-avx2-maddubs.c"
SAT_REF = "q8-gemm/q8-gemm-4x8-scalar-maddubs.c"


def _maddubs_run(tmp_path, tag, kernel, ref, wmin, wmax, isa_name="avx2", extra=(), defines=None):
    isa = ISAS[isa_name]
    require(isa)
    files = ["q8_gemm_test.c", "q8-gemm/q8-pack.c", "q8-gemm/q8-gemm-4x8-scalar.c", SAT_REF]
    if kernel == "q8_gemm_4x16__avx2_maddubs":
        files.append(MADDUBS)
    exe = build(isa, tmp_path / tag, files, {"KERNEL": kernel, "REF": ref, "KERNEL_NAME": f'"{tag}"', "X_SIGNED": "0",
                                             "WMIN": f"({wmin})", "WMAX": str(wmax), "NMODES": "6", **(defines or {})},
                 extra)
    r = run(isa, exe, timeout=300)
    m = re.search(r"(\d+)/(\d+) cases match", r.stdout)
    assert m, r.stdout[-2000:] + r.stderr[-2000:]
    return int(m.group(1)), int(m.group(2)), r


@pytest.mark.parametrize("wmin,wmax", [(-64, 64), (-64, 63), (-128, 127)])
def test_maddubs_kernel_is_its_saturating_model(wmin, wmax, tmp_path):
    """On any weights (8-bit ones included, where pair sums saturate) the AVX2 kernel computes exactly
    the portable model: int16-saturated k-pair sums, int32 accumulation, the shared requantization."""
    ok, n, r = _maddubs_run(tmp_path, "sat", "q8_gemm_4x16__avx2_maddubs", "q8_gemm_4x8__scalar_maddubs", wmin, wmax)
    assert ok == n == 4860, r.stdout[-2000:]


@pytest.mark.parametrize("kernel", ["q8_gemm_4x16__avx2_maddubs", "q8_gemm_4x8__scalar_maddubs"])
def test_maddubs_exact_on_7bit_and_pair_bound_weights(kernel, tmp_path):
    """7-bit weights, the extremes -64 / 64 against u8 0 / 255, and the widest non-saturating pairs
    (127, 1) / (-128, 0): bit-exact with the exact scalar GEMM on odd shapes."""
    ok, n, r = _maddubs_run(tmp_path, "exact", kernel, "q8_gemm_4x8__scalar", -64, 64)
    assert ok == n == 4860, r.stdout[-2000:]


@pytest.mark.parametrize("extra", [(), SANITIZE], ids=["plain", "asan-ubsan"])
def test_maddubs_two_step_int16_sums_at_the_bound(extra, tmp_path):
    """The kernel adds two k4 steps' pair sums in int16 before one vpmaddwd where a 4-row block's four weights
    per lane keep their positive parts <= 128 and negative parts >= -128: weights exactly at that bound and one
    past it (where the int16 sum would wrap) against u8 255, exact against the scalar GEMM, plain and under
    ASan/UBSan."""
    ok, n, r = _maddubs_run(tmp_path, "two", "q8_gemm_4x16__avx2_maddubs", "q8_gemm_4x8__scalar", -64, 64,
                            extra=extra, defines={"NMODES": "7"})
    assert r.returncode == 0 and ok == n == 5670, r.stdout[-2000:] + r.stderr[-4000:]


def test_maddubs_differs_on_8bit_weights(tmp_path):
    """Proves the bound is needed (and that the kernel really uses vpmaddubsw): full int8 weights give
    wrong outputs, which is why the emitter dispatches on the layer's weights."""
    ok, n, _ = _maddubs_run(tmp_path, "wide", "q8_gemm_4x16__avx2_maddubs", "q8_gemm_4x8__scalar", -128, 127)
    assert n == 4860 and ok < n - 100


def test_maddubs_clean_under_sanitizers(tmp_path):
    ok, n, r = _maddubs_run(tmp_path, "san", "q8_gemm_4x16__avx2_maddubs", "q8_gemm_4x8__scalar", -64, 64,
                            extra=SANITIZE)
    assert r.returncode == 0 and ok == n == 4860, r.stdout[-2000:] + r.stderr[-4000:]


def test_maddubs_block_requant_path_under_sanitizers(tmp_path):
    """Every row's shift >= 33 (up to the maximum 62): each 4-row block takes the kernel's path with its
    requantization constants set up once per block (with random shifts from 31 some blocks take the
    general path); exact against the scalar GEMM, odd shapes, under ASan/UBSan."""
    ok, n, r = _maddubs_run(tmp_path, "s33", "q8_gemm_4x16__avx2_maddubs", "q8_gemm_4x8__scalar", -64, 64,
                            extra=SANITIZE, defines={"SHIFT_MIN": "33", "SHIFT_SPAN": "30"})
    assert r.returncode == 0 and ok == n == 4860, r.stdout[-2000:] + r.stderr[-4000:]


def test_maddubs_exact_bound():
    from edgec.codegen.ops.qpack import maddubs_exact

    assert maddubs_exact(np.full((3, 5), 64, np.int8)) and maddubs_exact(np.full((3, 5), -64, np.int8))
    assert maddubs_exact(np.array([[127, 1, -128, 0, 127]], np.int8))       # 255 * 128 = 32640 both ways
    assert not maddubs_exact(np.array([[127, 2]], np.int8))                 # 255 * 129 = 32895 > 32767
    assert not maddubs_exact(np.array([[-128, -1, 0, 0]], np.int8))         # 255 * -129 < -32768
    assert not maddubs_exact(np.array([[0, 65, 64, 0]], np.int8).reshape(1, 4)[:, [1, 2, 0, 3]])  # 65 + 64
    assert maddubs_exact(np.array([[0, 65, 64, 0]], np.int8))               # pairs (0, 65), (64, 0)


def test_maddubs_dispatch_follows_weights():
    from edgec.codegen.ops.qpack import Q8_GEMM_MADDUBS, gemm_variant
    from edgec.codegen.targets import get_target

    narrow, wide = np.full((8, 9), 64, np.int8), np.full((8, 9), 127, np.int8)
    avx2 = get_target("x86_64-avx2")
    assert gemm_variant(avx2, narrow) == Q8_GEMM_MADDUBS
    assert gemm_variant(avx2, wide)[0] == "q8_gemm_4x8__avx2"
    assert gemm_variant(avx2)[0] == "q8_gemm_4x8__avx2"
    for t in ("x86_64-avx512", "aarch64-neon", "generic"):  # wider or different exact kernels there
        assert gemm_variant(get_target(t), narrow) != Q8_GEMM_MADDUBS


def test_dotprod_build_traps_on_cortex_a72(tmp_path):
    """Proves the v8.2 kernel really uses sdot and the v8.0 target never gets it."""
    isa, exe = _build("neon-v82", tmp_path)
    r = run(isa.__class__("a72", isa.cc, isa.cflags, A72), exe)
    assert r.returncode != 0


def _mlal_run(tmp_path, tag, wmin, wmax):
    isa = ISAS["neon"]
    require(isa)
    exe = build(isa, tmp_path / tag, ["q8_gemm_test.c", "q8-gemm/q8-pack.c", "q8-gemm/q8-gemm-4x8-scalar.c",
                                      "q8-gemm/q8-gemm-4x8-neon-mlal.c"],
                {"KERNEL": "q8_gemm_4x8__neon_mlal", "KERNEL_NAME": f'"{tag}"', "X_SIGNED": "1",
                 "WMIN": f"({wmin})", "WMAX": str(wmax), "NMODES": "6"})
    r = run(isa, exe, timeout=600)
    m = re.search(r"(\d+)/(\d+) cases match", r.stdout)
    assert m, r.stdout[-2000:] + r.stderr[-2000:]
    return int(m.group(1)), int(m.group(2)), r


def test_neon_mlal_exact_on_symmetric_weights_under_qemu_a72(tmp_path):
    """ARMv8.0 vmull + vmlal kernel (cortex-a72 under qemu): bit-exact with the scalar GEMM on weights in
    [-127, 127] (symmetric quantization's range; extremes against x = -128 / 127 included), odd shapes."""
    ok, n, r = _mlal_run(tmp_path, "mlal", -127, 127)
    assert ok == n == 4860, r.stdout[-2000:]


def test_neon_mlal_differs_when_weights_reach_minus_128(tmp_path):
    """-128 x -128 twice in one int16 lane wraps: why the emitter checks neon_mlal_exact."""
    ok, n, _ = _mlal_run(tmp_path, "mlal128", -128, 127)
    assert n == 4860 and ok < n


def test_neon_mlal_bound_and_dispatch():
    from edgec.codegen.ops.qpack import Q8_GEMM_NEON_MLAL, gemm_variant, neon_mlal_exact
    from edgec.codegen.targets import get_target

    assert neon_mlal_exact(np.full((3, 9), -127, np.int8)) and neon_mlal_exact(np.full((3, 4), -128, np.int8))
    assert not neon_mlal_exact(np.full((3, 5), -128, np.int8))   # k = 0 and k = 4 share a lane: 2 x 16384
    w = np.zeros((2, 8), np.int8)
    w[1, 2], w[1, 6] = -128, -127                                 # 16384 + 16256 = 32640: still exact
    assert neon_mlal_exact(w)
    a72 = get_target("aarch64-neon")
    assert gemm_variant(a72, np.full((4, 9), 127, np.int8)) == Q8_GEMM_NEON_MLAL
    assert gemm_variant(a72, np.full((4, 9), -128, np.int8))[0] == "q8_gemm_4x8__neon"
    assert gemm_variant(get_target("aarch64-v82"), np.full((4, 9), 1, np.int8))[0] == "q8_gemm_4x8__neondot"


@pytest.mark.parametrize("name", sorted(Q8_GEMV))
@pytest.mark.parametrize("extra", [(), SANITIZE], ids=["plain", "asan-ubsan"])
def test_q8_gemv_matches_reference(name, extra, tmp_path):
    """Each one-pixel (squeeze-excite) matrix-vector kernel equals the scalar reference on any weights."""
    isa = ISAS[name]
    require(isa)
    fn, src = Q8_GEMV[name]
    exe = build(isa, tmp_path / "gemv", ["q8_gemv_test.c", "q8-gemm/q8-gemv-scalar.c", src],
                {"KERNEL": fn, "KERNEL_NAME": f'"{name}"'}, extra)
    r = run(isa, exe)
    assert r.returncode == 0 and "147/147 cases match" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("extra", [(), SANITIZE], ids=["plain", "asan-ubsan"])
def test_q8_gemv_vnni_fp32_requant_matches_reference(extra, tmp_path):
    """rq.scale set: the VNNI GEMV's fp32 requantization bit-exact against the reference's (ties included)."""
    isa = ISAS["avx512vnni"]
    require(isa)
    fn, src = Q8_GEMV["avx512vnni"]
    exe = build(isa, tmp_path / "gemvf", ["q8_gemv_test.c", "q8-gemm/q8-gemv-scalar.c", src],
                {"KERNEL": fn, "KERNEL_NAME": '"avx512vnni-fp32"', "FP32_RQ": "1"}, extra)
    r = run(isa, exe)
    assert r.returncode == 0 and "147/147 cases match" in r.stdout, r.stdout + r.stderr


CGEMM_CASES = 4 * 4 * 4 * 2 * 3 + 17


@pytest.mark.parametrize("name,kernel,extra", [("scalar", "q8_cgemm__scalar", ()),
                                               ("avx512vnni", "q8_cgemm_32x8__avx512vnni", ()),
                                               ("avx512vnni", "q8_cgemm_32x8__avx512vnni", SANITIZE)],
                         ids=["scalar", "avx512vnni", "avx512vnni-asan-ubsan"])
def test_q8_cgemm_matches_reference(name, kernel, extra, tmp_path):
    """The channel-lane GEMM (channels in the lanes, pixels broadcast) bit-exact against its scalar reference over
    odd shapes, pixel ranges and both X forms (extended implicit rows, packed X); the reference itself against the
    pixel-lane scalar GEMM on packed X."""
    isa = ISAS[name]
    require(isa)
    srcs = ["q8_cgemm_test.c", "q8-gemm/q8-cgemm-scalar.c", "q8-gemm/q8-pack.c", "q8-gemm/q8-gemm-4x8-scalar.c"]
    if kernel != "q8_cgemm__scalar":
        srcs.append("q8-gemm/q8-cgemm-32x8-avx512vnni.c")
    exe = build(isa, tmp_path / "cgemm", srcs, {"KERNEL": kernel, "KERNEL_NAME": f'"{name}"'}, extra)
    r = run(isa, exe)
    assert r.returncode == 0 and f"{CGEMM_CASES}/{CGEMM_CASES} cases match" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]


def test_implicit_gemm_rechecks_the_maddubs_pair_bound():
    """The implicit GEMM's k order (4 channels of one tap) pairs other weights than the im2col order (taps of one
    channel): weights within vpmaddubsw's pair bound in one order may break it in the other, and then the im2col
    path is kept."""
    from edgec.codegen.ops.qpack import Q8_GEMM_MADDUBS, igemm_variant, implicit_matrix, maddubs_exact

    w = np.zeros((4, 4, 1, 2), np.int8)  # [M][C][kh][kw]
    w[0, 0, 0] = (127, 1)   # im2col pair (c0 t0, c0 t1): 128, exact
    w[0, 1, 0, 0] = 127     # implicit pair (c0 t0, c1 t0): 254, not
    assert maddubs_exact(w.reshape(4, -1)) and not maddubs_exact(implicit_matrix(w))
    assert igemm_variant(Q8_GEMM_MADDUBS[0], w, 1) is None
    assert igemm_variant(Q8_GEMM_MADDUBS[0], w // 2, 1) == "q8_igemm_4x16__avx2_maddubs"
    assert igemm_variant("q8_gemm_8x32__avx512vnni", w, 1) == "q8_igemm_8x32__avx512vnni"
    assert igemm_variant("q8_gemm_4x8__avx2", w, 1) is None  # no implicit form
