"""SSH transport: the only module that touches paramiko.

Host keys are checked against ~/.ssh/known_hosts and edgec's own known_hosts
(in the config dir); an unknown key is refused unless the user trusts it
(`edgec devices trust NAME` or --accept-new-host-key), never added silently.
Every paramiko/socket failure becomes one EdgecError line naming the device.
"""

from __future__ import annotations

import errno
import logging
import shlex
import socket
import time
from pathlib import Path

import paramiko

from edgec.devices.inventory import Device, config_dir, ssh_config
from edgec.devices.transport import RunResult, Transport, quote_cmd, _shell_signal, _short
from edgec.errors import EdgecError

TRANSIENT = (socket.timeout, TimeoutError, ConnectionResetError, EOFError, paramiko.ssh_exception.ProxyCommandFailure)
PID_TAG = "@edgec-pid="

# paramiko logs handshake failures at ERROR; without a handler Python would print them raw on
# stderr beside our one-line message. Users see the EdgecError instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


def known_hosts_path() -> Path:
    return config_dir() / "known_hosts"


def host_key_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def fingerprint(key: paramiko.PKey) -> str:
    return key.fingerprint  # "SHA256:..." like ssh-keygen -l


class UnknownHostKey(paramiko.SSHException):
    def __init__(self, key: paramiko.PKey):
        super().__init__("unknown host key")
        self.key = key


class _Policy(paramiko.MissingHostKeyPolicy):
    """Refuse unknown keys, or record them in edgec's known_hosts when asked to."""

    def __init__(self, accept: bool):
        self.accept = accept

    def missing_host_key(self, client, hostname, key):
        if not self.accept:
            raise UnknownHostKey(key)
        save_host_key(hostname, key)


def save_host_key(name: str, key: paramiko.PKey) -> None:
    path = known_hosts_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = paramiko.HostKeys(str(path)) if path.exists() else paramiko.HostKeys()
    keys.add(name, key.get_name(), key)
    keys.save(str(path))


def resolve(device: Device) -> dict:
    """host/port/user/key for a device, with ~/.ssh/config aliases applied (HostName, Port, User, IdentityFile;
    the device's own settings win)."""
    if not device.host:
        raise EdgecError(f"device {device.name!r} has no host; set one with `edgec devices add {device.name} "
                         f"--host HOST --profile {device.profile} --replace`")
    cfg = ssh_config()
    conf = cfg.lookup(device.host) if cfg is not None else {}
    if device.identity_file:
        key = Path(device.identity_file).expanduser()
        if not key.is_file():
            raise EdgecError(f"identity file {key} of device {device.name} does not exist")
        keys = [str(key)]
    else:  # ssh's defaults list keys that may not exist: keep the ones that do
        keys = [str(Path(k).expanduser()) for k in conf.get("identityfile", []) if Path(k).expanduser().is_file()]
    return {
        "hostname": conf.get("hostname", device.host),
        "port": int(device.port or conf.get("port", 22)),
        "username": device.user or conf.get("user"),
        "key_filename": keys or None,
    }


def proxy_of(device: Device) -> tuple[str, str] | None:
    """("jump", "[user@]host[:port]") or ("command", CMD) when ~/.ssh/config reaches the host through another."""
    cfg = ssh_config()
    conf = cfg.lookup(device.host) if cfg is not None and device.host else {}
    jump, cmd = conf.get("proxyjump"), conf.get("proxycommand")
    if jump and jump.lower() != "none":
        hops = [h.strip() for h in jump.split(",") if h.strip()]
        if len(hops) > 1:
            raise EdgecError(f"device {device.name}: ProxyJump through {len(hops)} hosts is not supported (one is; "
                             f"give the jump host its own ProxyJump in ~/.ssh/config, or use ProxyCommand)")
        return ("jump", hops[0])
    if cmd and cmd.lower() != "none":
        return ("command", cmd)
    return None


def _jump_device(device: Device, hop: str) -> Device:
    """The jump host as a device of its own: `[user@]host[:port]`, or an ~/.ssh/config Host."""
    user, _, rest = hop.rpartition("@")
    host, port = rest, None
    if rest.startswith("["):  # [v6 address]:port
        host, _, tail = rest[1:].partition("]")
        port = tail[1:] or None
    elif rest.count(":") == 1:
        host, port = rest.split(":")
    try:
        port = int(port) if port else None
    except ValueError:
        raise EdgecError(f"device {device.name}: ProxyJump {hop!r} has a bad port") from None
    return Device(name=f"{device.name}'s jump host {hop}", transport="ssh", host=host, port=port, user=user or None,
                  timeout=device.timeout)


