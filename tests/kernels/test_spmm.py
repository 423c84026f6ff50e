"""f32 sparse x dense (CSR and BSR 1x4 / 4x1 / 4x4) against the scalar reference and a dense
double-precision product over sparsity 0, 0.5, 0.9 and 1.0, odd shapes and fused epilogues;
NEON under qemu (cortex-a72 and armv7); one AddressSanitizer/UBSan build."""

from __future__ import annotations

import pytest

from edgec.codegen import variants
from qkit import ISAS, SANITIZE, build, require, run

# the block formats of the variant registry (sparse-<block>); AVX-512 has its own kernels for two of them
BLOCKS = [m.split("-", 1)[1] for m in (dict(variants.BY_NAME[n].forced)["sparse"]
                                       for n in variants.families()["sparse"]) if m.startswith("sparse-")]
CASES = [(t, isa) for isa in ("avx2", "neon", "armv7-neon") for t in BLOCKS] + \
        [("1x1", "avx512"), ("4x4", "avx512")]
AVX512 = ISAS["avx512"]


def _build(tile, isa_name, tmp_path, extra=()):
    isa = AVX512 if isa_name == "avx512" else ISAS[isa_name]
    require(isa)
    suffix = "neon" if isa_name.endswith("neon") else isa_name
    br, bc = tile.split("x")
    exe = build(isa, tmp_path / f"spmm_{tile}_{isa_name}",
                ["spmm_test.c", "f32-spmm/f32-spmm-scalar.c", f"f32-spmm/f32-spmm-{tile}-{suffix}.c"],
                {"KERNEL": f"f32_spmm_{tile}__{suffix}", "KERNEL_NAME": f'"{tile}-{isa_name}"', "BR": br, "BC": bc},
                extra)
    return isa, exe


@pytest.mark.parametrize("tile,isa_name", CASES)
def test_spmm_matches_reference(tile, isa_name, tmp_path):
    isa, exe = _build(tile, isa_name, tmp_path)
    r = run(isa, exe)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    assert "1280/1280 cases match" in r.stdout


def test_spmm_and_q8_gemm_clean_under_sanitizers(tmp_path):
    isa = ISAS["avx2"]
    require(isa)
    _, exe = _build("4x4", "avx2", tmp_path, SANITIZE)
    r = run(isa, exe, timeout=300)
    assert r.returncode == 0 and "1280/1280" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]
    exe = build(isa, tmp_path / "q8_san", ["q8_gemm_test.c", "q8-gemm/q8-pack.c", "q8-gemm/q8-gemm-4x8-scalar.c",
                                          "q8-gemm/q8-gemm-4x8-avx2.c"],
                {"KERNEL": "q8_gemm_4x8__avx2", "KERNEL_NAME": '"avx2-asan"', "X_SIGNED": "0"}, SANITIZE)
    r = run(isa, exe, timeout=300)
    assert r.returncode == 0 and "3240/3240" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]


@pytest.mark.parametrize("isa_name,fn,src", [("avx2", "q8_spmm_4x1__avx2", "q8-spmm/q8-spmm-4x1-avx2.c"),
                                             ("neon", "q8_spmm_4x1__neon", "q8-spmm/q8-spmm-4x1-neon.c")])
def test_q8_spmm_matches_reference(isa_name, fn, src, tmp_path):
    """int8 sparse x dense (4x1 blocks) bit-exact vs the scalar reference over sparsity 0, .5, .9, 1."""
    isa = ISAS[isa_name]
    require(isa)
    exe = build(isa, tmp_path / "q8spmm", ["q8_spmm_test.c", "q8-spmm/q8-spmm-scalar.c", src],
                {"KERNEL": fn, "KERNEL_NAME": f'"{isa_name}"', "BR": "4", "BC": "1"})
    r = run(isa, exe)
    assert r.returncode == 0 and "576/576 cases match" in r.stdout, r.stdout + r.stderr
