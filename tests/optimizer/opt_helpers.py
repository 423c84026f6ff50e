"""Small models built with onnx.helper for pass tests, and a way to run the real CLI."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgec.cli.main import main


def cli(capsys, *args) -> tuple[int, str, str]:
    """Run `edgec ARGS` in-process through the real entry point; returns (exit code, stdout, stderr)."""
    rc = main([str(a) for a in args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def _w(rng, *shape, name):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.3, name)


def pattern_model(seed: int = 0) -> onnx.ModelProto:
    """x[1,3,8,8] -> Conv -> BN -> Identity -> Relu -> Dropout -> (Relu twice, CSE) -> Add -> Flatten -> MatMul + b
    (+ a dead branch, a duplicated weight and a Constant node) -> y[1,5]."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3
    inits = [
        numpy_helper.from_array(w, "w"), numpy_helper.from_array(w.copy(), "w_dup"),
        numpy_helper.from_array(rng.random(4).astype(np.float32) + 0.5, "bn_s"), _w(rng, 4, name="bn_b"),
        _w(rng, 4, name="bn_m"), numpy_helper.from_array(rng.random(4).astype(np.float32) + 0.5, "bn_v"),
        _w(rng, 256, 5, name="fc_w"), _w(rng, 5, name="fc_b"),
    ]
    const = helper.make_node("Constant", [], ["half"], value=numpy_helper.from_array(np.array(0.5, np.float32)))
    nodes = [
        const,
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("BatchNormalization", ["c", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], name="bn"),
        helper.make_node("Identity", ["bn"], ["id"], name="id"),
        helper.make_node("Relu", ["id"], ["r"], name="relu"),
        helper.make_node("Dropout", ["r"], ["d"], name="drop"),
        helper.make_node("Relu", ["d"], ["r1"], name="relu_a"),
        helper.make_node("Relu", ["d"], ["r2"], name="relu_b"),
        helper.make_node("Add", ["r1", "r2"], ["s"], name="add"),
        helper.make_node("Mul", ["s", "half"], ["sh"], name="mul"),
        helper.make_node("Conv", ["x", "w_dup"], ["dead"], pads=[1, 1, 1, 1], name="dead_conv"),
        helper.make_node("Flatten", ["sh"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "fc_w"], ["mm"], name="mm"),
        helper.make_node("Add", ["mm", "fc_b"], ["y"], name="bias"),
    ]
    g = helper.make_graph(nodes, "patterns", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return onnx.shape_inference.infer_shapes(m)


def ops(model: onnx.ModelProto) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in model.graph.node:
        out[n.op_type] = out.get(n.op_type, 0) + 1
    return out
