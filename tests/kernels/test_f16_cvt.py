"""fp16 -> fp32 weight conversion: every half value (normals, subnormals, zeros, inf, NaN) through
F16C, NEON (AArch64 and armv7 with -mfp16-format=ieee) and the portable reference, bit-exact."""

from __future__ import annotations

import pytest

from qkit import ISAS, build, require, run

CASES = [("avx2", "f16_to_f32__f16c", "f16-cvt/f16-cvt-f16c.c", ()),
         ("neon", "f16_to_f32__neon", "f16-cvt/f16-cvt-neon.c", ()),
         ("armv7-neon", "f16_to_f32__neon", "f16-cvt/f16-cvt-neon.c", ("-mfp16-format=ieee",)),
         ("armv7-neon", "f16_to_f32__neon", "f16-cvt/f16-cvt-neon.c", ()),  # no fp16 format: portable path
         ("scalar", "f16_to_f32__scalar", "f16-cvt/f16-cvt-scalar.c", ())]


@pytest.mark.parametrize("isa_name,fn,src,extra", CASES)
def test_f16_to_f32_all_values(isa_name, fn, src, extra, tmp_path):
    isa = ISAS[isa_name]
    require(isa)
    files = ["f16_cvt_test.c", "f16-cvt/f16-cvt-scalar.c"] + ([src] if "scalar" not in src else [])
    exe = build(isa, tmp_path / "cvt", files, {"KERNEL": fn, "KERNEL_NAME": f'"{isa_name}"'}, extra)
    r = run(isa, exe)
    assert r.returncode == 0 and "all match" in r.stdout, r.stdout + r.stderr
