"""Put a compiled model on a board and run it: compile -> build -> upload -> run.

Transport-agnostic: everything goes through Transport, so `local` and SSH
boards take the same path. Build modes:
  cross      make here with the profile's cross compiler (-static), upload the binaries
  on-device  upload the C project, run make on the board with its own compiler
  native     the `local` device: make here, copy the binaries into its workdir
Default: cross when the cross compiler is on PATH, else on-device.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from edgec import __version__
from edgec.codegen.options import CompileOptions
from edgec.devices.inventory import Device
from edgec.devices.transport import Transport, last_line
from edgec.devices.upload import Manifest, upload
from edgec.errors import EdgecError
from edgec.files import cache_lock, write_text_atomic

BINARIES = ("runner", "bench")
SKIP_SUFFIXES = (".o", ".d", ".a", ".tmp")

# progress(stage, detail, advance_bytes): stages compile, build, upload, run
Progress = Callable[[str, str, int], None]


@dataclass
class Deployment:
    device: Device
    transport: Transport
    dir: str                      # remote directory holding runner and bench
    mode: str                     # cross | on-device | native
    model: Path | None            # the ONNX model when known (for checks and --compare-ort)
    project: Path                 # local C project
    input_shapes: dict | None = None
    binary_bytes: int = 0
    sent_bytes: int = 0
    build_info: dict = field(default_factory=dict)

    def command(self, binary: str, *args) -> str:
        """Shell command running one of the deployed programs (through the device's emulator if any)."""
        argv = [*self.device.exec_wrapper, f"./{binary}", *map(str, args)]
        return f"cd {shlex.quote(self.dir)} && {shlex.join(argv)}"


# Concurrent deploys (several --device) of one model/target share a local build: one at a time.
_LOCKS: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)


def cache_dir() -> Path:
    if os.environ.get("EDGEC_CACHE_DIR"):
        return Path(os.environ["EDGEC_CACHE_DIR"]).expanduser()
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root).expanduser() / "edgec"


def _key(*parts) -> str:
    return hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _codegen_fingerprint() -> str:
    """Changes whenever the code generator or the C runtime does, so a cached project never goes stale."""
    import edgec.codegen
    from edgec.runtime_c import root as runtime_root

    h = hashlib.sha256()
    for top in (Path(edgec.codegen.__file__).parent, runtime_root()):
        for p in sorted(top.rglob("*")):
            if p.is_file() and p.suffix in (".py", ".c", ".h", ".S", ".yaml", ".mk"):
                h.update(p.relative_to(top).as_posix().encode())
                h.update(p.read_bytes())
    return h.hexdigest()[:16]


def compile_options(device: Device, threads: int, options: CompileOptions | None) -> CompileOptions:
    """The options a device's build uses: the given ones (else the environment's) at its target."""
    return (options or CompileOptions.from_env()).with_(target=device.target, threads=threads)


def prepare_project(source: Path, device: Device, *, threads: int = 1, profile: bool = True,
                    input_shapes: dict | None = None, model: Path | None = None,
                    options: CompileOptions | None = None) -> tuple[Path, Path | None]:
    """MODEL.onnx -> a generated C project for the device's target (cached by everything that shapes the
    code: model, input shapes, profiling, compile options, edgec's code generator); BUILD_DIR -> itself."""
    source = Path(source)
    if source.is_dir():
        if not (source / "Makefile").is_file():
            raise EdgecError(f"{source} is not an edgec build folder (no Makefile); pass the .onnx model instead")
        _check_target(source, device)
        recorded = _recorded_model(source)
        return source, Path(model) if model else recorded
    if not source.is_file():
        raise EdgecError(f"{source} does not exist")
    try:
        from edgec.codegen import compile_model
    except ImportError as e:  # pragma: no cover - packaging problem
        raise EdgecError(f"the code generator is not available: {e}") from None
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    opts = compile_options(device, threads, options)
    settings = opts.cache_key()  # "native" resolves per CPU; a tuning database by its content
    target = settings["target"]
    key = _key(sha, input_shapes, profile, json.dumps(settings, sort_keys=True), __version__, _codegen_fingerprint())
    # The model's file name only labels the folder (the key makes it unique): tame characters, bounded length.
    out = cache_dir() / "builds" / f"{re.sub(r'[^A-Za-z0-9._-]', '_', source.stem)[:48]}-{target}-{key}"
    stamp = out / ".edgec-source.json"
    # One compile at a time: the code generator is not thread-safe (and is CPU-bound Python anyway).
    with _LOCKS["compile"], cache_lock(out):
        if not (stamp.is_file() and json.loads(stamp.read_text()).get("sha256") == sha):
            out.mkdir(parents=True, exist_ok=True)
            b = compile_model(source, out, input_shapes=input_shapes, build=False, profile=profile, options=opts)
            write_text_atomic(stamp, json.dumps({"model": str(source.resolve()), "sha256": sha,
                                                 "options": settings, "layers": b.layers}))
    return out, source


