"""Transport against a real sshd on loopback and the local transport: same behaviour, clean failures."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time

import pytest

from edgec.devices.inventory import Inventory, device_from_profile
from edgec.devices.transport import open_transport
from edgec.errors import EdgecError

pytestmark = pytest.mark.ssh


@pytest.fixture(params=["ssh", "local"])
def transport(request, edgec_env):
    if request.param == "local":
        dev = device_from_profile("here", "local", workdir=str(edgec_env / "remote"))
    else:
        dev = request.getfixturevalue("board")
    with open_transport(dev) as t:
        yield t


def test_run_put_read_rename(transport, tmp_path):
    res = transport.run(["echo", "hello world"])
    assert (res.rc, res.out, res.signal) == (0, "hello world\n", None)
    res = transport.run("echo oops >&2; exit 3")
    assert res.rc == 3 and res.err == "oops\n" and not res.ok
    work = transport.workdir()
    transport.mkdir(work + "/a b")
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(300_000))
    transport.put(src, work + "/a b/x.tmp", mode=0o755)
    transport.rename(work + "/a b/x.tmp", work + "/a b/x")
    assert transport.read(work + "/a b/x") == src.read_bytes()
    assert transport.run(["test", "-x", work + "/a b/x"]).rc == 0


def test_hostile_names_cannot_inject(transport, tmp_path):
    work = transport.workdir()
    canary = tmp_path / "canary"
    for name in ["sp ace", "semi;touch " + str(canary), "$(touch " + str(canary) + ")", "`touch x`", "q'uo\"te",
                 "new\nline"]:
        d = f"{work}/{name}"
        transport.mkdir(d)
        res = transport.run(["ls", "-a", d])
        assert res.ok, res.err
        assert transport.run(["printf", "%s", name]).out == name
    assert not canary.exists()


def test_signal_and_timeout(transport):
    res = transport.run("kill -SEGV $$")
    assert res.signal == 11
    with pytest.raises(EdgecError, match="crashed on .* SIGSEGV"):
        transport.check("sh -c 'kill -SEGV $$'", "bench")
    pidfile = transport.workdir() + "/sleeper.pid"
    transport.mkdir(transport.workdir())
    with pytest.raises(EdgecError, match="timed out after 0.5 s"):
        transport.run(f"sh -c 'echo $$ > {pidfile}; exec sleep 30'; echo after", timeout=0.5)
    pid = int(transport.read(pidfile))  # the board is this machine: its processes are visible here
    for _ in range(100):
        if not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]:
            break
        time.sleep(0.02)
    else:
        pytest.fail("the timed-out command is still running")
    with pytest.raises(EdgecError, match="make failed on .*exit code 2.*no rule"):
        transport.check("echo 'no rule to make x' >&2; exit 2", "make")


def _expect(dev, pattern):
    with pytest.raises(EdgecError, match=pattern) as e:
        open_transport(dev).close()
    assert "\n" not in str(e.value)


def test_unknown_host_key_refused_then_trusted(sshd, board, edgec_env):
    from edgec.devices import ssh

    (edgec_env / "cfg" / "known_hosts").unlink()
    _expect(board, r"host key of board .* is not known .*SHA256:.*edgec devices trust board.*--accept-new-host-key")
    assert not (edgec_env / "cfg" / "known_hosts").exists()  # never added silently
    line = ssh.trust(board)
    assert "trusted host key ssh-ed25519 SHA256:" in line
    assert sshd.host_pub.split()[1] in (edgec_env / "cfg" / "known_hosts").read_text()
    with open_transport(board) as t:
        assert t.run("true").ok
    assert "already trusted" in ssh.trust(board)


def test_accept_new_host_key(sshd, board, edgec_env):
    (edgec_env / "cfg" / "known_hosts").unlink()
    with open_transport(board, accept_new_host_key=True) as t:
        assert t.run("true").ok
    assert sshd.host_pub.split()[1] in (edgec_env / "cfg" / "known_hosts").read_text()


def test_changed_host_key(board, edgec_env):
    other = edgec_env / "otherkey"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    pub = " ".join((other.with_suffix(".pub")).read_text().split()[:2])
    (edgec_env / "cfg" / "known_hosts").write_text(f"[127.0.0.1]:{board.port} {pub}\n")
    _expect(board, r"host key of board .* has CHANGED .*ssh-keygen -R \[127.0.0.1\]:\d+.*devices trust board")


def test_connection_failures(board, edgec_env):
    from devkit import free_port

    _expect(dataclasses.replace(board, port=free_port()), r"connection refused by board .*sshd running")
    _expect(dataclasses.replace(board, host="no-such-board.invalid"), r"cannot resolve host .* \(DNS failure\)")
    wrong = edgec_env / "wrongkey"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong)], check=True)
    _expect(dataclasses.replace(board, identity_file=str(wrong)), r"authentication failed for board \(root@")
    _expect(dataclasses.replace(board, identity_file=str(edgec_env / "nokey")), r"identity file .*nokey of device board does not exist")


def test_connect_timeout(board):
    import socket
    # A listening socket that never answers the SSH banner: connect succeeds, the handshake times out.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        dev = dataclasses.replace(board, port=s.getsockname()[1], timeout=0.4)
        _expect(dev, r"timed out connecting to board .* \(tried twice\)")
        s.settimeout(0.2)
        attempts = 0
        try:
            while True:
                s.accept()[0].close()
                attempts += 1
        except OSError:
            pass
        assert attempts == 2  # one retry, not more


def test_ssh_config_alias(sshd, board, edgec_env):
    (edgec_env / "home" / ".ssh" / "config").write_text(
        f"Host mypi\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User root\n  IdentityFile {sshd.client_key}\n")
    dev = device_from_profile("viaalias", "pi4", host="mypi", workdir=str(edgec_env / "remote"))
    Inventory().add(dev)
    with open_transport(Inventory().get("viaalias")) as t:
        assert t.run(["echo", "ok"]).out == "ok\n"


def test_disk_full(board, edgec_env, tmp_path):
    mnt = edgec_env / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(mnt)]).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        big = tmp_path / "big.bin"
        big.write_bytes(os.urandom(400_000))
        for dev in (board, device_from_profile("here", "local", workdir=str(mnt))):
            with open_transport(dev) as t:
                with pytest.raises(EdgecError, match=f"disk full on {dev.name}"):
                    t.put(big, str(mnt / "big.bin"))
                with pytest.raises(EdgecError, match=f"disk full on {dev.name}"):
                    t.check(["cp", str(big), str(mnt / "big2.bin")], "copy")
    finally:
        subprocess.run(["umount", str(mnt)])


def test_agent_authentication(sshd, board, edgec_env, monkeypatch):
    import shutil
    import signal
    if not shutil.which("ssh-agent"):
        pytest.skip("ssh-agent not installed (openssh-client)")
    sock = edgec_env / "agent.sock"
    out = subprocess.run(["ssh-agent", "-a", str(sock)], capture_output=True, text=True, check=True).stdout
    pid = int(out.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run(["ssh-add", "-q", str(sshd.client_key)], env=env, check=True, capture_output=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        dev = dataclasses.replace(board, identity_file=None)  # no key file: only the agent can help
        with open_transport(dev) as t:
            assert t.run(["echo", "via agent"]).out == "via agent\n"
    finally:
        os.kill(pid, signal.SIGTERM)
