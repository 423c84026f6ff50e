"""The AArch64 microkernels keep their accumulators in registers: the generated code of each tile's inner K loop,
built as a generated Makefile builds it for the Raspberry Pi targets (cflags and the cflags_probe the compiler
takes, -O3), has no stack access. gcc 12 had kept 1-4 accumulators of these tiles on the stack, loaded and stored
every K step (targets.yaml, cflags_probe; f32-gemm-tmpl.h, the by-element FMAs and the activation through the
output)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from edgec.codegen.targets import get_target
from edgec.runtime_c import root as runtime_root

_BRANCH = re.compile(r"\s+(b[a-z.]*|cbnz|cbz|tbnz|tbz)\s+.*?(\.L\w+)$")
_LABEL = re.compile(r"^(\.L\w+):$")
_MAC = re.compile(r"\b(fmla|smlal2?|sdot|udot)\b")

# (source, MAC instructions in the inner loop of the tile checked: the full-size tile)
TILES = [
    ("f32-gemm/f32-gemm-8x12-neon.c", 24),          # 8 rows x 3 vectors
    ("f32-igemm/f32-igemm-8x12-neon.c", 24),
    ("f32-gspc/f32-gspc-o8-neon.c", 24),            # 12-pixel blocks x 2 vectors
    ("f32-gspc/f32-gspc-o4-neon.c", 22),            # 22-pixel blocks x 1 vector
    ("q8-gemm/q8-gemm-4x8-neon-mlal.c", 16),        # 4 rows x 8 pixels, two k4 steps: 16 smlal
    ("f16-gemm/f16-conv1x1-4x16-neonfp16arith.c", 8),  # 4 rows x 2 half vectors (aarch64-v82 only)
]


def _inner_loops(asm: str) -> list[list[str]]:
    """Bodies of the innermost loops: a backward branch to a label with no label between them."""
    lines = asm.splitlines()
    at = {m.group(1): i for i, ln in enumerate(lines) if (m := _LABEL.match(ln))}
    loops = []
    for i, ln in enumerate(lines):
        m = _BRANCH.match(ln)
        if m and at.get(m.group(2), i) < i:
            body = lines[at[m.group(2)] + 1:i + 1]
            if not any(_LABEL.match(x) for x in body):
                loops.append(body)
    return loops


@pytest.mark.parametrize("target", ["aarch64-neon", "aarch64-v82"])
@pytest.mark.parametrize("src,macs", TILES, ids=[Path(s).stem for s, _ in TILES])
def test_inner_loops_keep_accumulators_in_registers(target, src, macs, tmp_path):
    t = get_target(target)
    if "fp16arith" in src and "fp16" not in t.features:
        pytest.skip(f"{target} has no fp16 arithmetic")
    if shutil.which(t.cc) is None:
        pytest.skip(f"{t.cc} is not installed")
    rt = runtime_root()
    flags = [*t.cflags, *t.cflags_probe]
    asm = tmp_path / "k.s"
    incs = [f"-I{rt}", f"-I{rt / 'f32-gemm'}", f"-I{rt / 'f16-gemm'}"]
    r = subprocess.run([t.cc, "-std=c11", "-O3", *flags, "-S", *incs, "-o", str(asm), str(rt / src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    loops = [b for b in _inner_loops(asm.read_text()) if sum(1 for x in b if _MAC.search(x)) == macs]
    assert loops, f"no inner loop with {macs} MAC instructions in {src}"
    for body in loops:
        spills = [x.strip() for x in body if "[sp" in x]
        assert not spills, f"{src} ({target}): stack accesses in a {macs}-MAC inner loop: {spills[:4]}"


def test_makefile_passes_the_probe_flags_only_where_taken(tmp_path):
    from edgec.codegen import compile_model
    from test_f32_emitters import G

    g = G()
    g.out(g.conv(g.input("x", [1, 4, 8, 8]), 4, 8, 3, pads=[1, 1, 1, 1]))
    model = g.save(tmp_path / "c.onnx")
    arm = compile_model(model, tmp_path / "arm", target="aarch64-neon")
    x86 = compile_model(model, tmp_path / "x86", target="x86_64-avx2")
    assert "-fno-schedule-insns" not in (x86.dir / "Makefile").read_text()

    def compile_lines(cc: str) -> str:
        out = subprocess.run(["make", "-n", "-B", "-C", str(arm.dir), f"CC={cc}"], capture_output=True, text=True)
        return "\n".join(ln for ln in out.stdout.splitlines() if " -c " in ln)

    if shutil.which("aarch64-linux-gnu-gcc") is None:
        pytest.skip("aarch64-linux-gnu-gcc is not installed")
    assert "-fno-schedule-insns" in compile_lines("aarch64-linux-gnu-gcc")
    # a compiler that takes no such option (`false` fails every probe) builds without it
    lines = compile_lines("false")
    assert lines and "-fno-schedule-insns" not in lines
