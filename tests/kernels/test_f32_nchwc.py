"""Channel-blocked (NCHWc) kernels of every ISA against their scalar references (tests/kernels/c/test_nchwc.c):
reorders both ways, 1x1 conv, depthwise, pools, global average pool and the squeeze-excite scale on channels
that are not a multiple of the block, odd maps, strides 1-3, pads and dilations; Arm builds under qemu."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from edgec.runtime_c import root as runtime_root
from qkit import SAN, build_for_target

C_TEST = Path(__file__).with_name("c") / "test_nchwc.c"
# target -> (kernel isa, lanes)
TARGETS = {"x86_64-avx2": ("avx2", 8), "x86_64-avx512": ("avx512", 16), "aarch64-neon": ("neon", 4),
           "armv7-neon": ("neon", 4)}


def build(target: str, out: Path, opt=("-O2",), rt: Path | None = None) -> list[str] | None:
    return build_for_target(target, *TARGETS[target], C_TEST, "f32-nchwc/f32-nchwc", out, opt, rt)


@pytest.mark.parametrize("target", list(TARGETS))
def test_nchwc_kernels_match_scalar_reference(target, tmp_path):
    run = build(target, tmp_path / "t")
    if run is None:
        pytest.skip(f"built; this CPU cannot run {TARGETS[target][0]}")
    r = subprocess.run([*run, *(["quick"] if len(run) > 1 else [])], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cases ok" in r.stdout and "FAIL" not in r.stdout


def test_nchwc_kernels_sanitizers(tmp_path):
    """ASan + UBSan over every AVX2 kernel and reference, threaded through the run helpers."""
    run = build("x86_64-avx2", tmp_path / "t", SAN)
    if run is None:
        pytest.skip("this CPU cannot run avx2")
    r = subprocess.run([*run, "quick"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_reference_catches_a_wrong_kernel(tmp_path):
    """The comparison is live: a SIMD dwconv that drops its last tap fails it."""
    src = (runtime_root() / "f32-nchwc/f32-nchwc-tmpl.h").read_text()
    bad = src.replace("for (size_t kw = kwa; kw < kwb; kw++, q += cstep)",
                      "for (size_t kw = kwa; kw + 1 < kwb; kw++, q += cstep)")
    assert bad != src
    rt = tmp_path / "rt"
    shutil.copytree(runtime_root(), rt, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (rt / "f32-nchwc/f32-nchwc-tmpl.h").write_text(bad)
    run = build("x86_64-avx2", tmp_path / "t", rt=rt)
    if run is None:
        pytest.skip("this CPU cannot run avx2")
    r = subprocess.run([*run, "quick"], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "FAIL dwconv" in r.stdout
