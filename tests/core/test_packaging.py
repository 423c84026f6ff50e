"""The installed package must carry every subpackage and the C runtime sources."""

from __future__ import annotations

import tomllib

import pytest
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


# Import name -> distribution name, for declared dependencies whose import name differs.
_DIST_OF = {"yaml": "pyyaml", "PIL": "pillow", "google": "protobuf", "sklearn": "scikit-learn"}


def _names(deps: list[str]) -> set[str]:
    import re
    return {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower().replace("_", "-") for d in deps}


def test_every_import_is_a_declared_dependency():
    """A clean, isolated install must run: every third-party module the package imports (at any depth, lazily or
    not) is in [project] dependencies."""
    import ast
    import sys

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = _names(project["dependencies"])
    extras = _names([d for ds in project.get("optional-dependencies", {}).values() for d in ds])
    missing = {}
    for folder in cfg["package-dir"].values():
        for py in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(py.read_text(), str(py))
            lazy = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                    for n in ast.walk(f)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    mods = [node.module]
                else:
                    continue
                for m in mods:
                    top = m.split(".")[0]
                    if top == "edgec" or top in sys.stdlib_module_names:
                        continue
                    dist = _DIST_OF.get(top, top).lower().replace("_", "-")
                    if dist not in declared and not (dist in extras and id(node) in lazy):
                        missing.setdefault(top, str(py.relative_to(ROOT)))
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


@pytest.mark.slow
def test_wheel_installs_and_runs_in_a_fresh_isolated_venv(tmp_path, ppocr_cls):
    """Build the wheel, install it (with its declared dependencies only) into a venv that cannot see this
    interpreter's site-packages, then run the installed `edgec` script."""
    import subprocess
    import sys

    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)],
                   check=True, capture_output=True, text=True, timeout=600)
    wheel = next(dist.glob("edgec-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                         capture_output=True, text=True, timeout=900)
    assert pip.returncode == 0, pip.stderr[-2000:]
    edgec = str(venv / "bin" / "edgec")
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    v = subprocess.run([edgec, "--version"], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert v.returncode == 0 and v.stdout.startswith("edgec "), v.stderr
    ins = subprocess.run([edgec, "inspect", str(ppocr_cls), "-s", "x:1,3,48,192", "--json"], capture_output=True,
                         text=True, timeout=300, env=env, cwd=tmp_path)
    assert ins.returncode == 0, ins.stderr[-2000:]
    import json
    doc = json.loads(ins.stdout)
    assert doc, "inspect printed an empty document"
    bad = subprocess.run([edgec, "compile", "--bogus"], capture_output=True, text=True, timeout=120, env=env)
    assert bad.returncode == 2 and "No such option" in bad.stderr and "Traceback" not in bad.stderr
