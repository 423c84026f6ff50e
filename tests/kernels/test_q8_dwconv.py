"""Int8 depthwise convolution: SIMD variants bit-exact against the scalar reference (strides 1-3,
dilation, pads, odd widths) and the kernels against the exact QLinearConv with group = C (qkit.exact_int8)."""

from __future__ import annotations

import numpy as np
import pytest

from edgec.codegen.ops.qpack import requant_scales, row_params, to_u8_domain
from edgec.codegen.ops.quant import dw_quads
from qkit import ISAS, SANITIZE, build, exact_int8, require, run
from test_q8_conv import _model_and_data

VARIANTS = {"scalar": "q8_dwconv__scalar", "avx2": "q8_dwconv__avx2", "avx512": "q8_dwconv__avx512",
            "avx512vnni": "q8_dwconv__avx512vnni", "neon": "q8_dwconv__neon"}
VBMI = ("-mavx512vbmi",)  # the VNNI depthwise kernel also needs vpermb
# (C, H, W, k, stride, pad, dilation, xdtype)
ORT_CASES = [(8, 12, 17, 3, 1, 1, 1, np.uint8), (5, 9, 33, 3, 2, 1, 1, np.int8),
             (4, 10, 10, 5, 2, 2, 1, np.int8), (3, 11, 9, 3, 1, 2, 2, np.uint8)]


def _srcs(name, main):
    files = [main, "q8-dwconv/q8-dwconv-scalar.c"]
    files += ["q8-dwconv/q8-dwconv-avx512.c"] if name == "avx512vnni" else []  # its fallback
    return files + ([f"q8-dwconv/q8-dwconv-{name}.c"] if name != "scalar" else [])


def _require(name):
    require(ISAS[name])
    if name == "avx512vnni":
        require(ISAS["avx512vbmi"])
    return VBMI if name == "avx512vnni" else ()


@pytest.mark.parametrize("name,extra", [("avx2", ()), ("avx2", SANITIZE), ("avx512", ()), ("avx512", SANITIZE),
                                        ("avx512vnni", ()), ("avx512vnni", SANITIZE), ("neon", ())],
                         ids=["avx2", "avx2-asan-ubsan", "avx512", "avx512-asan-ubsan", "avx512vnni",
                              "avx512vnni-asan-ubsan", "neon"])
def test_q8_dwconv_matches_reference(name, extra, tmp_path):
    isa = ISAS[name]
    extra = extra + _require(name)
    exe = build(isa, tmp_path / "dw", _srcs(name, "q8_dw_test.c"),
                {"KERNEL": VARIANTS[name], "KERNEL_NAME": f'"{name}"'}, extra)
    r = run(isa, exe)
    assert r.returncode == 0 and "244/244 cases match" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("name,extra", [("avx512", ()), ("avx512vnni", ()), ("avx512vnni", SANITIZE)],
                         ids=["avx512", "avx512vnni", "avx512vnni-asan-ubsan"])
def test_q8_dwconv_fp32_requant_matches_reference(name, extra, tmp_path):
    """p.scale set: the AVX-512 kernels' fp32 requantization bit-exact against the scalar reference's."""
    isa = ISAS[name]
    extra = extra + _require(name)
    exe = build(isa, tmp_path / "dwf", _srcs(name, "q8_dw_test.c"),
                {"KERNEL": VARIANTS[name], "KERNEL_NAME": f'"{name}-fp32"', "FP32_RQ": "1"}, extra)
    r = run(isa, exe)
    assert r.returncode == 0 and "244/244 cases match" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("extra", [(), SANITIZE], ids=["plain", "asan-ubsan"])
