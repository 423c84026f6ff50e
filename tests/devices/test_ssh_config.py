"""Devices named by a Host in ~/.ssh/config (HOME points at a test folder): used as they are, profile probed,
inventory untouched, unknown host keys still refused; ProxyJump through a real sshd."""

from __future__ import annotations

import pytest
import yaml

from devkit import run_cli
from edgec.devices.inventory import inventory_path

pytestmark = [pytest.mark.ssh, pytest.mark.slow]


def _ssh_config(edgec_env, sshd, extra: str = "") -> None:
    (edgec_env / "home" / ".ssh" / "config").write_text(f"""
Host testboard
    HostName 127.0.0.1
    Port {sshd.port}
    User root
    IdentityFile {sshd.client_key}

Host viajump
    HostName 127.0.0.1
    Port {sshd.port}
    User root
    IdentityFile {sshd.client_key}
    ProxyJump testboard

Host *
    ServerAliveInterval 30
{extra}""")


def _trust(edgec_env, sshd) -> None:
    (edgec_env / "home" / ".ssh" / "known_hosts").write_text(sshd.known_hosts_line())


def test_ssh_config_host_deploys_with_a_probed_profile(sshd, edgec_env, tiny_model):
    _ssh_config(edgec_env, sshd)
    # unknown host key: refused, nothing saved
    rc, out, err = run_cli("deploy", str(tiny_model), "--device", "testboard")
    assert rc != 0 and "host key of testboard (root@127.0.0.1:" in err and "is not known" in err, err
    assert "Traceback" not in err + out
    _trust(edgec_env, sshd)
    rc, out, err = run_cli("deploy", str(tiny_model), "--device", "testboard", "--build", "cross")
    assert rc == 0, err
    picked = [ln for ln in err.splitlines() if "testboard (from ~/.ssh/config, not in the inventory)" in ln]
    assert len(picked) == 1 and "profile x86-avx2, target x86_64-avx2" in picked[0], err
    assert "outputs match onnxruntime" in out and "(cross build" in out
    assert not inventory_path().exists()  # used, not recorded
    # a name in neither place is still refused, and a wildcard Host does not make every name a device
    rc, out, err = run_cli("deploy", str(tiny_model), "--device", "nosuchboard")
    assert rc != 0 and "no device named 'nosuchboard'" in err


def test_devices_add_probes_when_no_profile_is_given(sshd, edgec_env):
    _ssh_config(edgec_env, sshd)
    _trust(edgec_env, sshd)
    rc, out, err = run_cli("devices", "add", "bench-box", "--host", "testboard")
    assert rc == 0, err
    entry = yaml.safe_load(inventory_path().read_text())["devices"]["bench-box"]
    assert entry == {"host": "testboard", "profile": "x86-avx2"}
    rc, out, err = run_cli("devices", "check", "bench-box", "--json")
    assert rc == 0 and '"profile": "x86-avx2"' in out, err


def test_proxyjump(sshd, edgec_env, tiny_model):
    _ssh_config(edgec_env, sshd)
    _trust(edgec_env, sshd)
    rc, out, err = run_cli("bench", str(tiny_model), "--device", "viajump", "--runs", "3", "--no-layers")
    assert rc == 0, err
    assert "viajump (from ~/.ssh/config" in err and "median / mean" in out
    # the board's SSH session runs inside a channel of the jump host's session
    import paramiko

    from edgec.devices.inventory import Inventory
    from edgec.devices.transport import open_transport

    with open_transport(Inventory().get("viajump")) as t:
        assert isinstance(t.client.get_transport().sock, paramiko.Channel)
        assert t.run(["echo", "through"]).out == "through\n"


def test_proxyjump_chains_are_refused_in_one_line(sshd, edgec_env, tiny_model):
    _ssh_config(edgec_env, sshd, extra=f"""
Host twohops
    HostName 127.0.0.1
    Port {sshd.port}
    ProxyJump testboard,viajump
""")
    rc, out, err = run_cli("deploy", str(tiny_model), "--device", "twohops")
    assert rc != 0 and "ProxyJump through 2 hosts is not supported" in err and "Traceback" not in err
