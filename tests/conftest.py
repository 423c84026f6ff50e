"""Shared fixtures: the real models every test suite uses (fetched or trained once, then cached)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from edgec import zoo

# The compilers the suite runs (targets.yaml's, the kernel tests' and the sanitizer builds').
_COMPILERS = ("gcc", "cc", "aarch64-linux-gnu-gcc", "arm-linux-gnueabihf-gcc", "clang")


def pytest_configure(config):
    """Compile through ccache when it is installed: hundreds of builds in one run compile the same runtime
    sources with the same flags, and ccache hands back the object the compiler made the first time. Each
    compiler name on PATH resolves to ccache, which runs the real one behind it on a miss (masquerade);
    EDGEC_TEST_CCACHE=0 turns it off."""
    ccache = shutil.which("ccache")
    if ccache is None or os.environ.get("EDGEC_TEST_CCACHE") == "0" or os.environ.get("EDGEC_TEST_CCBIN"):
        return  # xdist workers inherit the controller's environment
    root = Path(tempfile.gettempdir()) / f"edgec-test-ccache-{os.getuid()}"
    bindir = root / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    for name in _COMPILERS:
        link = bindir / name
        if shutil.which(name) and not link.is_symlink():
            try:
                link.symlink_to(ccache)
            except FileExistsError:  # another run made it just now
                pass
    os.environ["EDGEC_TEST_CCBIN"] = str(bindir)
    os.environ["PATH"] = f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ.setdefault("CCACHE_DIR", str(root / "cache"))
    os.environ.setdefault("CCACHE_NOHASHDIR", "1")  # -g builds in different project dirs share objects


@pytest.fixture(scope="session")
def ppocr_cls():
    return zoo.ppocr_cls()


@pytest.fixture(scope="session")
def digits_cnn():
    pytest.importorskip("torch", reason="the digits CNN is trained with torch==2.13.0 (pip install -e '.[test]')")
    return zoo.digits_cnn()


@pytest.fixture(scope="session")
def onnx_light():
    return zoo.onnx_light
