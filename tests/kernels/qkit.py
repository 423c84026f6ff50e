"""Build and run the small C test programs of the int8 / sparse / fp16 kernels, natively or under qemu."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from edgec.runtime_c import root as runtime_root

CDIR = Path(__file__).with_name("c")
WFLAGS = ["-O2", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra", "-Werror"]


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@dataclass(frozen=True)
class Isa:
    name: str
    cc: str
    cflags: tuple
    run: tuple          # prefix to run a binary (qemu) or ()
    needs: tuple = ()   # /proc/cpuinfo flags for native runs

    def skip_reason(self) -> str | None:
        if shutil.which(self.cc) is None:
            return f"{self.cc} not installed"
        if self.run and shutil.which(self.run[0]) is None:
            return f"{self.run[0]} not installed"
        missing = [f for f in self.needs if f not in cpu_flags()]
        return f"this CPU lacks {', '.join(missing)}" if missing else None


A72 = ("qemu-aarch64", "-cpu", "cortex-a72")
ISAS = {
    "scalar": Isa("scalar", "gcc", (), ()),
    "avx2": Isa("avx2", "gcc", ("-mavx2", "-mfma", "-mf16c"), (), ("avx2", "fma", "f16c")),
    "avx512vnni": Isa("avx512vnni", "gcc", ("-mavx2", "-mfma", "-mavx512f", "-mavx512bw", "-mavx512vl",
                                            "-mavx512vnni"), (), ("avx512f", "avx512bw", "avx512vl", "avx512_vnni")),
    "avx512": Isa("avx512", "gcc", ("-mavx2", "-mfma", "-mavx512f", "-mavx512bw", "-mavx512vl"), (),
                  ("avx512f", "avx512bw", "avx512vl")),
    "avx512vbmi": Isa("avx512vbmi", "gcc", ("-mavx512f", "-mavx512bw", "-mavx512vbmi"), (),
                      ("avx512f", "avx512bw", "avx512vbmi")),
    "neon": Isa("neon", "aarch64-linux-gnu-gcc", ("-mcpu=cortex-a72", "-static"), A72),
    "neon-v82": Isa("neon-v82", "aarch64-linux-gnu-gcc", ("-march=armv8.2-a+dotprod+fp16", "-static"),
                    ("qemu-aarch64", "-cpu", "max")),
    "armv7-neon": Isa("armv7-neon", "arm-linux-gnueabihf-gcc",
                      ("-mcpu=cortex-a72", "-mfpu=neon-fp-armv8", "-mfloat-abi=hard", "-static"), ("qemu-arm",)),
}
SANITIZE = ("-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer")


def exact_int8(model, feeds: dict) -> list:
    """The int8 oracle (edgec verify's): the model's exact QDQ arithmetic, QOperator ops rewritten to
    DequantizeLinear -> float op -> QuantizeLinear, onnxruntime with graph optimizations off. Not
    onnxruntime's optimized int8 kernels: those differ between CPUs (u8 x s8 saturation without VNNI)."""
    from edgec.codegen.verifier import exact_int8_model, onnxruntime_outputs

    m, left = exact_int8_model(model)
    assert not left, f"no exact form for {left}"
    return onnxruntime_outputs(Path("test.onnx"), feeds, optimize=False, model=m)[1]


def require(isa: Isa) -> None:
    reason = isa.skip_reason()
    if reason:
        pytest.skip(reason)


def build(isa: Isa, out: Path, sources: list[str], defines: dict[str, str] | None = None,
          extra: tuple = ()) -> Path:
    """Compile test sources (tests/kernels/c/*) + runtime files (relative to runtime_c/) warning-free."""
    rt = runtime_root()
    srcs = [str(CDIR / s) if (CDIR / s).exists() else str(rt / s) for s in sources]
    defs = [f"-D{k}={v}" for k, v in (defines or {}).items()]
    cmd = [isa.cc, *WFLAGS, *isa.cflags, *extra, f"-I{rt}", *defs, *srcs, "-o", str(out), "-lm", "-pthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    return out


def run(isa: Isa, exe: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*isa.run, str(exe), *args], capture_output=True, text=True, timeout=timeout)
