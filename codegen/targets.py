"""Compilation targets, read from targets.yaml; `native` picks one from /proc/cpuinfo."""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass
from pathlib import Path

import yaml

from edgec.errors import EdgecError

_YAML = Path(__file__).with_name("targets.yaml")


@dataclass(frozen=True)
class Target:
    name: str
    arch: str          # x86_64 | aarch64 | armv7 | any
    isa: str           # scalar | avx2 | avx512 | neon | neon-v82
    features: tuple
    f32_lanes: int
    vector_regs: int
    cc: str
    cflags: tuple
    qemu: tuple | None
    l1d_bytes: int
    l2_bytes: int
    pool_job_us: float = 5.0          # handing one job to the thread pool (codegen/ops/_par.py)
    f32_macs_per_us: float = 1000.0   # one core, small layers: the work a split must outweigh
    f32_floats_per_us: float = 500.0
    q8_macs_per_us: float = 0.0       # int8 layers' rate; 0: f32_macs_per_us
    # the layout estimate's constants (costmodel.LAYOUT_KEYS -> ns), as (key, value) pairs: a Target stays hashable
    layout_cost: tuple = ()
    cflags_probe: tuple = ()          # passed by the Makefile only where the compiler takes them

    def layout_value(self, key: str) -> float:
        """This target's layout_cost entry `key` (targets.yaml)."""
        for k, v in self.layout_cost:
            if k == key:
                return v
        raise EdgecError(f"target {self.name}: codegen/targets.yaml gives no layout_cost {key}")

    def runs_natively(self) -> bool:
        """True when binaries for this target run on this machine without qemu."""
        host = _host_arch()
        if self.arch == "any":
            return True
        if self.arch != host:
            return False
        flags = _cpu_flags()
        if host == "x86_64":
            return all(f.replace(".", "_") in flags for f in self.features)
        return self.isa != "neon-v82" or {"asimddp", "asimdhp"} <= flags


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, dict]:
    return yaml.safe_load(_YAML.read_text())


def target_names() -> list[str]:
    return ["native", *_table()]


def _host_arch() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64", "armv7l": "armv7", "armv8l": "armv7"}.get(m, m)


@functools.lru_cache(maxsize=1)
def _cpu_flags() -> frozenset[str]:
    flags: set[str] = set()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, val = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(val.split())
    return frozenset(flags)


def detect_native(arch: str | None = None, flags: frozenset[str] | None = None) -> str:
    """Name of the best listed target for a CPU (defaults: this machine)."""
    arch = arch or _host_arch()
    flags = _cpu_flags() if flags is None else flags
    if arch == "x86_64":
        if {"avx512f", "avx512bw", "avx512vl"} <= flags:
            # VNNI + VBMI (Ice Lake, Zen 4 and newer) run int8 on vpdpbusd and table lookups on vpermi2b
            if {"avx512dq", "avx512_vnni", "avx512vbmi"} <= flags:
                # AMX (Sapphire Rapids and newer Xeons): int8 GEMMs on tiles
                return "x86_64-avx512-amx" if {"amx_tile", "amx_int8"} <= flags else "x86_64-avx512-vnni"
            return "x86_64-avx512"
        if "avx2" in flags and "fma" in flags:
            # AVX-VNNI without AVX-512 (Alder Lake, N100): int8 GEMMs on VEX vpdpbusd, 8-bit weights
            return "x86_64-avx2-vnni" if "avx_vnni" in flags else "x86_64-avx2"
        return "generic"
    if arch == "aarch64":
        return "aarch64-v82" if {"asimddp", "asimdhp"} <= flags else "aarch64-neon"
    if arch == "armv7":
        return "armv7-neon" if "neon" in flags else "generic"
    return "generic"


def _parse_size(text: str) -> int | None:
    text = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * mult if digits.isdigit() and int(digits) > 0 else None


@functools.lru_cache(maxsize=1)
def host_caches() -> tuple[int | None, int | None]:
    """(L1 data, L2) bytes of this machine's first core from sysfs, None where it does not say. Blocking is
    sized from these for native builds: the table's per-ISA values are one family's (an AVX2 x86 core has
    256 KB to 1 MB of L2)."""
    l1 = l2 = None
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for d in sorted(base.glob("index*")):
            level, kind = (d / "level").read_text().strip(), (d / "type").read_text().strip()
            size = _parse_size((d / "size").read_text())
            if level == "1" and kind == "Data":
                l1 = size
            elif level == "2" and kind in ("Unified", "Data"):
                l2 = size
    except (OSError, ValueError):
        return None, None
    return l1, l2


def _layout_cost(name: str, d) -> tuple:
    """A target entry's layout_cost map as sorted (key, float) pairs; one line naming the bad entry otherwise."""
    if d is None:
        return ()
    if not isinstance(d, dict):
        raise EdgecError(f"target {name}: layout_cost in codegen/targets.yaml must be a map of name: ns")
    out = []
    for k, v in d.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
            raise EdgecError(f"target {name}: layout_cost {k} in codegen/targets.yaml must be a number >= 0, "
                             f"not {v!r}")
        out.append((str(k), float(v)))
    return tuple(sorted(out))


def get_target(name: str = "native") -> Target:
    """The Target called name; 'native' resolves to the detected one, with this machine's cache sizes."""
    if isinstance(name, Target):
        return name
    table = _table()
    native = name == "native"
    if native:
        name = detect_native()
    if name not in table:
        raise EdgecError(f"unknown target {name!r}; choose one of: {', '.join(target_names())}")
    d = table[name]
    l1, l2 = host_caches() if native else (None, None)
    return Target(name=name, arch=d["arch"], isa=d["isa"], features=tuple(d["features"]),
                  f32_lanes=int(d["f32_lanes"]), vector_regs=int(d["vector_regs"]), cc=d["cc"],
                  cflags=tuple(d["cflags"]),
                  qemu=tuple(d["qemu"]) if d.get("qemu") else None,
                  l1d_bytes=l1 or int(d["l1d_bytes"]), l2_bytes=l2 or int(d["l2_bytes"]),
                  layout_cost=_layout_cost(name, d.get("layout_cost")),
                  cflags_probe=tuple(d.get("cflags_probe") or ()),
                  **{k: float(d[k]) for k in ("pool_job_us", "f32_macs_per_us", "f32_floats_per_us", "q8_macs_per_us") if k in d})