def test_q8_dwconv_maddubs_matches_reference_on_7bit_weights(extra, tmp_path):
    """The vpmaddubsw depthwise kernel on 7-bit weights (extremes against u8 0 / 255 included): bit-exact."""
    isa = ISAS["avx2"]
    require(isa)
    exe = build(isa, tmp_path / "dwm", ["q8_dw_test.c", "q8-dwconv/q8-dwconv-scalar.c", "q8-dwconv/q8-dwconv-avx2-maddubs.c"],
                {"KERNEL": "q8_dwconv__avx2_maddubs", "KERNEL_NAME": '"avx2-maddubs"', "WMIN": "(-64)", "WMAX": "64"}, extra)
    r = run(isa, exe, timeout=300)
    assert r.returncode == 0 and "244/244 cases match" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("extra", [(), SANITIZE], ids=["plain", "asan-ubsan"])
def test_q8_dwconv_maddubs_shared_matches_reference_on_7bit_weights(extra, tmp_path):
    """The variant whose output rows share taps (maps shorter than the window: pairs at odd taps too), bit-exact
    on 7-bit weights, where every consecutive tap pair fits."""
    isa = ISAS["avx2"]
    require(isa)
    exe = build(isa, tmp_path / "dws", ["q8_dw_test.c", "q8-dwconv/q8-dwconv-scalar.c", "q8-dwconv/q8-dwconv-avx2-maddubs.c"],
                {"KERNEL": "q8_dwconv__avx2_maddubs_shared", "KERNEL_NAME": '"avx2-maddubs-shared"', "WMIN": "(-64)",
                 "WMAX": "64"}, extra)
    r = run(isa, exe, timeout=300)
    assert r.returncode == 0 and "244/244 cases match" in r.stdout, r.stdout + r.stderr


def test_q8_dwconv_maddubs_shared_needs_the_odd_pairs(tmp_path):
    """Weights whose even tap pairs fit the int16 pair sum and odd ones do not (the emitter then keeps the plain
    maddubs kernel): that kernel is exact on them, the shared one is not (only where output rows share taps)."""
    isa = ISAS["avx2"]
    require(isa)
    out = {}
    for k in ("q8_dwconv__avx2_maddubs", "q8_dwconv__avx2_maddubs_shared"):
        exe = build(isa, tmp_path / k, ["q8_dw_test.c", "q8-dwconv/q8-dwconv-scalar.c",
                                        "q8-dwconv/q8-dwconv-avx2-maddubs.c"],
                    {"KERNEL": k, "KERNEL_NAME": f'"{k}"', "WODD": "1"})
        out[k] = run(isa, exe, timeout=300)
    assert out["q8_dwconv__avx2_maddubs"].returncode == 0, out["q8_dwconv__avx2_maddubs"].stdout
    r = out["q8_dwconv__avx2_maddubs_shared"]
    assert r.returncode != 0 and "MISMATCH C=11 H=3 W=95 k=5x5 s=1,1" in r.stdout, r.stdout


def test_q8_dwconv_maddubs_differs_on_8bit_weights(tmp_path):
    """Proves the weight bound matters: full int8 weights saturate the pair sums."""
    isa = ISAS["avx2"]
    require(isa)
    exe = build(isa, tmp_path / "dww", ["q8_dw_test.c", "q8-dwconv/q8-dwconv-scalar.c", "q8-dwconv/q8-dwconv-avx2-maddubs.c"],
                {"KERNEL": "q8_dwconv__avx2_maddubs", "KERNEL_NAME": '"avx2-maddubs"'})
    r = run(isa, exe)
    assert r.returncode != 0 and "MISMATCH" in r.stdout


