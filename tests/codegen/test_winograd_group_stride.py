"""Grouped Winograd layers whose V slice per xi would be a multiple of 512 bytes (128 channels, 8 groups, 28x28,
F(4,3): 9 strips x (16 x 6 + 16) + 16 = 1024 floats) get one more pad per xi (f32_winograd_xi_stride): the
scratch the emitter reserves must hold it at 1 thread (per-thread slices) and at 2 (V of every tile first).
ASan/UBSan build, against onnxruntime. Built for x86_64-avx2 (MR = 6, the table's cache sizes), where this layer's
tile block gives that stride whatever the host's caches; an AVX-512 tile (MR = 12) does not."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen import build_project, compile_model, kernels
from edgec.codegen.options import CompileOptions
from edgec.codegen.targets import get_target
from edgec.codegen.verifier import onnxruntime_outputs, run_binary

SAN = "-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -Wall -Wextra -Werror"


def _model(path, c=128, hw=28, g=8, depth=2):
    rng = np.random.default_rng(5)
    nodes, inits, h = [], [], "x"
    for i in range(depth):
        inits.append(numpy_helper.from_array((rng.standard_normal((c, c // g, 3, 3)) / 12).astype(np.float32), f"w{i}"))
        inits.append(numpy_helper.from_array((rng.standard_normal(c) * 0.1).astype(np.float32), f"b{i}"))
        nodes.append(helper.make_node("Conv", [h, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}", pads=[1] * 4, group=g))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        h = f"r{i}"
    graph = helper.make_graph(nodes, "gw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                              [helper.make_tensor_value_info(h, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(onnx.shape_inference.infer_shapes(m), path)
    return path


TARGET = get_target("x86_64-avx2")


@pytest.mark.skipif(not TARGET.runs_natively(), reason="this CPU does not run x86_64-avx2 code")
def test_grouped_f43_padded_xi_stride_matches_onnxruntime(tmp_path):
    path = _model(tmp_path / "gw.onnx")
    x = np.random.default_rng(6).standard_normal((1, 128, 28, 28)).astype(np.float32)
    want = onnxruntime_outputs(path, {"x": x})[1][0]
    for threads in (1, 2):
        b = compile_model(path, tmp_path / f"p{threads}",
                          options=CompileOptions(target=TARGET.name, threads=threads, conv="winograd-f43",
                                                 layout="nchw"))  # the NCHW grouped driver (blocked: one per group)
        convs = [l for l in b.layers if l["op"] == "Conv"]
        assert all(l["algo"].startswith("winograd-f43") for l in convs), [l["algo"] for l in convs]
        mr, tb = kernels.gemm_kernel(TARGET).params["mr"], convs[0]["details"]["tb"]
        assert (tb // mr * (16 * mr + 16) + 16) % 128 == 0, tb  # the padded stride is what runs
        runner = build_project(b.dir, TARGET.name, cflags=SAN, ldflags="-fsanitize=address,undefined", jobs=2)["runner"]
        got = run_binary(runner, b.target, [x], tmp_path / f"run{threads}", threads=threads)[0]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