def _check_target(project: Path, device: Device) -> None:
    """A build folder made for another architecture would fail deep inside make: say so first."""
    m = re.search(r"for target (\S+?)\.?$", (project / "Makefile").read_text()[:400], re.M)
    if not m:
        return
    from edgec.codegen.targets import get_target
    try:
        have, want = get_target(m.group(1)), get_target(device.target)
    except EdgecError:
        return
    if "any" not in (have.arch, want.arch) and have.arch != want.arch:
        raise EdgecError(f"{project} was compiled for {have.name} ({have.arch}) but {device.name} needs "
                         f"{want.name}: compile with --target {want.name} or pass the .onnx model")


def _recorded_model(project: Path) -> Path | None:
    stamp = project / ".edgec-source.json"
    if stamp.is_file():
        p = Path(json.loads(stamp.read_text()).get("model", ""))
        return p if p.is_file() else None
    return None


def choose_mode(device: Device, requested: str = "auto") -> str:
    if requested not in ("auto", "cross", "on-device"):
        raise EdgecError(f"--build must be cross or on-device, got {requested!r}")
    cc = cross_compiler(device)
    if requested == "cross" and cc is None:
        pkg = "gcc-" + (device.cross_cc or "?").removesuffix("-gcc")
        raise EdgecError(f"cross compiler {device.cross_cc} for {device.name} not found: install it "
                         f"(apt-get install {pkg}) or use --build on-device")
    if requested == "auto":
        requested = "cross" if cc else "on-device"
    if requested == "on-device" and device.emulated and device.cc == "cc":
        raise EdgecError(f"{device.name} is emulated: its `cc` builds host binaries; use --build cross "
                         f"(install {device.cross_cc}) or set the device's cc to a cross compiler")
    if requested == "cross" and device.transport == "local" and not device.exec_wrapper:
        return "native"  # same machine: an ordinary build, binaries copied into the workdir
    return requested


def cross_compiler(device: Device) -> str | None:
    if device.transport == "local" and not device.exec_wrapper:
        return shutil.which(device.cc) and device.cc
    return device.cross_cc if device.cross_cc and shutil.which(device.cross_cc) else None


def build_local(project: Path, device: Device, profile: bool, jobs: int = 1) -> dict[str, Path]:
    """make in a private copy of the project, so builds for different compilers never mix (jobs: make -j)."""
    cc = cross_compiler(device)
    if shutil.which("make") is None:
        raise EdgecError("make is not installed here: apt-get install make (or deploy with --build on-device)")
    ldflags = " ".join(device.ldflags)
    work = cache_dir() / "cross" / _key(project.resolve(), cc, ldflags, profile)
    with cache_lock(work):
        return _make_copy(project, work, device, cc, ldflags, profile, jobs)


def _make_copy(project: Path, work: Path, device: Device, cc: str, ldflags: str, profile: bool,
               jobs: int = 1) -> dict[str, Path]:
    for src in _project_files(project):
        dst = work / src.relative_to(project)
        if not dst.exists() or dst.stat().st_mtime != src.stat().st_mtime or dst.stat().st_size != src.stat().st_size:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    args = ["make", f"-j{max(1, int(jobs))}", "-C", str(work), f"CC={cc}"] + (["PROFILE=1"] if profile else [])
    if ldflags:
        args.append(f"LDFLAGS={ldflags}")
    objs, own = _runtime_objects(work, cc, profile), _tune_objects(work, cc)
    fetch_objects(objs)
    fetch_objects(own, TUNE_OBJECT_STATS)
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        errs = [ln for ln in proc.stderr.splitlines() if "error" in ln.lower() or "undefined reference" in ln] or \
            [last_line(proc.stderr)]  # a link error's cause comes before collect2's "error" line
        raise EdgecError(f"building for {device.name} with {cc} failed: {errs[0][:300]}")
    store_objects(objs)
    store_objects(own, TUNE_OBJECT_STATS)
    return {b: work / b for b in BINARIES}


# -- compiled runtime kernels, shared by every local build ----------------------------------------------
# A runtime kernel's object depends on its source and the headers it includes, the compile flags and the
# compiler, nothing of the model: cached under a hash of those (cache_dir()/objects), so a build in a new
# folder (another model, a tune's program, a new code generator with the same kernels) reuses every kernel
# compiled before with the same compiler and flags instead of compiling it again.

