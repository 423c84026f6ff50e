"""Each graph pass: structure (what it removed/fused), equal outputs vs its input on random data, invariants."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from edgec.model import load_model
from edgec.optimizer import graph_passes as gp
from edgec.optimizer.passes import GRAPH_PASSES, equal_outputs
from edgec.optimizer.runner import random_feeds

from opt_helpers import ops, pattern_model


def _prepared():
    return gp.constants_to_initializers(pattern_model())


EXPECTED = {  # pass -> (op, count after) on the pattern model
    "remove-identity": [("Identity", 0), ("Dropout", 0)],
    "fold-batchnorm": [("BatchNormalization", 0)],
    "matmul-add-to-gemm": [("MatMul", 0), ("Gemm", 1)],
    "cse": [("Relu", 2)],
    "dead-nodes": [("Conv", 1)],
}


@pytest.mark.parametrize("name,fn", GRAPH_PASSES, ids=[n for n, _ in GRAPH_PASSES])
def test_pass_keeps_outputs_on_pattern_model(name, fn):
    src = _prepared()
    out = fn(src)
    onnx.checker.check_model(out)
    assert equal_outputs(src, out, random_feeds(src, 3, seed=7)) < 1e-5
    for op, count in EXPECTED.get(name, []):
        assert ops(out).get(op, 0) == count, (name, ops(out))
    assert [o.name for o in out.graph.output] == ["y"]  # graph outputs keep their names


def test_dedupe_initializers_merges_identical_weights():
    src = _prepared()
    out = gp.dedupe_initializers(src)
    names = {t.name for t in out.graph.initializer}
    assert ("w" in names) != ("w_dup" in names)
    assert equal_outputs(src, out) < 1e-6


def test_constants_become_initializers():
    out = gp.constants_to_initializers(pattern_model())
    assert "Constant" not in ops(out) and "half" in {t.name for t in out.graph.initializer}


@pytest.mark.parametrize("name,fn", GRAPH_PASSES, ids=[n for n, _ in GRAPH_PASSES])
def test_pass_keeps_outputs_on_ppocr(ppocr_cls, name, fn):
    src = gp.constants_to_initializers(load_model(ppocr_cls, {"x": [1, 3, 48, 192]}))
    out = fn(src)
    onnx.checker.check_model(out)
    assert equal_outputs(src, out, random_feeds(src, 2, seed=3)) < 1e-4
    if name == "fold-batchnorm":
        assert ops(src)["BatchNormalization"] == 35 and "BatchNormalization" not in ops(out)


def test_ort_basic_gives_plain_onnx(ppocr_cls):
    out = gp.ort_basic(gp.constants_to_initializers(load_model(ppocr_cls, {"x": [1, 3, 48, 192]})))
    assert all(n.domain in ("", "ai.onnx") for n in out.graph.node)
    assert {o.domain for o in out.opset_import} <= {"", "ai.onnx"}


def test_opset_upgrade_keeps_outputs(ppocr_cls):
    src = gp.constants_to_initializers(load_model(ppocr_cls, {"x": [1, 3, 48, 192]}))
    out = gp.opset_upgrade(src, 13)
    assert next(o.version for o in out.opset_import if o.domain == "") == 13
    assert equal_outputs(src, out) < 1e-5


def test_fold_batchnorm_gemm_and_convtranspose():
    rng = np.random.default_rng(1)
    from onnx import TensorProto, helper, numpy_helper

    def bn_inits(prefix, n):
        return [numpy_helper.from_array(a.astype(np.float32), f"{prefix}{k}") for k, a in
                zip("sbmv", (rng.random(n) + 0.5, rng.standard_normal(n), rng.standard_normal(n), rng.random(n) + 0.5))]

    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "wt"),  # ConvTranspose g=2: 6 out
             numpy_helper.from_array(rng.standard_normal((5, 6)).astype(np.float32), "wg"),
             numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "bg"), *bn_inits("a", 6), *bn_inits("c", 5)]
    nodes = [helper.make_node("ConvTranspose", ["x", "wt"], ["t"], group=2),
             helper.make_node("BatchNormalization", ["t", "as", "ab", "am", "av"], ["tb"]),
             helper.make_node("GlobalAveragePool", ["tb"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "wg", "bg"], ["g"], transB=1),
             helper.make_node("BatchNormalization", ["g", "cs", "cb", "cm", "cv"], ["y"])]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    m = onnx.shape_inference.infer_shapes(m)
    out = gp.fold_batchnorm(m)
    assert "BatchNormalization" not in ops(out)
    assert equal_outputs(m, out, random_feeds(m, 3)) < 1e-5
