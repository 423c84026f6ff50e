"""The small interface deploy and bench talk to, whatever carries the bytes.

Two implementations: SSHTransport (devices/ssh.py, the only paramiko user) and
LocalTransport here (subprocesses on this machine). Commands are shell strings
built from argument lists with shlex quoting, so no name or path can inject.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal as signal_mod
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from edgec.devices.inventory import Device
from edgec.errors import EdgecError


@dataclass
class RunResult:
    rc: int
    out: str
    err: str
    signal: int | None = None   # set when the process was killed by a signal

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.signal is None


def quote_cmd(cmd: str | Sequence[str]) -> str:
    """A shell command from an argument list: each argument quoted on its own."""
    return cmd if isinstance(cmd, str) else shlex.join(str(c) for c in cmd)


def signal_name(sig: int) -> str:
    try:
        return signal_mod.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


class Transport:
    """Run commands and move files on one device. Paths are absolute on the device."""

    device: Device

    def run(self, cmd: str | Sequence[str], timeout: float = 120.0) -> RunResult:
        raise NotImplementedError

    def put(self, local: Path, remote: str, mode: int = 0o644) -> None:
        raise NotImplementedError

    def mkdir(self, remote: str) -> None:
        raise NotImplementedError

    def rename(self, src: str, dst: str) -> None:
        raise NotImplementedError

    def read(self, remote: str) -> bytes:
        raise NotImplementedError

    def home(self) -> str:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # helpers shared by both implementations
    def workdir(self) -> str:
        w = self.device.workdir
        if w == "~" or w.startswith("~/"):
            w = self.home().rstrip("/") + w[1:]
        return w

    def check(self, cmd: str | Sequence[str], what: str, timeout: float = 120.0) -> RunResult:
        """Run; on failure raise one line naming what failed and why."""
        res = self.run(cmd, timeout=timeout)
        if res.signal is not None:
            raise EdgecError(f"{what} crashed on {self.device.name} with {signal_name(res.signal)} "
                             f"(signal {res.signal}){_tail(res)}")
        if res.rc != 0:
            detail = last_line(res.err) or last_line(res.out) or f"exit code {res.rc}"
            if "No space left on device" in res.err + res.out:
                raise EdgecError(f"disk full on {self.device.name} during {what}: free space in "
                                 f"{self.device.workdir} or set another workdir ({detail})")
            raise EdgecError(f"{what} failed on {self.device.name} (exit code {res.rc}): {detail}")
        return res

    def write(self, remote: str, data: bytes, mode: int = 0o644) -> None:
        """Write a small file through put (atomic: temp name, then rename)."""
        tmp_local = Path(os.environ.get("TMPDIR", "/tmp")) / f"edgec-{uuid.uuid4().hex}"
        try:
            tmp_local.write_bytes(data)
            tmp_remote = f"{remote}.tmp-{uuid.uuid4().hex[:8]}"
            self.put(tmp_local, tmp_remote, mode)
            self.rename(tmp_remote, remote)
        finally:
            tmp_local.unlink(missing_ok=True)


def _tail(res: RunResult) -> str:
    line = last_line(res.err)
    return f": {line}" if line else ""


class LocalTransport(Transport):
    """This machine: subprocesses and file copies, no SSH."""

    def __init__(self, device: Device):
        self.device = device

    def run(self, cmd, timeout=120.0):
        text = quote_cmd(cmd)
        # A session of its own, so a timeout stops the command's children too.
        p = subprocess.Popen(["/bin/sh", "-c", text], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            out_b, err_b = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal_mod.SIGKILL)
            p.communicate()
            raise EdgecError(f"command timed out after {timeout:g} s on {self.device.name}: {_short(text)}") from None
        out, err = out_b.decode(errors="replace"), err_b.decode(errors="replace")
        if p.returncode < 0:
            return RunResult(p.returncode, out, err, -p.returncode)
        return RunResult(p.returncode, out, err, _shell_signal(p.returncode, err))

    def put(self, local, remote, mode=0o644):
        try:
            shutil.copyfile(local, remote)
            os.chmod(remote, mode)
        except OSError as e:
            raise _os_error(self.device, f"copying {Path(local).name}", e) from None

    def mkdir(self, remote):
        try:
            os.makedirs(remote, exist_ok=True)
        except OSError as e:
            raise _os_error(self.device, f"creating {remote}", e) from None

    def rename(self, src, dst):
        os.replace(src, dst)

    def read(self, remote):
        try:
            return Path(remote).read_bytes()
        except OSError as e:
            raise _os_error(self.device, f"reading {remote}", e) from None

    def home(self):
        return str(Path.home())


def _shell_signal(rc: int, err: str) -> int | None:
    """A shell reports a child killed by signal N as exit code 128+N."""
    if 128 < rc < 128 + 32:
        return rc - 128
    return None


def _short(text: str) -> str:
    return text if len(text) < 120 else text[:117] + "..."


def _os_error(device: Device, what: str, e: OSError) -> EdgecError:
    import errno
    if e.errno == errno.ENOSPC:
        return EdgecError(f"disk full on {device.name} while {what}: free space in {device.workdir} "
                          f"or set another workdir")
    return EdgecError(f"{what} failed on {device.name}: {e.strerror or e}")


def open_transport(device: Device, *, accept_new_host_key: bool = False, notice=None) -> Transport:
    """Connect to a device (SSH unless its transport is local). A device without a profile yet (an
    ~/.ssh/config host) is probed and gets the profile that fits; notice(line) says which."""
    if device.transport == "local":
        return LocalTransport(device)
    if device.transport != "ssh":
        raise EdgecError(f"device {device.name!r}: unknown transport {device.transport!r} (use ssh or local)")
    from edgec.devices.ssh import SSHTransport
    t = SSHTransport(device, accept_new_host_key=accept_new_host_key)
    if device.probe_profile:
        from edgec.devices.probe import adopt_profile
        try:
            line = adopt_profile(t)
        except BaseException:
            t.close()
            raise
        if notice is not None:
            notice(line)
    return t
