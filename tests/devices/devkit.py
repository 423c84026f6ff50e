"""Helpers for the device tests (a module of its own: `conftest` names clash across test folders)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SshServer:
    dir: Path
    port: int
    client_key: Path
    host_pub: str          # "ssh-ed25519 AAAA..."
    config: Path
    pid: int | None = None

    def known_hosts_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_pub}\n"

    def start(self) -> None:
        proc = subprocess.run([SSHD, "-f", str(self.config), "-E", str(self.dir / "sshd.log")],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pidfile = self.dir / "sshd.pid"
            if pidfile.exists() and pidfile.read_text().strip():
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                    self.pid = int(pidfile.read_text())
                    return
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError("sshd did not start: " + (self.dir / "sshd.log").read_text())

    def stop(self) -> None:
        if self.pid:
            os.kill(self.pid, signal.SIGTERM)
            for _ in range(100):
                try:
                    os.kill(self.pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
            (self.dir / "sshd.pid").unlink(missing_ok=True)
            self.pid = None


def run_cli(*args: str) -> tuple[int, str, str]:
    """Run the edgec CLI in-process; returns (exit code, stdout, stderr)."""
    import contextlib
    import io

    from edgec.cli.main import main

    # The shared rich consoles follow sys.stdout/sys.stderr, so redirecting those is enough (pinning their
    # .file would leak the redirect into every later test).
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()
