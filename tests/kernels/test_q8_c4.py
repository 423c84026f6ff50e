"""The blocked int8 activation layout's kernels (runtime_c/q8-gemm/q8-gemm.h): the _c4 GEMMs against their
row-output forms followed by q8_pack_x (the layout's definition), the packing helpers that read the layout against
their NCHW forms, the unpack as q8_pack_x's inverse; plain and under AddressSanitizer + UBSan."""

from __future__ import annotations

import pytest

from qkit import ISAS, SANITIZE, build, require, run

FILES = ["q8_c4_test.c", "q8-gemm/q8-pack.c", "q8-gemm/q8-gemm-8x32-avx512vnni.c", "q8-gemm/q8-cgemm-32x8-avx512vnni.c"]
DEFINES = {"GEMM": "q8_gemm_8x32__avx512vnni", "GEMM_C4": "q8_gemm_8x32__avx512vnni_c4",
           "CGEMM": "q8_cgemm_32x8__avx512vnni", "CGEMM_C4": "q8_cgemm_32x8__avx512vnni_c4"}
CASES = 564  # 5 x 9 x 4 x 2 pixel-lane, 4 x 9 x 4 channel-lane, 60 packing shapes


@pytest.mark.parametrize("extra", [(), SANITIZE], ids=["plain", "asan-ubsan"])
def test_q8_c4_kernels_match_the_layout(extra, tmp_path):
    isa = ISAS["avx512vnni"]
    require(isa)
    exe = build(isa, tmp_path / "c4", FILES, {**DEFINES, "KERNEL_NAME": '"avx512vnni-c4"'}, extra)
    r = run(isa, exe)
    assert r.returncode == 0 and f"{CASES}/{CASES} cases match" in r.stdout, r.stdout[-2000:] + r.stderr[-3000:]


@pytest.mark.parametrize("extra", [(), SANITIZE], ids=["plain", "asan-ubsan"])
def test_q8_maxpool_c4_matches_nchw(extra, tmp_path):
    """The blocked MaxPool: its portable form equals the NCHW q8_maxpool between the layout's conversions, the
    AVX-512BW form equals the portable one (9 window kinds, 24 shapes each, the input before a guard page)."""
    isa = ISAS["avx512"]
    require(isa)
    exe = build(isa, tmp_path / "mp", ["q8_maxpool_c4_test.c", "q8-eltwise/q8-maxpool-c4.c",
                                       "q8-eltwise/q8-eltwise-scalar.c", "q8-gemm/q8-pack.c"],
                {"KERNEL": "q8_maxpool_c4__avx512", "KERNEL_NAME": '"avx512-maxpool-c4"'}, extra)
    r = run(isa, exe)
    assert r.returncode == 0 and "216/216 cases match" in r.stdout, r.stdout[-2000:] + r.stderr[-3000:]
