"""Writing outputs safely: never a half-written file, never the input overwritten."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
from collections import defaultdict
import tempfile
from pathlib import Path
from typing import Iterator

from edgec.errors import EdgecError


def refuse_overwrite(src: str | os.PathLike, dest: str | os.PathLike) -> None:
    """Raise if dest is the same file as src (the input must survive)."""
    s, d = Path(src), Path(dest)
    if d.exists() and s.exists() and os.path.samefile(s, d):
        raise EdgecError(f"output {d} is the input model; choose another output path")
    if s.resolve() == d.resolve():
        raise EdgecError(f"output {d} is the input model; choose another output path")


def current_umask() -> int:
    """The process umask, read without changing it where the kernel reports it (os.umask alone must set one)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temp path beside dest; rename it over dest only if the block succeeds."""
    dest = Path(dest)
    parent = dest.parent if str(dest.parent) else Path(".")
    if not parent.is_dir():
        raise EdgecError(f"output folder {parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=suffix or ".tmp", dir=parent)
    tmp_path = Path(tmp)
    try:
        try:
            # mkstemp makes the file 0600 and rename keeps that; give it the mode open(..., "w") would have
            os.fchmod(fd, 0o666 & ~current_umask())
        finally:
            os.close(fd)
        yield tmp_path
        os.replace(tmp_path, dest)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_bytes_atomic(dest: str | os.PathLike, data: bytes) -> None:
    with atomic_path(dest) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(dest: str | os.PathLike, text: str) -> None:
    write_bytes_atomic(dest, text.encode())


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks (models and weights can be large)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_THREAD_LOCKS: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)


@contextlib.contextmanager
def cache_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold a lock for cache entry `path` exclusively, against other threads and other processes: two edgec runs
    (or test workers) filling one entry must not write into each other's half-made files. The lock file lives in
    a hidden .locks folder beside the entry, so listings of the entries stay clean."""
    p = Path(path)
    lock = p.parent / ".locks" / (p.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with _THREAD_LOCKS[str(lock)]:  # flock is per open file: threads of one process need their own lock
        with open(lock, "a") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)
