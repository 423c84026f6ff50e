"""Repeated identical blocks (Reshape -> Transpose -> Softmax, Add between) at -O2 and -O3, vs onnxruntime.

gcc 12.2 merged the two identical Transpose layer functions (-fipa-icf); the merged body, called twice, was no
longer inlined and was compiled on its own, where ivopts wrote the load of one arena slot as a TARGET_MEM_REF
with a 0 base, the arena pointer hidden in the index.  The late pure-const pass took that for a NULL
dereference ending the block and declared the function const; modref found the arena never read.  The caller
then dropped both Transpose calls.  ICF only made the layer function standalone: -fno-inline does the same
without it.  The generated Makefile turns those two summaries off for a compiler that takes the flags."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen import build_project, compile_model
from edgec.codegen.verifier import onnxruntime_outputs, run_binary

WARN = "-Wall -Wextra -Werror"


def repeated_blocks(path, blocks=4):
    """[1, 4, 8, 16] -> blocks x (Reshape [1, 4, 16, 8] -> Transpose (0, 1, 3, 2) -> Softmax -> Add const)."""
    rng = np.random.default_rng(0)
    nodes, inits, cur = [], [numpy_helper.from_array(np.array([1, 4, 16, 8], np.int64), "shape")], "x"
    for i in range(blocks):
        nodes += [helper.make_node("Reshape", [cur, "shape"], [f"r{i}"]),
                  helper.make_node("Transpose", [f"r{i}"], [f"t{i}"], perm=[0, 1, 3, 2]),
                  helper.make_node("Softmax", [f"t{i}"], [f"s{i}"], axis=-1),
                  helper.make_node("Add", [f"s{i}", f"c{i}"], [f"a{i}"])]
        inits.append(numpy_helper.from_array(rng.standard_normal((1, 4, 8, 16)).astype(np.float32), f"c{i}"))
        cur = f"a{i}"
    g = helper.make_graph(nodes, "repeated", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 16])],
                          [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [1, 4, 8, 16])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return repeated_blocks(tmp_path_factory.mktemp("icf") / "repeated.onnx")


def _run(model, out, target="native", cc=None, cflags="-O2"):
    b = compile_model(model, out, target=target)
    bins = build_project(b.dir, b.target, cc=cc, cflags=f"{cflags} {WARN}")
    x = np.random.default_rng(1).standard_normal((1, 4, 8, 16)).astype(np.float32)
    got = run_binary(bins["runner"], b.target, [x], out / "run")[0]
    _, (want,) = onnxruntime_outputs(model, {"x": x})
    return b, got, want


@pytest.mark.parametrize("cflags", ["-O2", "-O3", "-O2 -fno-inline"])
def test_repeated_blocks_match_onnxruntime(model, tmp_path, cflags):
    b, got, want = _run(model, tmp_path / "p", cflags=cflags)
    # the model really has identical layer functions for ICF to merge (arena slots repeat every two blocks)
    bodies = re.findall(r"static void \w+_layer_\d+\([^)]*\)\n\{\n(.*?)\n\}\n", (b.dir / "model.c").read_text(), re.S)
    loops = [x for x in bodies if "for (" in x]
    assert len(bodies) == 16 and len(set(loops)) < len(loops)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_makefile_adds_the_flags_only_where_taken(model, tmp_path):
    b = compile_model(model, tmp_path / "p")
    out = subprocess.run(["make", "-n", "-C", str(b.dir), "CC=gcc"], capture_output=True, text=True, check=True)
    assert "-fno-ipa-pure-const -fno-ipa-modref" in out.stdout
    if shutil.which("clang") is None:
        pytest.skip("clang not installed: the flag probe is not exercised on a compiler without the flags")
    out = subprocess.run(["make", "-n", "-C", str(b.dir), "CC=clang"], capture_output=True, text=True, check=True)
    assert "-fno-ipa" not in out.stdout
    # and clang builds it -Werror clean and right
    _, got, want = _run(model, tmp_path / "c", cc="clang", cflags="-O2")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

