"""What a board really is and what state it is in, read with one shell script.

`probe()` backs `edgec devices check`: architecture, CPU model and features from
/proc/cpuinfo, cores, memory, compiler, governor/frequency, temperature and
`vcgencmd get_throttled` (Raspberry Pi firmware), compared with the profile.
`state()` is the cheap subset bench records before and after the runs.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from edgec.devices.inventory import Device
from edgec.devices.transport import Transport
from edgec.errors import EdgecError

# Arm "CPU part" ids of the cores our profiles name (ARM Ltd, implementer 0x41).
ARM_PARTS = {"0xd03": "Cortex-A53", "0xd04": "Cortex-A35", "0xd05": "Cortex-A55", "0xd07": "Cortex-A57",
             "0xd08": "Cortex-A72", "0xd09": "Cortex-A73", "0xd0a": "Cortex-A75", "0xd0b": "Cortex-A76",
             "0xd0c": "Neoverse-N1", "0xd0d": "Cortex-A77", "0xd41": "Cortex-A78", "0xd46": "Cortex-A510",
             "0xd47": "Cortex-A710", "0xd4f": "Neoverse-V2", "0xc07": "Cortex-A7", "0xc0f": "Cortex-A15"}

CPUFREQ = "/sys/devices/system/cpu/cpu0/cpufreq"
ARCH_ALIAS = {"arm64": "aarch64", "amd64": "x86_64", "armv7l": "armv7", "armv8l": "armv7"}

STATE_SCRIPT = f"""
echo "@governor=$(cat {CPUFREQ}/scaling_governor 2>/dev/null)"
echo "@freq_khz=$(cat {CPUFREQ}/scaling_cur_freq 2>/dev/null)"
echo "@max_freq_khz=$(cat {CPUFREQ}/cpuinfo_max_freq 2>/dev/null)"
echo "@temp_milli_c=$(cat /sys/class/thermal/thermal_zone0/temp 2>/dev/null)"
echo "@loadavg=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "@throttled=$(vcgencmd get_throttled 2>/dev/null | cut -d= -f2)"
echo "@cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc 2>/dev/null)"
"""


def _probe_script(cc: str) -> str:
    return STATE_SCRIPT + f"""
