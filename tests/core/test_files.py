"""edgec/files.py: atomic writes and the cache lock that keeps concurrent runs out of each other's entries."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from edgec.errors import EdgecError
from edgec.files import atomic_path, cache_lock, write_text_atomic

# Read-modify-write of a counter with a pause in the middle: without mutual exclusion, updates get lost.
_WORKER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from edgec.files import cache_lock
    entry, n = Path(sys.argv[1]), int(sys.argv[2])
    for _ in range(n):
        with cache_lock(entry):
            v = int(entry.read_text())
            time.sleep(0.002)
            entry.write_text(str(v + 1))
""")


def test_cache_lock_excludes_other_processes(tmp_path):
    entry = tmp_path / "entry"
    entry.write_text("0")
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(entry), "40"]) for _ in range(3)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    assert entry.read_text() == "120"
    # the lock file stays out of the cache folder's listing
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["entry"]


def test_cache_lock_excludes_other_threads(tmp_path):
    entry = tmp_path / "entry"
    inside, overlaps = [], []

    def work():
        for _ in range(20):
            with cache_lock(entry):
                inside.append(1)
                if len(inside) > 1:
                    overlaps.append(1)
                time.sleep(0.001)
                inside.pop()

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not overlaps


def test_atomic_write_leaves_no_partial_file_on_error(tmp_path):
    dest = tmp_path / "out.txt"
    write_text_atomic(dest, "old")
    with pytest.raises(RuntimeError):
        with atomic_path(dest) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert dest.read_text() == "old" and os.listdir(tmp_path) == ["out.txt"]


def test_atomic_write_into_missing_folder_is_one_clear_error(tmp_path):
    with pytest.raises(EdgecError, match="does not exist"):
        write_text_atomic(tmp_path / "nope" / "out.txt", "x")
