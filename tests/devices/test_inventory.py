"""Inventory files, profiles and the `edgec devices` commands."""

from __future__ import annotations

import json

import pytest
import yaml

from devkit import run_cli
from edgec.devices.inventory import Inventory, config_dir, get_profile, profile_names
from edgec.errors import EdgecError


def test_builtin_profiles_are_complete():
    assert {"pi3", "pi4", "pi5", "jetson-nano", "x86-avx2", "x86-avxvnni", "local", "pi-armv7"} <= set(profile_names())
    from edgec.codegen.targets import get_target
    for name in profile_names():
        p = get_profile(name)
        tgt = get_target(p["target"])  # every profile names a real codegen target
        if p.get("arch"):
            assert tgt.arch == p["arch"], name
    assert get_profile("pi4")["cpu"] == "Cortex-A72" and get_profile("pi5")["target"] == "aarch64-v82"


def test_config_dir_env(monkeypatch, tmp_path):
    monkeypatch.delenv("EDGEC_CONFIG_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_dir() == tmp_path / "xdg" / "edgec"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert config_dir() == tmp_path / "h" / ".config" / "edgec"
    monkeypatch.setenv("EDGEC_CONFIG_DIR", str(tmp_path / "c"))
    assert config_dir() == tmp_path / "c"


def test_local_needs_no_config(edgec_env):
    inv = Inventory()
    assert [d.name for d in inv.resolve([])] == ["local"]
    d = inv.get("local")
    assert d.transport == "local" and d.target == "native" and not d.emulated
    assert not (edgec_env / "cfg").exists()


def test_add_list_remove_cli(edgec_env):
    rc, out, err = run_cli("devices", "add", "kitchen-pi", "--host", "192.168.1.20", "--user", "pi",
                           "--profile", "pi4")
    assert rc == 0, err
    doc = yaml.safe_load((edgec_env / "cfg" / "devices.yaml").read_text())
    assert doc["devices"]["kitchen-pi"] == {"host": "192.168.1.20", "user": "pi", "profile": "pi4"}
    rc, out, err = run_cli("devices", "add", "kitchen-pi", "--host", "x", "--profile", "pi4")
    assert rc != 0 and "already exists" in err
    rc, out, err = run_cli("devices", "add", "bad", "--host", "x", "--profile", "pi9")
    assert rc != 0 and "unknown device profile 'pi9'" in err
    rc, out, err = run_cli("devices", "list", "--json")
    names = {d["name"]: d for d in json.loads(out)["devices"]}
    assert names["kitchen-pi"]["target"] == "aarch64-neon" and "local" in names
    rc, out, err = run_cli("devices", "list")
    assert "kitchen-pi" in out and "pi@192.168.1.20" in out
    rc, out, err = run_cli("devices", "remove", "kitchen-pi")
    assert rc == 0 and "kitchen-pi" not in Inventory().entries()
    rc, out, err = run_cli("devices", "remove", "kitchen-pi")
    assert rc != 0 and "no device named 'kitchen-pi'" in err


def test_project_file_overrides_and_groups(edgec_env):
    (edgec_env / "work" / "edgec.yaml").write_text(yaml.safe_dump({
        "devices": {"lab5": {"host": "10.0.0.5", "profile": "pi5", "workdir": "/srv/edgec"}},
        "device_groups": {"lab": ["lab5", "local"]}}))
    inv = Inventory()
    devs = inv.resolve(["lab", "local"])
    assert [d.name for d in devs] == ["lab5", "local"]
    assert devs[0].workdir == "/srv/edgec" and devs[0].target == "aarch64-v82"
    with pytest.raises(EdgecError, match="no device named 'pi4'.*--profile pi4"):
        inv.get("pi4")
    (edgec_env / "work" / "edgec.yaml").write_text("devices: [unclosed")
    with pytest.raises(EdgecError, match="not valid YAML"):
        Inventory()


def test_unknown_device_is_one_line(edgec_env, tmp_path):
    rc, out, err = run_cli("bench", str(tmp_path / "missing.onnx"), "-d", "nope")
    assert rc != 0 and "no device named 'nope'" in err and "Traceback" not in err


def test_check_local_and_ssh(board, emu_board):
    rc, out, err = run_cli("devices", "check", "local", "--json")
    assert rc == 0, err
    rec = json.loads(out)
    assert rec["arch"] and rec["cores"] >= 1 and rec["mem_mb"] > 0 and rec["cpu"] and rec["features"]
    rc, out, err = run_cli("devices", "check", "board", "emu-pi4", "--json")
    assert rc == 0, err
    ssh_rec, emu_rec = json.loads(out)
    assert ssh_rec["arch"] == rec["arch"] and ssh_rec["cc"]
    assert any("emulated" in w for w in emu_rec["warnings"])
    rc, out, err = run_cli("devices", "check", "board")
    assert rc == 0 and "compiler" in out


def test_check_warns_on_profile_mismatch(sshd, board):
    # An x86 board entered as a Raspberry Pi 4: the probe must say so.
    import dataclasses
    Inventory().add(dataclasses.replace(board, name="wrong", profile="pi4", arch="aarch64", cpu_part="0xd08",
                                        cores=4, features=["asimd"], target="aarch64-neon"))
    rc, out, err = run_cli("devices", "check", "wrong", "--json")
    rec = json.loads(out)
    assert any("architecture is x86_64 but profile pi4 expects aarch64" in w for w in rec["warnings"])
    assert any("lacks asimd" in w for w in rec["warnings"])


def test_trust_cli(sshd, board, edgec_env):
    (edgec_env / "cfg" / "known_hosts").unlink()
    rc, out, err = run_cli("devices", "check", "board")
    assert rc != 0 and "edgec devices trust board" in err
    rc, out, err = run_cli("devices", "trust", "board")
    assert rc == 0 and "SHA256:" in out
    rc, out, err = run_cli("devices", "check", "board")
    assert rc == 0, err