echo "@arch=$(uname -m)"
echo "@kernel=$(uname -sr)"
echo "@mem_kb=$(awk '/^MemTotal/ {{print $2}}' /proc/meminfo 2>/dev/null)"
echo "@cc=$(command -v {shlex.quote(cc)} 2>/dev/null)"
echo "@cc_version=$({shlex.quote(cc)} -dumpfullversion -dumpversion 2>/dev/null | head -n1)"
echo "@make=$(command -v make 2>/dev/null)"
echo "@python_ort=$(python3 -c 'import onnxruntime; print(onnxruntime.__version__)' 2>/dev/null)"
echo "@userland_bits=$(getconf LONG_BIT 2>/dev/null)"
echo "@os=$( (. /etc/os-release && printf %s "$PRETTY_NAME") 2>/dev/null)"
echo "@cpuinfo"
cat /proc/cpuinfo 2>/dev/null
"""


def _fields(text: str) -> tuple[dict[str, str], str]:
    vals = {}
    head, sep, tail = text.partition("@cpuinfo\n")
    for line in head.splitlines():
        if line.startswith("@") and "=" in line:
            k, _, v = line[1:].partition("=")
            vals[k] = v.strip()
    return vals, tail if sep else ""


def _num(s: str | None, kind=float):
    try:
        return kind(s)
    except (TypeError, ValueError):
        return None


def state(t: Transport) -> dict:
    """Governor, frequency, temperature, throttling flags, load average, cores (None when unknown)."""
    vals, _ = _fields(t.run(STATE_SCRIPT, timeout=30).out)
    return _state_from(vals)


def _state_from(vals: dict) -> dict:
    load = [_num(x) for x in vals.get("loadavg", "").split()]
    temp = _num(vals.get("temp_milli_c"))
    return {
        "governor": vals.get("governor") or None,
        "freq_mhz": _mhz(vals.get("freq_khz")),
        "max_freq_mhz": _mhz(vals.get("max_freq_khz")),
        "temp_c": round(temp / 1000, 1) if temp is not None else None,
        "loadavg_1m": load[0] if load else None,
        "throttled": vals.get("throttled") or None,
        "cores": _num(vals.get("cores"), int),
    }


def _mhz(khz: str | None) -> int | None:
    v = _num(khz)
    return round(v / 1000) if v is not None else None


def parse_cpuinfo(text: str) -> dict:
    """Model, features, core count and Arm part from /proc/cpuinfo (x86 or Arm layout)."""
    keys: dict[str, str] = {}
    processors = 0
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if not sep:
            continue
        k, v = k.strip().lower(), v.strip()
        if k == "processor":
            processors += 1
        keys.setdefault(k, v)
    part = keys.get("cpu part", "").lower() or None
    model = keys.get("model name") or ARM_PARTS.get(part or "") or keys.get("cpu model")
    if model and keys.get("model") and not keys["model"].isdigit():
        model = f"{model} ({keys['model']})"   # e.g. "Cortex-A72 (Raspberry Pi 4 Model B Rev 1.4)"
    feats = (keys.get("flags") or keys.get("features") or "").split()
    return {"cpu": model, "cpu_part": part, "features": feats, "processors": processors or None}


def probe(t: Transport) -> dict:
    """Everything `devices check` shows, plus `warnings` against the device's profile."""
    d = t.device
    vals, cpuinfo = _fields(t.run(_probe_script(d.cc), timeout=60).out)
    info = parse_cpuinfo(cpuinfo)
    rec = {
        "device": d.name, "profile": d.profile, "address": d.address, "emulated": d.emulated,
        "arch": vals.get("arch") or None, "kernel": vals.get("kernel") or None,
        "cpu": info["cpu"], "cpu_part": info["cpu_part"], "features": info["features"],
        "mem_mb": round(_num(vals.get("mem_kb")) / 1024) if _num(vals.get("mem_kb")) else None,
        "cc": vals.get("cc") or None, "cc_version": vals.get("cc_version") or None,
        "make": vals.get("make") or None, "onnxruntime": vals.get("python_ort") or None,
        "userland_bits": _num(vals.get("userland_bits"), int), "os": vals.get("os") or None,
    }
    rec.update(_state_from(vals))
    rec["cores"] = rec["cores"] or info["processors"]
    rec["warnings"] = compare(d, rec)
    return rec


def choose_profile(rec: dict) -> tuple[str, str]:
    """The built-in profile that fits a probed board, and why: architecture and userland (a 64-bit kernel
    may run a 32-bit OS), then the Arm core (CPU part) or the SIMD features the profiles' targets need."""
    from edgec.devices.inventory import _builtin_profiles

    arch, feats = ARCH_ALIAS.get(rec.get("arch"), rec.get("arch")), set(rec.get("features") or [])
    if arch == "armv7" or (arch == "aarch64" and rec.get("userland_bits") == 32):
        if arch == "aarch64" or "neon" in feats:
            return "pi-armv7", "32-bit Arm userland with NEON"
    elif arch == "aarch64":
        for name, prof in sorted(_builtin_profiles().items()):
            if (prof.get("arch") == "aarch64" and prof.get("cpu_part") and prof["cpu_part"] == rec.get("cpu_part")
                    and set(prof.get("features") or []) <= feats):
                return name, f"{prof.get('cpu')} (CPU part {rec['cpu_part']})"
        if {"asimddp", "asimdhp"} <= feats:
            return "pi5", "ARMv8.2 with dotprod and fp16 (no profile for this core; the closest)"
        return "pi4", "ARMv8.0 NEON (no profile for this core; the closest)"
    elif arch == "x86_64" and {"avx2", "fma", "avx_vnni"} <= feats and "avx512f" not in feats:
        return "x86-avxvnni", "x86-64 with AVX2, FMA and AVX-VNNI"
    elif arch == "x86_64" and {"avx2", "fma"} <= feats:
        return "x86-avx2", "x86-64 with AVX2 and FMA"
    raise EdgecError(f"no built-in profile fits {rec.get('device')}: {rec.get('arch') or 'unknown architecture'}"
                     f"{', ' + rec['cpu'] if rec.get('cpu') else ''}; add it with `edgec devices add "
                     f"{rec.get('device')} --host HOST --profile PROFILE` and choose the closest")


