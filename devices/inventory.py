"""Boards the user can deploy to: built-in profiles plus the user's inventory.

Profiles (devices/profiles/*.yaml) describe a kind of board: architecture,
codegen target, compiler flags. The inventory names real boards:
~/.config/edgec/devices.yaml (XDG_CONFIG_HOME and EDGEC_CONFIG_DIR honoured)
and the `devices:` section of the project's edgec.yaml, which wins on clashes.

    devices:
      kitchen-pi: {host: 192.168.1.20, user: pi, profile: pi4}
    device_groups:
      pis: [kitchen-pi, lab-pi5]

`local` always exists (this machine, no SSH), so every command works with no
configuration at all. A name that is neither in the inventory nor `local` but is a
`Host` in ~/.ssh/config is that SSH host; its profile is probed on connecting.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from edgec import yamlfile
from edgec.errors import EdgecError
from edgec.files import write_text_atomic

PROFILE_KEYS = ("description", "arch", "target", "cpu", "cpu_part", "cores", "features", "cc", "cflags",
                "cross_cc", "ldflags", "exec_wrapper", "transport", "workdir")
DEVICE_KEYS = ("host", "port", "user", "identity_file", "profile", "workdir", "exec_wrapper", "transport", "cc",
               "cflags", "cross_cc", "ldflags", "target", "timeout")
DEFAULT_WORKDIR = "~/.cache/edgec"


@dataclass
class Device:
    """One board: where it is and what it is (its profile's fields merged in)."""

    name: str
    profile: str = "local"
    transport: str = "ssh"          # "ssh" | "local"
    host: str | None = None
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    workdir: str = DEFAULT_WORKDIR
    exec_wrapper: list[str] = field(default_factory=list)  # e.g. [qemu-aarch64, -cpu, cortex-a72]
    timeout: float = 30.0           # connect timeout, seconds
    description: str = ""
    arch: str | None = None
    target: str = "native"
    cpu: str | None = None
    cpu_part: str | None = None
    cores: int | None = None
    features: list[str] = field(default_factory=list)
    cc: str = "cc"
    cflags: list[str] = field(default_factory=list)
    cross_cc: str | None = None
    ldflags: list[str] = field(default_factory=list)
    probe_profile: bool = False     # an ~/.ssh/config host: the profile is chosen by probing it on connect

    @property
    def emulated(self) -> bool:
        """True when binaries run through an emulator: its times say nothing about the board."""
        return bool(self.exec_wrapper) and "qemu" in Path(self.exec_wrapper[0]).name

    @property
    def address(self) -> str:
        if self.transport == "local":
            return "local"
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{self.host}{port}"

    def entry(self) -> dict:
        """The inventory record for this device (only what differs from its profile)."""
        base = dataclasses.asdict(device_from_profile(self.name, self.profile))
        mine = dataclasses.asdict(self)
        rec = {k: mine[k] for k in DEVICE_KEYS if k in mine and mine[k] != base.get(k)}
        rec["profile"] = self.profile
        return rec


def config_dir() -> Path:
    if os.environ.get("EDGEC_CONFIG_DIR"):
        return Path(os.environ["EDGEC_CONFIG_DIR"]).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(xdg).expanduser() / "edgec"


def inventory_path() -> Path:
    return config_dir() / "devices.yaml"


def ssh_config_path() -> Path:
    return Path.home() / ".ssh" / "config"


def ssh_config():
    """The user's ~/.ssh/config (a paramiko SSHConfig), or None without one."""
    import paramiko

    path = ssh_config_path()
    if not path.is_file():
        return None
    try:
        return paramiko.SSHConfig.from_path(str(path))
    except Exception as e:  # paramiko raises bare exceptions on malformed lines
        raise EdgecError(f"cannot parse {path}: {' '.join(str(e).split())[:200] or type(e).__name__}") from None


def ssh_config_hosts() -> set[str]:
    """Host names written out in ~/.ssh/config (patterns such as `*` or `pi-?` name no single host)."""
    cfg = ssh_config()
    return {h for h in cfg.get_hostnames() if not any(c in h for c in "*?!")} if cfg else set()


def device_from_ssh_config(name: str) -> Device:
    """An ~/.ssh/config host used by name: SSH settings from that file, profile probed on connect."""
    return dataclasses.replace(device_from_profile(name, "local", transport="ssh", host=name,
                                                   workdir=DEFAULT_WORKDIR), profile="auto", probe_profile=True)


@lru_cache(maxsize=None)
def _builtin_profiles() -> dict[str, dict]:
    folder = resources.files("edgec.devices") / "profiles"
    out = {}
    for item in folder.iterdir():
        if item.name.endswith(".yaml"):
            doc = yaml.safe_load(item.read_text()) or {}
            out[doc.get("name", item.name[:-5])] = doc
    return out


def profile_names() -> list[str]:
    return sorted(_builtin_profiles())


def get_profile(name: str) -> dict:
    profiles = _builtin_profiles()
    if name not in profiles:
        raise EdgecError(f"unknown device profile {name!r}; built-in profiles: {', '.join(sorted(profiles))}")
    return dict(profiles[name])


def device_from_profile(name: str, profile: str, **overrides) -> Device:
    prof = get_profile(profile)
    fields = {k: prof[k] for k in PROFILE_KEYS if prof.get(k) is not None}
    fields.update({k: v for k, v in overrides.items() if v is not None})
    if profile == "local" and "transport" not in overrides:
        fields["transport"] = "local"
    unknown = set(fields) - {f.name for f in dataclasses.fields(Device)}
    if unknown:
        raise EdgecError(f"device {name!r}: unknown setting(s) {', '.join(sorted(unknown))}")
    if fields.get("port") is not None:
        fields["port"] = _int(name, "port", fields["port"])
        if not 1 <= fields["port"] <= 65535:
            raise EdgecError(f"device {name!r}: port must be 1..65535, got {fields['port']}")
    if fields.get("timeout") is not None:
        fields["timeout"] = _timeout(name, fields["timeout"])
    _check_words(name, fields)
    for key in ("exec_wrapper", "cflags", "ldflags", "features"):
        if isinstance(fields.get(key), str):
            fields[key] = fields[key].split()
    return Device(name=name, profile=profile, **fields)


def _int(name: str, key: str, value) -> int:
    if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
        raise EdgecError(f"device {name!r}: {key} must be a whole number, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise EdgecError(f"device {name!r}: {key} must be a number, got {value!r}") from None


def _timeout(name: str, value) -> float:
    try:
        t = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        t = float("nan")
    if not 0 < t <= 3600:  # NaN fails this too
        raise EdgecError(f"device {name!r}: timeout must be seconds in (0, 3600], got {value!r}")
    return t


# Host names, IPv4/IPv6 addresses and ssh config aliases; user names as useradd takes them. Nothing here
# may reach a shell or ssh's option parser as anything but one plain word.
_HOST_RE = re.compile(r"[A-Za-z0-9_.%:\[\]][A-Za-z0-9_.%:\[\]-]*")
_USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\$?")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _check_words(name: str, fields: dict) -> None:
    for key, pattern, what in (("host", _HOST_RE, "a host name, IP address or ~/.ssh/config Host alias"),
                               ("user", _USER_RE, "a user name (letters, digits, '.', '_', '-')")):
        value = fields.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or len(value) > 253 or not pattern.fullmatch(value):
            raise EdgecError(f"device {name!r}: {key} {value!r} is not {what}")
    key = fields.get("identity_file")
    if key is not None and (not isinstance(key, str) or not key.strip() or "\n" in key or "\0" in key):
        raise EdgecError(f"device {name!r}: identity_file {key!r} is not a file path")


def _read_yaml(path: Path) -> dict:
    if not path.is_file():
        return {}
    doc = yamlfile.read(path) or {}
    if not isinstance(doc, dict):
        raise EdgecError(f"{path} must be a mapping with a 'devices:' section")
    return doc


class Inventory:
    """The user's devices file merged with the project's edgec.yaml."""

    def __init__(self, path: Path | None = None, project: Path | None = None):
        self.path = path or inventory_path()
        self.project = project if project is not None else Path.cwd() / "edgec.yaml"
        self.user_doc = _read_yaml(self.path)
        self.project_doc = _read_yaml(self.project)

    def _section(self, key: str) -> dict:
        merged: dict = {}
        for doc, origin in ((self.user_doc, self.path), (self.project_doc, self.project)):
            part = doc.get(key) or {}
            if not isinstance(part, dict):
                raise EdgecError(f"{origin}: '{key}:' must be a mapping of names")
            merged.update(part)
        return merged

    def entries(self) -> dict[str, dict]:
        return self._section("devices")

    def groups(self) -> dict[str, list[str]]:
        return {k: list(v or []) for k, v in self._section("device_groups").items()}

    def get(self, name: str) -> Device:
        entries = self.entries()
        if name in entries:
            rec = dict(entries[name] or {})
            profile = rec.pop("profile", None)
            if not profile:
                raise EdgecError(f"device {name!r} has no profile; set one of: {', '.join(profile_names())}")
            return device_from_profile(name, profile, **rec)
        if name == "local":
            return device_from_profile("local", "local")
        if name in ssh_config_hosts():
            return device_from_ssh_config(name)
        hint = f"edgec devices add {name} --host HOST --profile PROFILE"
        if name in _builtin_profiles():
            hint = f"edgec devices add MYBOARD --host HOST --profile {name}"
        raise EdgecError(f"no device named {name!r} in the inventory or as a Host in {ssh_config_path()} "
                         f"(see `edgec devices list`); add one with `{hint}`")

    def resolve(self, names: list[str]) -> list[Device]:
        """Device names or group names -> devices, in order, without duplicates."""
        groups, out, seen = self.groups(), [], set()
        for name in names or ["local"]:
            for member in groups.get(name, [name]):
                if member not in seen:
                    seen.add(member)
                    out.append(self.get(member))
        return out

    def all(self) -> list[Device]:
        names = list(self.entries())
        if "local" not in names:  # always listed: it is the default device
            names.insert(0, "local")
        return [self.get(n) for n in names]

    def add(self, device: Device, *, replace: bool = False) -> None:
        if not NAME_RE.fullmatch(device.name) or len(device.name) > 64:
            raise EdgecError(f"device name {device.name!r}: use letters, digits, '.', '_' and '-' "
                             "(it names the board in commands and reports)")
        if device.identity_file and not Path(device.identity_file).expanduser().is_file():
            raise EdgecError(f"identity file {device.identity_file} of device {device.name!r} does not exist")
        if device.probe_profile:
            raise EdgecError(f"device {device.name!r} has no profile yet: probe it first or pass --profile")
        if device.name in self.user_doc.get("devices", {}) and not replace:
            raise EdgecError(f"device {device.name!r} already exists; remove it first or pass --replace")
        self.user_doc.setdefault("devices", {})[device.name] = device.entry()
        self._save()

    def remove(self, name: str) -> None:
        if name not in (self.user_doc.get("devices") or {}):
            where = f" (it is defined in {self.project})" if name in (self.project_doc.get("devices") or {}) else ""
            raise EdgecError(f"no device named {name!r} in {self.path}{where}")
        del self.user_doc["devices"][name]
        for members in (self.user_doc.get("device_groups") or {}).values():
            if name in members:
                members.remove(name)
        self._save()

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.path, yaml.safe_dump(self.user_doc, sort_keys=True))
