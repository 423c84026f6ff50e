"""fp16 -> fp32 conversion on every length 0-80 at unaligned starts: the vector steps and their scalar tails
against the portable reference, nothing written past the end (test_f16_cvt runs every half value, but on one
length that is a whole number of vector steps)."""

from __future__ import annotations

import pytest

from qkit import ISAS, SANITIZE, build, require, run

CASES = [("avx2", "f16_to_f32__f16c", "f16-cvt/f16-cvt-f16c.c", ()),
         ("neon", "f16_to_f32__neon", "f16-cvt/f16-cvt-neon.c", ()),
         ("armv7-neon", "f16_to_f32__neon", "f16-cvt/f16-cvt-neon.c", ("-mfp16-format=ieee",)),
         ("avx2", "f16_to_f32__f16c", "f16-cvt/f16-cvt-f16c.c", SANITIZE)]


@pytest.mark.parametrize("isa_name,fn,src,extra", CASES, ids=["f16c", "neon", "armv7-neon-fp16", "f16c-asan-ubsan"])
def test_f16_to_f32_every_tail(isa_name, fn, src, extra, tmp_path):
    isa = ISAS[isa_name]
    require(isa)
    exe = build(isa, tmp_path / "tails", ["f16_cvt_tails.c", "f16-cvt/f16-cvt-scalar.c", src],
                {"KERNEL": fn, "KERNEL_NAME": f'"{isa_name}"'}, extra)
    r = run(isa, exe)
    assert r.returncode == 0 and "324/324 lengths ok" in r.stdout, r.stdout + r.stderr
