"""Build and run the small C test programs of the int8 / sparse / fp16 kernels, natively or under qemu."""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
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
    # AVX-VNNI without any AVX-512 flag: what an Alder Lake / N100 build compiles to
    "avxvnni": Isa("avxvnni", "gcc", ("-mavx2", "-mfma", "-mf16c", "-mavxvnni"), (), ("avx2", "fma", "avx_vnni")),
    # AMX-INT8 (Sapphire Rapids and newer Xeons) beside AVX-512 VNNI, as x86_64-avx512-amx builds
    "amx": Isa("amx", "gcc", ("-mavx2", "-mfma", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx512vnni",
                              "-mamx-tile", "-mamx-int8"), (),
               ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "amx_tile", "amx_int8")),
    # as the x86_64-avx512 target builds (every AVX-512 core but Xeon Phi has DQ)
    "avx512": Isa("avx512", "gcc", ("-mavx2", "-mfma", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq"), (),
                  ("avx512f", "avx512bw", "avx512vl", "avx512dq")),
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
    srcs = [CDIR / s if (CDIR / s).exists() else rt / s for s in sources]
    return compile_link(isa.cc, [*WFLAGS, *isa.cflags, *extra, f"-I{rt}", "-pthread"], srcs, out, defines)


# -- one object per source, then a link ------------------------------------------------------------------
# ccache caches only a call that compiles one source (-c); `gcc a.c b.c -o t` runs uncached every time. So each
# source becomes its own object (through ccache) and the test program is linked from them. Within a process,
# an object is made once per (compiler, flags, source, the defines it sees) and reused by later builds: the
# scalar references and the thread pool are compiled once per flag set. The table and its directory belong to
# one process (each pytest-xdist worker has its own); ccache shares the results between processes safely.

_OBJS: dict[tuple, Path] = {}
_OBJDIR: list[Path] = []
_SCANS: dict[tuple, tuple] = {}  # (file, mtime, size) -> (its identifiers, its #include operands)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(.*)$', re.M)
_ALWAYS = re.compile(r"_|NDEBUG$")  # reserved names and NDEBUG can steer system headers: every source gets them


def _objdir() -> Path:
    if not _OBJDIR:
        d = Path(tempfile.mkdtemp(prefix="edgec-kobj-"))
        atexit.register(shutil.rmtree, d, True)
        _OBJDIR.append(d)
    return _OBJDIR[0]


def _words(path: Path, idirs: tuple) -> frozenset | None:
    """Every identifier in path and the quoted/angled headers it includes from its own directory or the -I
    directories (system headers left out); None when an include names a macro, so the closure is unknown."""
    seen: set[Path] = set()
    words: set[str] = set()
    todo = [path]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        st = f.stat()
        key = (f, st.st_mtime_ns, st.st_size)
        if key not in _SCANS:
            text = f.read_text(errors="replace")
            _SCANS[key] = (frozenset(re.findall(r"[A-Za-z_]\w*", text)), [m.strip() for m in _INCLUDE.findall(text)])
        ids, incs = _SCANS[key]
        words |= ids
        for inc in incs:
            if not inc or inc[0] not in "\"<":
                return None
            name = inc[1:].split(inc[0] if inc[0] == '"' else ">")[0]
            dirs = ([f.parent] if inc[0] == '"' else []) + [Path(d) for d in idirs]
            hit = next((d / name for d in dirs if (d / name).is_file()), None)
            if hit is not None:
                todo.append(hit)
            elif inc[0] == '"':
                return None
    return frozenset(words)


def compile_link(cc: str, flags, sources, out: Path, defines: dict | None = None, libs=("-lm",)) -> Path:
    """Build out from sources: each compiled alone with flags (`cc *flags -D.. -c src`), then linked with the
    same flags (sanitizers, -static, -shared reach the link) and libs. A define is passed to every source whose
    text or included headers name it (the preprocessed result of the others does not depend on it), so an
    object of a runtime file is shared by tests that differ only in their test program's defines."""
    flags = [str(f) for f in flags]
    idirs = tuple(f[2:] for f in flags if f.startswith("-I"))
    defs = {str(k): str(v) for k, v in (defines or {}).items()}
    objs = []
    for src in map(Path, sources):
        words = _words(src, idirs)
        d = [f"-D{k}={v}" for k, v in sorted(defs.items()) if words is None or k in words or _ALWAYS.match(k)]
        st = src.stat()
        key = (cc, *flags, str(src), st.st_mtime_ns, st.st_size, *d)
        if key not in _OBJS:
            obj = _objdir() / f"{len(_OBJS)}-{src.stem}.o"
            tmp = obj.with_suffix(f".{os.getpid()}.tmp")
            _run([cc, *flags, *d, "-c", str(src), "-o", str(tmp)])
            os.replace(tmp, obj)
            _OBJS[key] = obj
        objs.append(str(_OBJS[key]))
    _run([cc, *flags, *objs, "-o", str(out), *libs])
    return out


# one-ISA kernel tests built for a code-generation target (tests/kernels/c/test_<family>.c with ktest.h)
TARGET_WFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror"]
SAN = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


def build_for_target(target: str, isa: str, lanes: int, c_test: Path, family: str, out: Path, opt=("-O2",),
                     rt: Path | None = None) -> list[str] | None:
    """Compile c_test with the family's scalar reference, its `isa` file and the thread pool for a target
    (family: "f32-nchwc/f32-nchwc" -> f32-nchwc-scalar.c, f32-nchwc-<isa>.c). Returns the command prefix that
    runs it (qemu for Arm), or None when this machine cannot run it (built all the same: the code stays -Werror
    clean). Skips when the target's compiler or emulator is missing."""
    from edgec.codegen.targets import get_target

    t = get_target(target)
    cc = t.cc if t.arch != "x86_64" else "gcc"
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed")
    if t.qemu and shutil.which(t.qemu[0]) is None:
        pytest.skip(f"{t.qemu[0]} is not installed")
    rt = rt or runtime_root()
    srcs = [c_test, rt / f"{family}-scalar.c", rt / f"{family}-{isa}.c", rt / "ec_threadpool.c"]
    compile_link(cc, [*opt, *TARGET_WFLAGS, *t.cflags, *(["-static"] if t.qemu else []), f"-I{rt}"], srcs, out,
                 {"ISA": isa, "LANES": lanes}, ["-lm", "-lpthread"])
    if not t.qemu and not t.runs_natively():
        return None
    return [*(t.qemu or []), str(out)]


def stable_source(text: str, suffix: str = ".c") -> Path:
    """A generated C file at a path fixed by its content: ccache hashes the source's path, so a driver written
    into each test's tmp_path would be compiled anew by every run."""
    d = Path(tempfile.gettempdir()) / f"edgec-test-src-{os.getuid()}"
    d.mkdir(exist_ok=True)
    path = d / (hashlib.sha256(text.encode()).hexdigest()[:24] + suffix)
    if not path.exists():
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return path


def _run(cmd: list[str]) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, " ".join(cmd) + "\n" + r.stderr


def run(isa: Isa, exe: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*isa.run, str(exe), *args], capture_output=True, text=True, timeout=timeout)
