"""q8 GEMM variants bit-exact against the scalar reference (odd shapes, extreme values), natively
and under qemu (cortex-a72 for ARMv8.0 NEON, max for dotprod); the dotprod build must SIGILL on A72."""

from __future__ import annotations

import pytest

from qkit import A72, ISAS, build, require, run

VARIANTS = {  # isa -> (function, file, reads X signed)
    "scalar": ("q8_gemm_4x8__scalar", "q8-gemm/q8-gemm-4x8-scalar.c", 0),
    "avx2": ("q8_gemm_4x8__avx2", "q8-gemm/q8-gemm-4x8-avx2.c", 0),
    "avx512": ("q8_gemm_4x16__avx512bw", "q8-gemm/q8-gemm-4x16-avx512bw.c", 0),
    "avx512vnni": ("q8_gemm_4x16__avx512vnni", "q8-gemm/q8-gemm-4x16-avx512vnni.c", 0),
    "neon": ("q8_gemm_4x8__neon", "q8-gemm/q8-gemm-4x8-neon.c", 1),
    "neon-v82": ("q8_gemm_4x8__neondot", "q8-gemm/q8-gemm-4x8-neondot.c", 1),
}


def _build(name, tmp_path):
    isa = ISAS[name]
    require(isa)
    fn, src, signed = VARIANTS[name]
    files = ["q8_gemm_test.c", "q8-gemm/q8-pack.c", "q8-gemm/q8-gemm-4x8-scalar.c"]
    if src not in files:
        files.append(src)
    return isa, build(isa, tmp_path / f"t_{name}", files,
                      {"KERNEL": fn, "KERNEL_NAME": f'"{name}"', "X_SIGNED": str(signed)})


@pytest.mark.parametrize("name", list(VARIANTS))
def test_q8_gemm_matches_reference(name, tmp_path):
    isa, exe = _build(name, tmp_path)
    r = run(isa, exe)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3240/3240 cases match" in r.stdout


def test_dotprod_build_traps_on_cortex_a72(tmp_path):
    """Proves the v8.2 kernel really uses sdot and the v8.0 target never gets it."""
    isa, exe = _build("neon-v82", tmp_path)
    r = run(isa.__class__("a72", isa.cc, isa.cflags, A72), exe)
    assert r.returncode != 0