def adopt_profile(t: Transport) -> str:
    """Probe a board known only from ~/.ssh/config, give its device the fitting profile (the inventory is not
    touched) and return one line saying which and why."""
    import dataclasses

    from edgec.devices.inventory import device_from_profile

    d = t.device
    rec = probe(t)
    name, why = choose_profile(rec)
    chosen = device_from_profile(d.name, name, host=d.host, port=d.port, user=d.user,
                                 identity_file=d.identity_file, timeout=d.timeout)
    for f in dataclasses.fields(chosen):  # the caller's Device object: later steps see the profile
        setattr(d, f.name, getattr(chosen, f.name))
    about = ", ".join(x for x in (rec.get("arch"), rec.get("cpu"), rec.get("os")) if x)
    return (f"{d.name} (from {_ssh_config_name()}, not in the inventory): {about}: profile {name}, "
            f"target {chosen.target} ({why}); to keep it: edgec devices add {d.name} --host {d.host}")


def _ssh_config_name() -> str:
    from edgec.devices.inventory import ssh_config_path

    return str(ssh_config_path()).replace(str(Path.home()), "~", 1)


def compare(d: Device, rec: dict) -> list[str]:
    """Where the board disagrees with its profile, each with what it means."""
    w = []
    if d.emulated:
        w.append(f"emulated: binaries run through `{' '.join(d.exec_wrapper)}` on a {rec['arch']} host; "
                 f"CPU facts below are the host's and times are emulator times")
        return w + _state_warnings(rec)
    if d.arch and rec["arch"] and not _same_arch(d.arch, rec["arch"]):
        w.append(f"architecture is {rec['arch']} but profile {d.profile} expects {d.arch}: choose another profile")
    if d.cpu_part and rec["cpu_part"] and rec["cpu_part"] != d.cpu_part.lower():
        w.append(f"CPU is {rec['cpu']} but profile {d.profile} is tuned for {d.cpu}: code runs, tuning may be off")
    missing = [f for f in d.features if rec["features"] and f not in rec["features"]]
    if missing:
        w.append(f"CPU lacks {', '.join(missing)} required by profile {d.profile} (target {d.target}): "
                 f"binaries would crash with SIGILL; choose a lower profile")
    if d.cores and rec["cores"] and rec["cores"] != d.cores:
        w.append(f"{rec['cores']} cores online, profile {d.profile} expects {d.cores}")
    if not rec["cc"]:
        w.append(f"no C compiler `{d.cc}` on the board: deploy with --build cross, or install build-essential")
    return w + _state_warnings(rec)


def _same_arch(want: str, got: str) -> bool:
    return ARCH_ALIAS.get(got, got) == ARCH_ALIAS.get(want, want)


def _state_warnings(rec: dict) -> list[str]:
    w = []
    if rec.get("throttled") and rec["throttled"] not in ("0x0", "0"):
        w.append(f"firmware reports throttling {rec['throttled']} (under-voltage or overheating): "
                 f"use the official power supply and a heatsink/fan")
    if rec.get("governor") and rec["governor"] != "performance":
        w.append(f"CPU governor is {rec['governor']}: for stable timings run "
                 f"`echo performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor`")
    if rec.get("temp_c") and rec["temp_c"] >= 80:
        w.append(f"temperature {rec['temp_c']} C: the board may throttle; add cooling")
    return w


def describe_governor(rec: dict) -> str:
    parts = []
    if rec.get("governor"):
        parts.append(rec["governor"])
    if rec.get("freq_mhz"):
        parts.append(f"{rec['freq_mhz']} MHz" + (f" / {rec['max_freq_mhz']} max" if rec.get("max_freq_mhz") else ""))
    return ", ".join(parts) or "unknown"