def describe_error(e: BaseException, d: Device, p: dict) -> EdgecError:
    """One line for a failed connection, naming the device and what to do."""
    where = f"{d.name} ({p['username'] + '@' if p['username'] else ''}{p['hostname']}:{p['port']})"
    if isinstance(e, UnknownHostKey):
        return EdgecError(f"host key of {where} is not known ({e.key.get_name()} {fingerprint(e.key)}); "
                          f"if that fingerprint is the board's, run `edgec devices trust {d.name}` "
                          f"or pass --accept-new-host-key")
    if isinstance(e, paramiko.BadHostKeyException):
        return EdgecError(f"host key of {where} has CHANGED (now {fingerprint(e.key)}): possible "
                          f"man-in-the-middle; if the board was reinstalled, remove the old key with "
                          f"`ssh-keygen -R {host_key_name(p['hostname'], p['port'])}` (and from "
                          f"{known_hosts_path()}), then run `edgec devices trust {d.name}`")
    if isinstance(e, paramiko.AuthenticationException):
        return EdgecError(f"authentication failed for {where}: put your public key in the board's "
                          f"~/.ssh/authorized_keys, load it in ssh-agent, or set identity_file")
    if isinstance(e, socket.gaierror):
        return EdgecError(f"cannot resolve host {p['hostname']!r} of device {d.name} (DNS failure): "
                          f"check the name or use the board's IP address")
    if isinstance(e, paramiko.ssh_exception.NoValidConnectionsError) or isinstance(e, ConnectionRefusedError):
        return EdgecError(f"connection refused by {where}: is the board on and sshd running on that port?")
    if isinstance(e, (socket.timeout, TimeoutError)):
        return EdgecError(f"timed out connecting to {where} after {d.timeout:g} s (tried twice): "
                          f"check the address and network")
    text = " ".join(str(e).split()) or type(e).__name__
    return EdgecError(f"SSH connection to {where} failed: {text}")


