"""The q8 GEMM with a residual Add in its requantize-and-store (q8_gemm_*_add, q8_conv1x1_add) against
the passes it replaces, the plain scalar GEMM / q8_conv and then q8_add, byte for byte (tests/kernels/c/
q8_gemm_add_test.c: odd shapes, operands at their ends, clamps, in place, serial and threaded)."""

from __future__ import annotations

import re

import pytest

from qkit import ISAS, SANITIZE, build, require, run

FILES = ["q8_gemm_add_test.c", "q8-gemm/q8-conv1x1-add.c", "q8-conv/q8-conv.c", "q8-gemm/q8-pack.c",
         "q8-gemm/q8-gemm-4x8-scalar.c", "q8-gemm/q8-gemm-4x8-scalar-maddubs.c",
         "q8-eltwise/q8-eltwise-scalar.c", "ec_threadpool.c"]
AVX2 = "q8-gemm/q8-gemm-4x16-avx2-maddubs.c"


def _run(tmp_path, isa_name, kernel, extra=(), defines=None):
    isa = ISAS[isa_name]
    require(isa)
    files = FILES + ([AVX2] if "avx2" in kernel else [])
    exe = build(isa, tmp_path / "t", files, {"KERNEL_ADD": kernel, "KERNEL_NAME": f'"{kernel}"', **(defines or {})},
                extra)
    r = run(isa, exe, timeout=300)
    m = re.search(r"(\d+)/(\d+) cases match", r.stdout)
    assert m, r.stdout[-2000:] + r.stderr[-2000:]
    return int(m.group(1)), int(m.group(2)), r


@pytest.mark.parametrize("isa_name,kernel", [("scalar", "q8_gemm_4x8__scalar_maddubs_add"),
                                             ("avx2", "q8_gemm_4x8__scalar_maddubs_add"),
                                             ("avx2", "q8_gemm_4x16__avx2_maddubs_add")])
def test_gemm_add_equals_gemm_then_add(isa_name, kernel, tmp_path):
    """Portable build (q8_add's scalar loop) and AVX2 build (its 32-lane path) alike."""
    ok, n, r = _run(tmp_path, isa_name, kernel)
    assert r.returncode == 0 and ok == n == 1968, r.stdout[-2000:]


@pytest.mark.parametrize("shift_min,span", [(31, 24), (33, 22)])
def test_gemm_add_avx2_under_sanitizers(shift_min, span, tmp_path):
    """Both requantization paths of the AVX2 kernel (shifts 33-54: per-block constants; others: the
    general one), tails, in place, under ASan/UBSan."""
    ok, n, r = _run(tmp_path, "avx2", "q8_gemm_4x16__avx2_maddubs_add", SANITIZE,
                    {"SHIFT_MIN": str(shift_min), "SHIFT_SPAN": str(span)})
    assert r.returncode == 0 and ok == n == 1968, r.stdout[-2000:] + r.stderr[-4000:]


def test_gemm_add_reference_on_arm(tmp_path):
    """The portable reference and driver are arch-neutral: the same cases under qemu-aarch64."""
    ok, n, r = _run(tmp_path, "neon", "q8_gemm_4x8__scalar_maddubs_add")
    assert r.returncode == 0 and ok == n == 1968, r.stdout[-2000:]
