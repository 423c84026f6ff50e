"""The installed package must carry every subpackage and the C runtime sources."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_python_folder_is_packaged():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    for pkg, folder in cfg["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            if "__pycache__" in rel:
                continue
            name = ".".join((pkg, *rel))
            assert name in listed, f"{name} ({init.parent}) is missing from [tool.setuptools] packages"


def test_runtime_sources_ship_as_package_data():
    from edgec.runtime_c import root

    assert (root() / "__init__.py").exists()
    assert any(root().rglob("*.h"))