class SSHTransport(Transport):
    def __init__(self, device: Device, *, accept_new_host_key: bool = False):
        self.device = device
        self.accept = accept_new_host_key
        self.params = resolve(device)
        self.proxy = proxy_of(device)
        self._jump: SSHTransport | None = None
        self.client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._home: str | None = None
        self.connect()

    # connection
    def connect(self) -> None:
        for attempt in (1, 2):  # one retry on transient network errors
            try:
                self.client = self._connect_once()
                return
            except TRANSIENT as e:
                if attempt == 2:
                    raise self._error(e) from None
                time.sleep(1.0)
            except (OSError, paramiko.SSHException) as e:
                raise self._error(e) from None

    def _connect_once(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        for path in (Path.home() / ".ssh" / "known_hosts", known_hosts_path()):
            if path.is_file():
                client.load_system_host_keys(str(path))
        client.set_missing_host_key_policy(_Policy(self.accept))
        t = self.device.timeout
        try:
            client.connect(**self.params, timeout=t, banner_timeout=t, auth_timeout=t, allow_agent=True,
                           look_for_keys=self.params["key_filename"] is None, sock=self._proxy_sock())
        except paramiko.SSHException as e:
            client.close()
            if "banner" in str(e) or "No existing session" in str(e):  # the handshake never completed
                raise TimeoutError(str(e)) from None
            raise
        except BaseException:
            client.close()
            raise
        return client

    def _proxy_sock(self):
        """The connection to the board through its ProxyJump host (checked like any host: known key, auth) or
        its ProxyCommand; None to connect directly."""
        if self.proxy is None:
            return None
        kind, spec = self.proxy
        if kind == "command":
            return paramiko.ProxyCommand(spec)
        if self._jump is None:
            self._jump = SSHTransport(_jump_device(self.device, spec), accept_new_host_key=self.accept)
        transport = self._jump._alive().get_transport()
        return transport.open_channel("direct-tcpip", (self.params["hostname"], self.params["port"]),
                                      ("127.0.0.1", 0), timeout=self.device.timeout)

    def _alive(self) -> paramiko.SSHClient:
        t = self.client.get_transport() if self.client else None
        if t is None or not t.is_active():
            self.close()
            self.connect()
        return self.client

    def _error(self, e: BaseException) -> EdgecError:
        return describe_error(e, self.device, self.params)

    def _lost(self, what: str, e: BaseException) -> EdgecError:
        return EdgecError(f"connection to {self.device.name} lost while {what} ({type(e).__name__}: "
                          f"{' '.join(str(e).split())[:120] or 'closed'}); rerun: finished uploads are kept")

    def sftp(self) -> paramiko.SFTPClient:
        if self._sftp is None or self._sftp.sock.closed:
            self._sftp = self._alive().open_sftp()
        return self._sftp

    # Transport interface
    def run(self, cmd, timeout=120.0):
        text = quote_cmd(cmd)
        try:
            chan = self._alive().get_transport().open_session(timeout=self.device.timeout)
            # Run under an inner sh followed by another command, so the login shell
            # cannot exec it: a signal death shows up as exit code 128+N (paramiko
            # ignores the exit-signal message). sshd makes the login shell a session
            # leader, so its PID names the process group to kill on timeout.
            chan.exec_command(f"echo {PID_TAG}$$ >&2; sh -c {shlex.quote(text)}; exit $?")
            return self._collect(chan, text, timeout)
        except EdgecError:
            raise
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise self._lost(f"running {_short(text)}", e) from None

    def _collect(self, chan: paramiko.Channel, text: str, timeout: float) -> RunResult:
        out, err = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        while True:
            busy = False
            while chan.recv_ready():
                out += chan.recv(65536)
                busy = True
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(65536)
                busy = True
            if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                break
            if chan.closed and not busy:
                raise EOFError("channel closed before the command finished")
            if time.monotonic() > deadline:
                chan.close()
                self._kill_group(err)
                raise EdgecError(f"command timed out after {timeout:g} s on {self.device.name}: {_short(text)}")
            if not busy:
                time.sleep(0.005)
        rc = chan.recv_exit_status()
        chan.close()
        e = err.decode(errors="replace")
        if e.startswith(PID_TAG):
            e = e.split("\n", 1)[1] if "\n" in e else ""
        return RunResult(rc, out.decode(errors="replace"), e, _shell_signal(rc, e))

    def _kill_group(self, err: bytes) -> None:
        """Stop what a timed-out command left running on the board (it would skew later runs)."""
        head = err.decode(errors="replace").split("\n", 1)[0]
        if head.startswith(PID_TAG) and head[len(PID_TAG):].isdigit():
            pgid = head[len(PID_TAG):]
            try:
                self.run(f"kill -9 -{pgid} 2>/dev/null; true", timeout=10)
            except EdgecError:
                pass

    def put(self, local, remote, mode=0o644):
        try:
            sftp = self.sftp()
            sftp.put(str(local), remote)
            sftp.chmod(remote, mode)
        except EdgecError:
            raise
        except IOError as e:
            if isinstance(e, OSError) and e.errno in (errno.ENOENT, errno.EACCES):
                raise EdgecError(f"cannot write {remote} on {self.device.name}: {e.strerror}") from None
            if self._disk_full(remote, Path(local).stat().st_size):
                raise EdgecError(f"disk full on {self.device.name} while uploading {Path(local).name}: free "
                                 f"space in {self.device.workdir} or set another workdir") from None
            raise self._lost(f"uploading {Path(local).name}", e) from None
        except (EOFError, paramiko.SSHException) as e:
            raise self._lost(f"uploading {Path(local).name}", e) from None

    def _disk_full(self, remote: str, need: int) -> bool:
        """SFTP reports ENOSPC as a bare 'Failure': ask df whether space ran out."""
        try:
            res = self.run(["df", "-Pk", str(Path(remote).parent)], timeout=20)
            free_kb = int(res.out.strip().splitlines()[-1].split()[3])
        except (EdgecError, ValueError, IndexError):
            return False
        return free_kb * 1024 < need + 64 * 1024

    def mkdir(self, remote):
        self.check(["mkdir", "-p", remote], f"creating {remote}", timeout=30)

    def rename(self, src, dst):
        try:
            self.sftp().posix_rename(src, dst)
        except (IOError, EOFError, paramiko.SSHException) as e:
            raise self._lost(f"renaming {src}", e) from None

    def read(self, remote):
        try:
            with self.sftp().open(remote, "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise EdgecError(f"{remote} does not exist on {self.device.name}") from None
        except (IOError, EOFError, paramiko.SSHException) as e:
            raise self._lost(f"reading {remote}", e) from None

    def home(self):
        if self._home is None:
            self._home = self.check('printf %s "$HOME"', "reading $HOME", timeout=20).out.strip() or "."
        return self._home

    def close(self):
        if self._sftp is not None:
            self._sftp.close()
            self._sftp = None
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._jump is not None:
            self._jump.close()
            self._jump = None


def fetch_host_key(device: Device) -> tuple[str, paramiko.PKey]:
    """Connect far enough to read the server's host key (no authentication)."""
    p = resolve(device)
    if proxy_of(device) is not None:
        raise EdgecError(f"{device.name} is reached through a proxy (~/.ssh/config): trust its host key with "
                         f"`ssh {device.host}` once (~/.ssh/known_hosts is read too) or pass --accept-new-host-key")
    try:
        sock = socket.create_connection((p["hostname"], p["port"]), timeout=device.timeout)
    except OSError as e:
        raise describe_error(e, device, p) from None
    t = paramiko.Transport(sock)
    try:
        t.start_client(timeout=device.timeout)
        return host_key_name(p["hostname"], p["port"]), t.get_remote_server_key()
    except (OSError, EOFError, paramiko.SSHException) as e:
        raise EdgecError(f"cannot read the host key of {device.name}: {e}") from None
    finally:
        t.close()


def trust(device: Device, *, replace: bool = False) -> str:
    """Record the board's current host key in edgec's known_hosts; returns a line for the user."""
    name, key = fetch_host_key(device)
    known = paramiko.HostKeys()
    for path in (Path.home() / ".ssh" / "known_hosts", known_hosts_path()):
        if path.is_file():
            known.load(str(path))
    have = known.lookup(name) or {}
    old = have.get(key.get_name())
    if old == key:
        return f"{device.name}: host key {key.get_name()} {fingerprint(key)} is already trusted"
    if have and not replace:
        raise EdgecError(f"{device.name} already has a different trusted host key; if the board was "
                         f"reinstalled, run `edgec devices trust {device.name} --replace`")
    save_host_key(name, key)
    return f"{device.name}: trusted host key {key.get_name()} {fingerprint(key)} (saved in {known_hosts_path()})"
