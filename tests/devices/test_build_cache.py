"""The deploy/bench build cache keys on the compile options: an EDGEC_* kernel override is never served a build
made without it, and the same options reuse the build."""

from __future__ import annotations

import json
import re

import pytest

from devkit import run_cli


def _builds(cache) -> dict[str, dict]:
    """Cached projects -> their stamps (options and per-layer algorithms)."""
    return {p.name: json.loads((p / ".edgec-source.json").read_text())
            for p in sorted((cache / "builds").iterdir()) if not p.name.startswith(".")} if (cache / "builds").is_dir() else {}


def _dw_algos(stamp: dict) -> list[str]:
    return [l["algo"] for l in stamp["layers"] if l["algo"].startswith("dwconv")]


def test_kernel_overrides_are_part_of_the_build_key(edgec_env, conv_model, monkeypatch):
    cache = edgec_env / "cache"
    monkeypatch.setenv("EDGEC_CACHE_DIR", str(cache))
    seen = {}
    for mode in ("plane", "cb"):
        monkeypatch.setenv("EDGEC_DW", mode)
        rc, out, err = run_cli("deploy", str(conv_model), "--device", "local")
        assert rc == 0, err
        assert "outputs match onnxruntime" in out
        new = {k: v for k, v in _builds(cache).items() if k not in seen}
        assert len(new) == 1, (mode, list(_builds(cache)))
        (name, stamp), = new.items()
        assert stamp["options"]["dw"] == mode
        seen[name] = _dw_algos(stamp)
    plane, cb = seen.values()
    assert plane and cb and plane != cb, seen  # the override reached the generated code
    # the same options again: the cached project and build, nothing new uploaded
    rc, out, err = run_cli("deploy", str(conv_model), "--device", "local")
    assert rc == 0, err
    assert set(_builds(cache)) == set(seen) and re.search(r"\b0 bytes sent", out)
    # bench (a non-profiling build) keys the same way
    for mode in ("plane", "cb", "cb"):
        monkeypatch.setenv("EDGEC_DW", mode)
        rc, out, err = run_cli("bench", str(conv_model), "--runs", "3", "--no-layers", "--json")
        assert rc == 0, err
    builds = _builds(cache)
    assert len(builds) == 4 and sorted(s["options"]["dw"] for s in builds.values()) == ["cb", "cb", "plane", "plane"]


def test_bad_override_is_one_line(edgec_env, conv_model, monkeypatch):
    monkeypatch.setenv("EDGEC_GSPC", "fastest")
    rc, out, err = run_cli("bench", str(conv_model), "--runs", "3")
    assert rc != 0 and "Traceback" not in err + out
    assert "EDGEC_GSPC='fastest' is not one of auto, tile, ow, mg" in err


def test_options_key_resolves_native_and_reads_the_tuning_db(tmp_path):
    from edgec.codegen.options import CompileOptions
    from edgec.codegen.targets import get_target

    db = tmp_path / "tuning.json"
    db.write_text("{}")
    a = CompileOptions.from_env({"EDGEC_TUNING_DB": str(db)}, target="native")
    assert a.cache_key()["target"] == get_target("native").name
    before = a.cache_key()
    db.write_text('{"x86_64-avx2": {}}')
    assert a.cache_key() != before  # same path, new content: another key
    assert CompileOptions.from_env({}) == CompileOptions()
    with pytest.raises(Exception, match="EDGEC_DW='x'"):
        CompileOptions.from_env({"EDGEC_DW": "x"})
