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
            "avx512vnni": "q8_dwconv__avx512vnni", "neon": "q8_dwconv__neon", "avxvnni": "q8_dwconv__avxvnni"}
C16 = "q8_dwconv_c16__avx512vnni"  # 16 channels in the lanes; fp32 requantization only (else the VNNI kernel)
VBMI = ("-mavx512vbmi",)  # the VNNI depthwise kernel also needs vpermb
# (C, H, W, k, stride, pad, dilation, xdtype)
ORT_CASES = [(8, 12, 17, 3, 1, 1, 1, np.uint8), (5, 9, 33, 3, 2, 1, 1, np.int8),
             (4, 10, 10, 5, 2, 2, 1, np.int8), (3, 11, 9, 3, 1, 2, 2, np.uint8)]
C16_CASES = [(40, 2, 96, 5, 1, 2, 1, np.uint8), (19, 6, 33, 3, 2, 1, 1, np.int8)]  # 2-3 groups of 16


def _srcs(name, main):
    files = [main, "q8-dwconv/q8-dwconv-scalar.c"]
    if name == "c16":
        name, files = "avx512vnni", files + ["q8-dwconv/q8-dwconv-c16-avx512vnni.c"]
    files += ["q8-dwconv/q8-dwconv-avx512.c"] if name == "avx512vnni" else []  # its fallback
    return files + ([f"q8-dwconv/q8-dwconv-{name}.c"] if name != "scalar" else [])


def _require(name):
    name = "avx512vnni" if name == "c16" else name
    require(ISAS[name])
    if name == "avx512vnni":
        require(ISAS["avx512vbmi"])
    return VBMI if name == "avx512vnni" else ()


@pytest.mark.parametrize("name,extra", [("avx2", ()), ("avx2", SANITIZE), ("avx512", ()), ("avx512", SANITIZE),
                                        ("avx512vnni", ()), ("avx512vnni", SANITIZE), ("neon", ()), ("avxvnni", ()),
                                        ("avxvnni", SANITIZE)],
                         ids=["avx2", "avx2-asan-ubsan", "avx512", "avx512-asan-ubsan", "avx512vnni",
                              "avx512vnni-asan-ubsan", "neon", "avxvnni", "avxvnni-asan-ubsan"])
def test_q8_dwconv_matches_reference(name, extra, tmp_path):
    isa = ISAS[name]
    extra = extra + _require(name)
    exe = build(isa, tmp_path / "dw", _srcs(name, "q8_dw_test.c"),
                {"KERNEL": VARIANTS[name], "KERNEL_NAME": f'"{name}"'}, extra)
    r = run(isa, exe)
    assert r.returncode == 0 and "252/252 cases match" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("name,extra", [("avx512", ()), ("avx512vnni", ()), ("avx512vnni", SANITIZE), ("c16", ()),
                                        ("c16", SANITIZE)],
                         ids=["avx512", "avx512vnni", "avx512vnni-asan-ubsan", "c16", "c16-asan-ubsan"])
def test_q8_dwconv_fp32_requant_matches_reference(name, extra, tmp_path):
    """p.scale set: the AVX-512 kernels' fp32 requantization bit-exact against the scalar reference's (the
    channel-lane kernel: 1-3 groups of 16 channels, partial ones, every stride and pad of the set)."""
    isa = ISAS["avx512vnni" if name == "c16" else name]
    extra = extra + _require(name)
    exe = build(isa, tmp_path / "dwf", _srcs(name, "q8_dw_test.c"),
                {"KERNEL": C16 if name == "c16" else VARIANTS[name], "KERNEL_NAME": f'"{name}-fp32"', "FP32_RQ": "1"},
                extra)
    r = run(isa, exe)
    assert r.returncode == 0 and "252/252 cases match" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("extra", [(), SANITIZE], ids=["plain", "asan-ubsan"])
def test_q8_dwconv_maddubs_matches_reference_on_7bit_weights(extra, tmp_path):
    """The vpmaddubsw depthwise kernel on 7-bit weights (extremes against u8 0 / 255 included): bit-exact."""
    isa = ISAS["avx2"]
    require(isa)
    exe = build(isa, tmp_path / "dwm", ["q8_dw_test.c", "q8-dwconv/q8-dwconv-scalar.c", "q8-dwconv/q8-dwconv-avx2-maddubs.c"],
                {"KERNEL": "q8_dwconv__avx2_maddubs", "KERNEL_NAME": '"avx2-maddubs"', "WMIN": "(-64)", "WMAX": "64"}, extra)
    r = run(isa, exe, timeout=300)
    assert r.returncode == 0 and "252/252 cases match" in r.stdout, r.stdout + r.stderr


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
    assert r.returncode == 0 and "252/252 cases match" in r.stdout, r.stdout + r.stderr


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