def _problem(path, case, x, q):
    C, H, W, k, s, p, d, xdt = case
    Ho, Wo = ((H + 2 * p - d * (k - 1) - 1) // s + 1), ((W + 2 * p - d * (k - 1) - 1) // s + 1)
    zx, zy = to_u8_domain(q["x_zp"], xdt), to_u8_domain(q["y_zp"], xdt)
    w = q["w"].reshape(C, k * k)
    rp = row_params(w, q["b"], zx, requant_scales(q["x_s"], q["w_s"], q["y_s"], C), False)
    hdr = np.array([1, C, H, W, k, k, s, s, d, d, p, p, Ho, Wo, zy, 0, 255, zx], np.int32)
    xu = (x.astype(np.int16) + (128 if xdt == np.int8 else 0)).astype(np.uint8)
    quad, zrow = dw_quads(q["w"].reshape(C, k, k), zx)  # the emitter's packing, read by the VNNI kernel
    path.write_bytes(hdr.tobytes() + w.tobytes() + rp.bias[:C].tobytes() + rp.mult[:C].tobytes()
                     + rp.shift[:C].tobytes() + quad.tobytes() + zrow.tobytes() + xu.tobytes())
    return (1, C, Ho, Wo)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_q8_dwconv_vs_exact_qlinearconv(name, tmp_path):
    isa = ISAS[name]
    extra = _require(name)
    exe = build(isa, tmp_path / "drv", _srcs(name, "q8_dw_driver.c") + ["q8-dwconv/q8-dwconv-run.c", "ec_threadpool.c"],
                {"KERNEL": VARIANTS[name]}, extra)
    rng = np.random.default_rng(3)
    for i, case in enumerate(ORT_CASES):
        C, H, W, k, s, p, d, xdt = case
        model, x, q = _model_and_data((C, H, W, C, k, s, p, d, C, xdt), rng)
        ref = exact_int8(model, {"x": x})[0]
        shape = _problem(tmp_path / f"p{i}.bin", case, x, q)
        r = run(isa, exe, str(tmp_path / f"p{i}.bin"), str(tmp_path / f"y{i}.bin"))
        assert r.returncode == 0, r.stderr
        r2 = run(isa, exe, str(tmp_path / f"p{i}.bin"), str(tmp_path / f"t{i}.bin"), "2")  # 2 threads
        assert r2.returncode == 0 and (tmp_path / f"t{i}.bin").read_bytes() == (tmp_path / f"y{i}.bin").read_bytes()
        y = np.frombuffer((tmp_path / f"y{i}.bin").read_bytes(), np.uint8).reshape(shape).astype(np.int16)
        y -= 128 if xdt == np.int8 else 0
        assert np.abs(y - ref.astype(np.int16)).max() <= 1, case


LUTS = {"scalar": "q8_lut", "avx2": "q8_lut__avx2", "avx2_maddubs": "q8_lut__avx2", "neon": "q8_lut__neon"}
LUT_FILES = {"q8_lut__avx2": ["q8-eltwise/q8-lut-avx2.c"], "q8_lut__neon": ["q8-eltwise/q8-lut-neon.c"], "q8_lut": []}


@pytest.mark.parametrize("name,extra", [("scalar", ()), ("avx2", SANITIZE), ("avx2_maddubs", ()),
                                        ("avx2_maddubs", SANITIZE), ("neon", ())],
                         ids=["scalar", "avx2-asan-ubsan", "avx2_maddubs", "avx2_maddubs-asan-ubsan", "neon"])
def test_q8_dwconv_fused_lut_matches_separate_pass(name, extra, tmp_path):
    """The depthwise driver with a fused table (per chunk of channels, 1 and 2 threads) equals the kernel
    followed by the scalar table pass."""
    isa = ISAS["avx2" if name == "avx2_maddubs" else name]
    require(isa)
    lut = LUTS[name]
    srcs = ["q8_dw_lut_test.c", "q8-dwconv/q8-dwconv-scalar.c", "q8-dwconv/q8-dwconv-run.c", "ec_threadpool.c",
            "q8-eltwise/q8-eltwise-scalar.c", *LUT_FILES[lut]]
    srcs += [f"q8-dwconv/q8-dwconv-{name.replace('_', '-')}.c"] if name != "scalar" else []
    exe = build(isa, tmp_path / "dwl", srcs, {"KERNEL": f"q8_dwconv__{name}", "LUT": lut}, extra)
    r = run(isa, exe, timeout=300)
    assert r.returncode == 0 and "10/10 cases match" in r.stdout, r.stdout + r.stderr
