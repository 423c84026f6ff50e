"""Random graphs of elementwise, broadcast, view and data-movement ops with skip connections, against
onnxruntime: exercises in-place reuse, views sharing buffers and liveness in the arena plan."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen import verify

UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "HardSwish", "Softmax", "Identity"]
BINARY = ["Add", "Sub", "Mul", "Max", "Min"]


def _random_graph(seed: int, path):
    rng = np.random.default_rng(seed)
    shape = [1, 4, 6, 8]
    live = ["x"]
    nodes, inits = [], []
    for i in range(24):
        src = live[-1] if rng.random() < 0.6 else live[int(rng.integers(len(live)))]
        out = f"t{i}"
        r = rng.random()
        if r < 0.35:
            op = UNARY[int(rng.integers(len(UNARY)))]
            nodes.append(helper.make_node(op, [src], [out], **({"axis": 1} if op == "Softmax" else {})))
        elif r < 0.65:
            other = live[int(rng.integers(len(live)))]
            if rng.random() < 0.4:  # broadcast a constant over channels or width
                cshape = [1, 4, 1, 1] if rng.random() < 0.5 else [8]
                other = f"c{i}"
                inits.append(numpy_helper.from_array(rng.uniform(0.5, 1.5, cshape).astype(np.float32), other))
            nodes.append(helper.make_node(BINARY[int(rng.integers(len(BINARY)))], [src, other], [out]))
        elif r < 0.8:  # view round trip: Reshape to 2-D, Transpose or not, back
            flat, back = f"{out}_f", f"{out}_s"
            inits.append(numpy_helper.from_array(np.array([4, 48], np.int64), flat))
            inits.append(numpy_helper.from_array(np.array(shape, np.int64), back))
            nodes.append(helper.make_node("Reshape", [src, flat], [f"{out}_r"]))
            nodes.append(helper.make_node("Neg", [f"{out}_r"], [f"{out}_n"]))
            nodes.append(helper.make_node("Reshape", [f"{out}_n", back], [out]))
        else:  # split along channels and concat back in another order
            nodes.append(helper.make_node("Split", [src, f"sp{i}"], [f"{out}_a", f"{out}_b"], axis=1))
            inits.append(numpy_helper.from_array(np.array([1, 3], np.int64), f"sp{i}"))
            nodes.append(helper.make_node("Concat", [f"{out}_b", f"{out}_a"], [out], axis=1))
        live.append(out)
    outs = [live[-1], live[len(live) // 2]]
    g = helper.make_graph(nodes, f"rand{seed}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, shape) for o in dict.fromkeys(outs)],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("seed", range(6))
def test_random_graph_matches_onnxruntime(tmp_path, seed):
    model = _random_graph(seed, tmp_path / "m.onnx")
    r = verify(model, out_dir=tmp_path / "p", cflags="-O1 -Wall -Wextra -Werror", rtol=1e-4, atol=1e-5)
    assert r.ok, r.outputs
