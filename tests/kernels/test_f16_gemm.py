"""fp16-arithmetic 1x1 conv (ARMv8.2 FP16, under qemu -cpu max) vs its fp32-accumulating reference
within the worst-case fp16 rounding bound; the same binary must trap on a Cortex-A72 (no FP16)."""

from __future__ import annotations

from qkit import A72, ISAS, build, require, run


def test_f16_conv1x1_neonfp16arith(tmp_path):
    isa = ISAS["neon-v82"]
    require(isa)
    exe = build(isa, tmp_path / "f16g", ["f16_gemm_test.c", "f16-gemm/f16-conv1x1-scalar.c",
                                         "f16-gemm/f16-conv1x1-4x16-neonfp16arith.c"])
    r = run(isa, exe)
    assert r.returncode == 0 and "270/270" in r.stdout, r.stdout + r.stderr
    assert run(isa.__class__("a72", isa.cc, isa.cflags, A72), exe).returncode != 0
