"""What `edgec optimize` writes: the file modes a user's umask asks for."""

from __future__ import annotations

import os
import stat

import onnx
import pytest

from opt_helpers import cli, pattern_model


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o027, 0o640)])
def test_outputs_follow_the_umask(tmp_path, capsys, umask, mode):
    src = tmp_path / "m.onnx"
    onnx.save(pattern_model(), src)
    out, report = tmp_path / "m.opt.onnx", tmp_path / "report.json"
    old = os.umask(umask)
    try:
        rc, _, err = cli(capsys, "optimize", src, "-o", out, "--report", report)
    finally:
        os.umask(old)
    assert rc == 0, err
    written = [out, tmp_path / "m.opt.edgec.yaml", report]
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in written} == {p.name: oct(mode) for p in written}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["m.onnx"] + [p.name for p in written])  # no temp left