OBJECT_STATS = {"hits": 0, "stored": 0}  # since the process started (tests, benchmarks)
# A tune program's own objects (devices/tune.py): its candidate units (tune_unit<k>.c, each including its candidates'
# generated files) and its harness (tune.c, tune_cands.c) are cached the same way, so a search that builds the same
# candidates again (a re-tune, a layer the budget interrupted, another device with the same toolchain) compiles none.
TUNE_OBJECT_STATS = {"hits": 0, "stored": 0}
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


@functools.lru_cache(maxsize=16)
def _compiler_id(cc: str, _stamp: tuple) -> str:
    """The compiler's resolved path and what it says of its version and target."""
    path = shutil.which(cc) or cc
    out = []
    for flag in ("--version", "-dumpmachine"):
        try:
            out.append(subprocess.run([path, flag], capture_output=True, text=True, timeout=60).stdout)
        except (OSError, subprocess.SubprocessError):
            out.append("?")
    return json.dumps([os.path.realpath(path), *out])


def compiler_id(cc: str) -> str:
    path = os.path.realpath(shutil.which(cc) or cc)
    try:
        st = os.stat(path)
        stamp = (path, st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = (path, 0, 0)
    return _compiler_id(cc, stamp)


def _sources_hash(work: Path, rel: str) -> tuple[str, bool]:
    """The source file and every header it includes, transitively (as the Makefile's -I. -Iruntime find them);
    and whether any of them reads EC_PROFILE (the one macro a profiling build adds)."""
    h, seen, todo, prof = hashlib.sha256(), set(), [work / rel], False
    while todo:
        p = todo.pop()
        if p in seen or not p.is_file():
            continue
        seen.add(p)
        data = p.read_bytes()
        prof = prof or b"EC_PROFILE" in data
        h.update(str(p.relative_to(work)).encode() + b"\0" + hashlib.sha256(data).digest())
        for inc in _INCLUDE.findall(data.decode("utf-8", "replace")):
            for d in (p.parent, work, work / "runtime"):
                if (d / inc).is_file():
                    todo.append(Path(os.path.normpath(d / inc)))
                    break
    return h.hexdigest(), prof


def object_key(work: Path, rel: str, cc: str, profile: bool) -> str:
    """Cache key of runtime source rel's object in the project copy `work`: its sources, the Makefile's
    compiler settings (codegen/printer.py _make_flags: flags, architecture, the compiler probe), the make
    variables the environment can override, profiling where the sources read EC_PROFILE (none do today:
    a profiling deploy and a tune program share the kernels), and the compiler."""
    mk = (work / "Makefile").read_text()
    a = mk.find("ifeq ($(origin CC)")
    b = mk.find("EC_CFLAGS += $(EC_IPA_FIX)\n", max(a, 0))
    flags = mk[a:b] if 0 <= a < b else mk  # an unknown layout: the whole Makefile
    env = {k: os.environ.get(k) for k in ("CFLAGS", "ARCH_FLAGS", "EC_CFLAGS", "CPPFLAGS", "MAKEFLAGS")}
    src, reads_profile = _sources_hash(work, rel)
    return _key(src, flags, json.dumps(env, sort_keys=True), profile and reads_profile, compiler_id(cc)) + \
        hashlib.sha256(rel.encode()).hexdigest()[:8]


def _runtime_objects(work: Path, cc: str, profile: bool) -> list[tuple[Path, str, Path]]:
    """(object in the build copy, its key, its cache file) of every runtime source the Makefile compiles."""
    mk = (work / "Makefile").read_text()
    m = re.search(r"^OBJDIR = (.*)$", mk, re.M)
    if not m:
        return []
    objdir = work / "obj" / (Path(cc).name + ("-prof" if profile and "-prof" in m.group(1) else ""))
    store = cache_dir() / "objects"
    out = []
    for rel in dict.fromkeys(re.findall(r"\bruntime/\S+?\.c\b", mk[:mk.find("\nOBJS")])):
        if (work / rel).is_file():
            key = object_key(work, rel, cc, profile)
            out.append((objdir / (rel[:-2] + ".o"), key, store / key[:2] / f"{key}.o"))
    return out


def _tune_objects(work: Path, cc: str) -> list[tuple[Path, str, Path]]:
    """(object, key, cache file) of a tune program's candidate units and harness; none in other projects."""
    mk = (work / "Makefile").read_text()
    if not re.search(r"^tune: ", mk, re.M):
        return []
    store, objdir = cache_dir() / "objects" / "tune", work / "obj" / Path(cc).name  # apart from the kernels'
    out = []
    for rel in ["tune.c", *dict.fromkeys(re.findall(r"\b(?:tune_unit\d+|tune_cands)\.c\b", mk))]:
        if (work / rel).is_file():
            key = object_key(work, rel, cc, False)
            out.append((objdir / (rel[:-2] + ".o"), key, store / key[:2] / f"{key}.o"))
    return out


def fetch_objects(objs: list[tuple[Path, str, Path]], stats: dict = OBJECT_STATS) -> None:
    """Before make: each runtime object of the build copy that was not built from exactly these sources,
    flags and compiler (its .key file says what it was built from) comes from the cache, or is removed
    so that make compiles it."""
    for obj, key, cached in objs:
        stamp = obj.with_name(obj.name + ".key")
        if obj.is_file() and stamp.is_file() and stamp.read_text() == key:
            continue
        obj.unlink(missing_ok=True)
        stamp.unlink(missing_ok=True)
        if not cached.is_file():
            continue
        obj.parent.mkdir(parents=True, exist_ok=True)
        tmp = obj.with_name(obj.name + ".tmp")
        shutil.copyfile(cached, tmp)  # a fresh time: newer than the sources, so make keeps it
        os.replace(tmp, obj)
        stamp.write_text(key)
        stats["hits"] += 1


def store_objects(objs: list[tuple[Path, str, Path]], stats: dict = OBJECT_STATS) -> None:
    """After make: the objects it compiled into the cache (content-addressed: never rewritten; atomic)."""
    for obj, key, cached in objs:
        if not obj.is_file():
            continue
        obj.with_name(obj.name + ".key").write_text(key)
        if cached.is_file():
            continue
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
        shutil.copyfile(obj, tmp)
        os.replace(tmp, cached)
        stats["stored"] += 1


def _project_files(project: Path) -> list[Path]:
    out = []
    for p in sorted(project.rglob("*")):
        rel = p.relative_to(project)
        if not p.is_file() or rel.parts[0] in ("obj",) or any(x.startswith(".") for x in rel.parts):
            continue
        if str(rel) in BINARIES or p.suffix in SKIP_SUFFIXES:
            continue
        out.append(p)
    return out


def deploy(source: Path, device: Device, t: Transport, *, mode: str = "auto", threads: int = 1,
           profile: bool = True, input_shapes: dict | None = None, model: Path | None = None,
           progress: Progress | None = None, options: CompileOptions | None = None) -> Deployment:
    """Compile (if given a model), build and upload; returns where the programs are on the board.
    options: kernel overrides and tuning database (target and threads come from the device and `threads`)."""
    progress = progress or (lambda *a: None)
    progress("compile", str(source), 0)
    project, model = prepare_project(source, device, threads=threads, profile=profile,
                                     input_shapes=input_shapes, model=model, options=options)
    mode = choose_mode(device, mode)
    manifest = Manifest()
    if mode in ("cross", "native"):
        progress("build", f"{mode} ({cross_compiler(device)})", 0)
        for name, path in build_local(project, device, profile).items():
            manifest.add(name, path, 0o755)
    else:
        for p in _project_files(project):
            manifest.add(str(p.relative_to(project)), p)
    progress("upload", f"{len(manifest.files)} files, {manifest.total_bytes()} bytes", 0)
    res = upload(t, manifest, lambda ev, name, n: progress("upload", name, n if ev in ("sent", "skip") else 0))
    dep = Deployment(device, t, res.dir, mode, model, project, input_shapes=input_shapes, sent_bytes=res.sent_bytes)
    if mode == "on-device":
        progress("build", f"on {device.name} ({device.cc})", 0)
        build_remote(dep, profile)
    size = t.run(["wc", "-c", f"{res.dir}/bench"], timeout=30).out.split()
    dep.binary_bytes = int(size[0]) if size and size[0].isdigit() else 0
    stamp = project / ".edgec-source.json"
    if stamp.is_file():
        dep.build_info = json.loads(stamp.read_text())
    return dep


def build_remote(dep: Deployment, profile: bool) -> None:
    """make on the board, once per set of make arguments (marker written after success)."""
    t, d = dep.transport, dep.device
    args = ["make", f"-j{d.cores or 2}", f"CC={d.cc}"] + (["PROFILE=1"] if profile else [])
    marker = f"{dep.dir}/.edgec-built-{_key(*args)}"
    if t.run(["test", "-f", marker], timeout=30).ok:
        return
    for tool in (d.cc, "make"):
        if not t.run(f"command -v {shlex.quote(tool)}", timeout=30).ok:
            raise EdgecError(f"no `{tool}` on {d.name}: install the compiler (sudo apt install build-essential) "
                             f"or deploy with --build cross")
    q = shlex.quote
    # Drop binaries linked by an earlier make with other arguments so make relinks them.
    t.check(f"cd {q(dep.dir)} && rm -f runner bench .edgec-built-* && {shlex.join(args)} && touch {q(marker)}",
            "make", timeout=1800)
