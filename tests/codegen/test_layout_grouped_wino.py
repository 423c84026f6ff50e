"""Grouped 3x3 convs with whole channel blocks a group run blocked as one dense Winograd conv per group
(f32-winograd-nchwc.h, G): two images, a residual Add and biases, 1 and 3 threads, against onnxruntime and the NCHW
build (layout=nchw runs the NCHW grouped driver)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen import compile_model
from edgec.codegen.layout import block_width
from edgec.codegen.options import CompileOptions
from edgec.codegen.targets import get_target
from edgec.codegen.verifier import onnxruntime_outputs, run_binary


def _model(path, c, g, hw=15):
    rng = np.random.default_rng(8)
    inits, nodes, h = [], [], "x"
    for i in range(3):
        inits.append(numpy_helper.from_array((rng.standard_normal((c, c // g, 3, 3)) / 6).astype(np.float32), f"w{i}"))
        inits.append(numpy_helper.from_array((rng.standard_normal(c) * 0.1).astype(np.float32), f"b{i}"))
        nodes.append(helper.make_node("Conv", [h, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1] * 4, group=g))
        if i == 2:  # the last one's residual: the first one's output
            nodes.append(helper.make_node("Add", [f"c{i}", "r0"], ["s"]))
            nodes.append(helper.make_node("Relu", ["s"], ["y"]))
        else:
            nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
            h = f"r{i}"
    graph = helper.make_graph(nodes, "gw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, hw, hw])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(onnx.shape_inference.infer_shapes(m), path)
    return path


@pytest.mark.parametrize("groups", [2, 3])
def test_grouped_winograd_blocked_matches_onnxruntime(groups, tmp_path):
    t = get_target("native")
    b = block_width(t)
    if not b:
        pytest.skip("this target has no channel-blocked kernels")
    c = groups * 2 * b  # two blocks a group
    path = _model(tmp_path / "m.onnx", c, groups)
    x = np.random.default_rng(9).standard_normal((2, c, 15, 15)).astype(np.float32)
    want = onnxruntime_outputs(path, {"x": x})[1][0]
    got = {}
    for layout in ("nchwc", "nchw"):
        bld = compile_model(path, tmp_path / layout, build=True,
                            options=CompileOptions(target="native", threads=3, layout=layout, conv="winograd-f43"))
        algos = [la["algo"] for la in bld.layers if la["op"] == "Conv"]
        assert all(a.startswith("winograd-f43" + ("-nchwc" if layout == "nchwc" else "")) for a in algos), algos
        for threads in (1, 3):
            got[layout, threads] = run_binary(bld.binaries["runner"], bld.target, [x], tmp_path / f"{layout}{threads}",
                                              threads=threads)[0]
    for key, y in got.items():
        np.testing.assert_allclose(y, want, rtol=2e-4, atol=2e-4, err_msg=str(key))
