"""Arena plan invariants: no two buffers alive at the same time overlap; views and in-place ops share."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from edgec.codegen.lower import lower_file
from edgec.codegen.memory import plan_memory


def _check_no_overlap(plan):
    arena = [b for b in plan.buffers if b.where[0] == "arena"]
    for i, a in enumerate(arena):
        assert a.offset % 64 == 0
        assert a.offset + a.size <= plan.arena_bytes
        for b in arena[i + 1:]:
            live_together = a.start <= b.end and b.start <= a.end
            disjoint = a.offset + a.size <= b.offset or b.offset + b.size <= a.offset
            assert not live_together or disjoint, (a.members, b.members)


def _chain_model(path, n=12):
    """x -> (Relu, Exp, Mul-by-self, Reshape...) a chain with a long skip connection."""
    nodes, prev = [], "x"
    for i in range(n):
        op = ["Relu", "Exp", "Tanh", "Sigmoid"][i % 4]
        nodes.append(helper.make_node(op, [prev], [f"t{i}"]))
        prev = f"t{i}"
    nodes.append(helper.make_node("Flatten", [prev], ["f"], axis=1))
    nodes.append(helper.make_node("Flatten", ["t0"], ["g"], axis=1))
    nodes.append(helper.make_node("Add", ["f", "g"], ["y"]))
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def test_chain_plan_reuses_and_never_overlaps(tmp_path):
    _chain_model(tmp_path / "m.onnx")
    g = lower_file(tmp_path / "m.onnx")
    plan = plan_memory(g, [[] for _ in g.nodes], [])
    _check_no_overlap(plan)
    # 12 same-size intermediates, but at most a few alive at once: in-place and reuse make the arena small
    assert plan.naive_bytes >= 12 * 1024
    assert plan.arena_bytes <= 3 * 1024
    # Exp reads t0, which stays alive for the skip connection: no in-place there; Tanh works in place on t1
    by_name = {t.name: t for n in g.nodes for t in n.outputs}
    assert plan.location[id(by_name["t1"])] != plan.location[id(by_name["t0"])]
    assert plan.location[id(by_name["t2"])] == plan.location[id(by_name["t1"])]
    # the view (Flatten) of t0 shares t0's buffer
    flat = next(n for n in g.nodes if n.op == "Flatten" and n.inputs[0].name == "t0")
    assert plan.location[id(flat.outputs[0])] == plan.location[id(flat.inputs[0])]


def test_scratch_lives_one_layer(tmp_path):
    _chain_model(tmp_path / "m.onnx", n=6)
    g = lower_file(tmp_path / "m.onnx")
    scratch = [[i] for i in range(len(g.nodes))]
    plan = plan_memory(g, scratch, [1000 + 64 * i for i in range(len(g.nodes))])
    _check_no_overlap(plan)
    assert len(plan.scratch_offsets) == len(g.nodes)


def test_real_model_plans(onnx_light):
    for name in ("squeezenet", "resnet50", "inception_v1"):
        g = lower_file(onnx_light(name))
        rng = np.random.default_rng(0)
        scratch_sizes = [int(s) for s in rng.integers(64, 100_000, len(g.nodes))]
        plan = plan_memory(g, [[i] for i in range(len(g.nodes))], scratch_sizes)
        _check_no_overlap(plan)
        assert plan.arena_bytes < plan.naive_bytes / 2, name
