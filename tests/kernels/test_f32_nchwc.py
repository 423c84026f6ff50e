"""Channel-blocked (NCHWc) kernels of every ISA against their scalar references (tests/kernels/c/test_nchwc.c):
reorders both ways, 1x1 conv, depthwise, pools, global average pool and the squeeze-excite scale on channels
that are not a multiple of the block, odd maps, strides 1-3, pads and dilations; Arm builds under qemu."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from edgec.codegen.targets import get_target
from edgec.runtime_c import root as runtime_root
from qkit import compile_link

C_TEST = Path(__file__).with_name("c") / "test_nchwc.c"
WFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror"]
SAN = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
# target -> (kernel isa, lanes)
TARGETS = {"x86_64-avx2": ("avx2", 8), "x86_64-avx512": ("avx512", 16), "aarch64-neon": ("neon", 4),
           "armv7-neon": ("neon", 4)}


def build(target: str, out: Path, opt=("-O2",)) -> list[str] | None:
    """Compile the test for target; returns the command line prefix that runs it (qemu for Arm), or None when
    this machine cannot run it (built all the same, so the code stays -Werror clean)."""
    t = get_target(target)
    isa, lanes = TARGETS[target]
    cc = t.cc if t.arch != "x86_64" else "gcc"
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed")
    if t.qemu and shutil.which(t.qemu[0]) is None:
        pytest.skip(f"{t.qemu[0]} is not installed")
    rt = runtime_root()
    srcs = [C_TEST, rt / "f32-nchwc/f32-nchwc-scalar.c", rt / f"f32-nchwc/f32-nchwc-{isa}.c", rt / "ec_threadpool.c"]
    compile_link(cc, [*opt, *WFLAGS, *t.cflags, *(["-static"] if t.qemu else []), f"-I{rt}"], srcs, out,
                 {"ISA": isa, "LANES": lanes}, ["-lm", "-lpthread"])
    if not t.qemu and not t.runs_natively():
        return None
    return [*(t.qemu or []), str(out)]


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
    t = get_target("x86_64-avx2")
    if not t.runs_natively():
        pytest.skip("this CPU lacks avx2")
    out = tmp_path / "t"
    compile_link("gcc", ["-O2", *WFLAGS, *t.cflags, f"-I{rt}"], [C_TEST, rt / "f32-nchwc/f32-nchwc-scalar.c",
                 rt / "f32-nchwc/f32-nchwc-avx2.c", rt / "ec_threadpool.c"], out, {"ISA": "avx2", "LANES": 8},
                 ["-lm", "-lpthread"])
    r = subprocess.run([str(out), "quick"], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "FAIL dwconv" in r.stdout