def _problem(path, case, x, q, fp32=False):
    C, H, W, k, s, p, d, xdt = case
    Ho, Wo = ((H + 2 * p - d * (k - 1) - 1) // s + 1), ((W + 2 * p - d * (k - 1) - 1) // s + 1)
    zx, zy = to_u8_domain(q["x_zp"], xdt), to_u8_domain(q["y_zp"], xdt)
    w = q["w"].reshape(C, k * k)
    rp = row_params(w, q["b"], zx, requant_scales(q["x_s"], q["w_s"], q["y_s"], C), False)
    hdr = np.array([1, C, H, W, k, k, s, s, d, d, p, p, Ho, Wo, zy, 0, 255, zx], np.int32)
    xu = (x.astype(np.int16) + (128 if xdt == np.int8 else 0)).astype(np.uint8)
    quad, zrow = dw_quads(q["w"].reshape(C, k, k), zx)  # the emitter's packing, read by the VNNI kernel
    path.write_bytes(hdr.tobytes() + w.tobytes() + rp.bias[:C].tobytes() + rp.mult[:C].tobytes()
                     + rp.shift[:C].tobytes() + quad.tobytes() + zrow.tobytes()
                     + (rp.scale[:C].tobytes() if fp32 else b"") + xu.tobytes())
    return (1, C, Ho, Wo)


@pytest.mark.parametrize("name", [*VARIANTS, "c16"])
def test_q8_dwconv_vs_exact_qlinearconv(name, tmp_path):
    """Through the channel-parallel driver with the emitter's packing (c16: and its fp32 scales), 1 and 2 threads."""
    isa = ISAS["avx512vnni" if name == "c16" else name]
    extra = _require(name)
    fp32 = name == "c16"
    exe = build(isa, tmp_path / "drv", _srcs(name, "q8_dw_driver.c") + ["q8-dwconv/q8-dwconv-run.c", "ec_threadpool.c"],
                {"KERNEL": C16 if fp32 else VARIANTS[name], **({"FP32_RQ": "1"} if fp32 else {})}, extra)
    rng = np.random.default_rng(3)
    for i, case in enumerate(ORT_CASES + (C16_CASES if fp32 else [])):
        C, H, W, k, s, p, d, xdt = case
        model, x, q = _model_and_data((C, H, W, C, k, s, p, d, C, xdt), rng)
        ref = exact_int8(model, {"x": x})[0]
        shape = _problem(tmp_path / f"p{i}.bin", case, x, q, fp32)
        r = run(isa, exe, str(tmp_path / f"p{i}.bin"), str(tmp_path / f"y{i}.bin"))
        assert r.returncode == 0, r.stderr
        r2 = run(isa, exe, str(tmp_path / f"p{i}.bin"), str(tmp_path / f"t{i}.bin"), "2")  # 2 threads
        assert r2.returncode == 0 and (tmp_path / f"t{i}.bin").read_bytes() == (tmp_path / f"y{i}.bin").read_bytes()
        y = np.frombuffer((tmp_path / f"y{i}.bin").read_bytes(), np.uint8).reshape(shape).astype(np.int16)
        y -= 128 if xdt == np.int8 else 0
        assert np.abs(y - ref.astype(np.int16)).max() <= 1, case


LUTS = {"scalar": "q8_lut", "avx2": "q8_lut__avx2", "avx2_maddubs": "q8_lut__avx2", "avxvnni": "q8_lut__avx2",
        "neon": "q8_lut__neon"}
LUT_FILES = {"q8_lut__avx2": ["q8-eltwise/q8-lut-avx2.c"], "q8_lut__neon": ["q8-eltwise/q8-lut-neon.c"], "q8_lut": []}


@pytest.mark.parametrize("name,extra", [("scalar", ()), ("avx2", SANITIZE), ("avx2_maddubs", ()),
                                        ("avx2_maddubs", SANITIZE), ("avxvnni", SANITIZE), ("neon", ()),
                                        ("c16", SANITIZE)],
                         ids=["scalar", "avx2-asan-ubsan", "avx2_maddubs", "avx2_maddubs-asan-ubsan",
                              "avxvnni-asan-ubsan", "neon", "c16-asan-ubsan"])
def test_q8_dwconv_fused_lut_matches_separate_pass(name, extra, tmp_path):
    """The depthwise driver with a fused table (per chunk of channels, 1 and 2 threads) equals the kernel
    followed by the scalar table pass."""
    if name == "c16":  # fp32 requantization; the driver's chunks are whole groups of 16 channels
        isa, extra = ISAS["avx512vnni"], extra + _require(name)
        srcs = _srcs(name, "q8_dw_lut_test.c") + ["q8-dwconv/q8-dwconv-run.c", "ec_threadpool.c",
                                                  "q8-eltwise/q8-eltwise-scalar.c"]
        exe = build(isa, tmp_path / "dwl", srcs, {"KERNEL": C16, "LUT": "q8_lut", "FP32_RQ": "1"}, extra)
    else:
        isa = ISAS["avx2" if name == "avx2_maddubs" else name]
        require(isa)
        lut = LUTS[name]
        srcs = ["q8_dw_lut_test.c", "q8-dwconv/q8-dwconv-scalar.c", "q8-dwconv/q8-dwconv-run.c", "ec_threadpool.c",
                "q8-eltwise/q8-eltwise-scalar.c", *LUT_FILES[lut]]
        srcs += [f"q8-dwconv/q8-dwconv-{name.replace('_', '-')}.c"] if name != "scalar" else []
        exe = build(isa, tmp_path / "dwl", srcs, {"KERNEL": f"q8_dwconv__{name}", "LUT": lut}, extra)
    r = run(isa, exe, timeout=300)
    assert r.returncode == 0 and "12/12 cases match" in r.stdout, r.stdout + r.stderr


def test_emitter_scratch_is_the_kernels(tmp_path):
    """codegen's dw_scratch_bytes (the arena slice it reserves per thread) equals q8_dwconv_scratch_bytes, with and
    without the fp32 scales (which let the channel-lane kernel run and may need more)."""
    from edgec.codegen.ops.quant import dw_scratch_bytes
    isa = ISAS["scalar"]
    shapes = [(2, 96, 5, 5, 1, 1, 1, 1, 2, 2), (48, 192, 3, 3, 2, 2, 1, 1, 1, 1), (12, 96, 3, 3, 2, 1, 1, 1, 1, 1),
              (7, 33, 5, 3, 1, 2, 2, 1, 2, 1), (9, 9, 3, 3, 1, 1, 1, 2, 2, 2), (112, 112, 3, 3, 1, 1, 1, 1, 1, 1),
              (1, 70, 1, 5, 1, 1, 1, 1, 0, 2), (20, 200, 7, 7, 1, 1, 1, 1, 3, 3)]
    rows, want = [], []
    for H, W, kh, kw, sh, sw, dh, dw, pt, pl in shapes:
        Ho, Wo = (H + 2 * pt - dh * (kh - 1) - 1) // sh + 1, (W + 2 * pl - dw * (kw - 1) - 1) // sw + 1
        for scaled in (0, 1):
            rows.append(f"{{{H}, {W}, {kh}, {kw}, {sh}, {sw}, {dh}, {dw}, {pt}, {pl}, {Ho}, {Wo}, {scaled}}}")
            want.append(dw_scratch_bytes(H, W, [kh, kw], [sh, sw], [dh, dw], pl, Ho, Wo, bool(scaled)))
    src = tmp_path / "scr.c"
    src.write_text('#include <stdio.h>\n#include "q8-dwconv/q8-dwconv.h"\n'
                   f"static const int S[][13] = {{{', '.join(rows)}}};\n"
                   "int main(void) {\n    static const float one = 1.0f;\n"
                   f"    for (int i = 0; i < {len(rows)}; i++) {{\n"
                   "        const int *s = S[i];\n"
                   "        q8_dw_params p = {1, 1, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11],\n"
                   "                          NULL, NULL, NULL, NULL, 0, 0, 255, 0, NULL, NULL, s[12] ? &one : NULL};\n"
                   '        printf("%zu\\n", q8_dwconv_scratch_bytes(&p));\n    }\n    return 0;\n}\n')
    r = run(isa, build(isa, tmp_path / "scr", [str(src)]))
    assert r.returncode == 0, r.stderr
    got = [int(v) for v in r.stdout.split()]
    assert got == want
    assert any(a != b for a, b in zip(want[::2], want[1::2]))  # the channel-lane kernel's need shows somewhere
