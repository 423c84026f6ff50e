"""Arena plan invariants: no two buffers alive at the same time overlap; views and in-place ops share."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from edgec.codegen.lower import lower_file
from edgec.codegen import verify
from edgec.codegen.memory import INPLACE_ATTR, mark_inplace_concats, plan_memory


def _check_no_overlap(plan):
    for b in plan.buffers:  # a Concat input nested in its output: inside it, alive within it
        if b.parent is not None:
            assert b.parent.offset <= b.offset and b.offset + b.size <= b.parent.offset + b.parent.size
            assert b.parent.start <= b.start and b.end <= b.parent.end
    arena = [b for b in plan.buffers if b.where[0] == "arena" and b.parent is None]
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
        mark_inplace_concats(g)
        rng = np.random.default_rng(0)
        scratch_sizes = [int(s) for s in rng.integers(64, 100_000, len(g.nodes))]
        plan = plan_memory(g, [[i] for i in range(len(g.nodes))], scratch_sizes)
        _check_no_overlap(plan)
        assert plan.arena_bytes < plan.naive_bytes / 2, name
        nested = sum(b.parent is not None for b in plan.buffers)
        concats = [n for n in g.nodes if n.op == "Concat"]
        # SqueezeNet's 8 fire modules and Inception's 9 blocks: every branch written into the Concat's output
        assert nested == sum(len(n.inputs) for n in concats) > 0 or name == "resnet50" and not concats, name


def _concat_model(path):
    """Two conv branches and the graph input concatenated on channels; branch a also read by a Relu output,
    so only branch b can be written in place (a is read twice, x is a graph input)."""
    rng = np.random.default_rng(1)
    w = [helper.make_tensor(f"w{k}", TensorProto.FLOAT, [c, 3, k, k], rng.standard_normal((c, 3, k, k)).ravel())
         for k, c in ((1, 16), (3, 16))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]),
             helper.make_node("Conv", ["x", "w3"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["a", "b", "x"], ["c"], axis=1),
             helper.make_node("Relu", ["c"], ["y"]),
             helper.make_node("Sigmoid", ["a"], ["z"])]
    g = helper.make_graph(nodes, "cat", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 35, 12, 12]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 16, 12, 12])], initializer=w)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def test_concat_inputs_written_in_place(tmp_path):
    _concat_model(tmp_path / "m.onnx")
    g = lower_file(tmp_path / "m.onnx")
    mark_inplace_concats(g)
    cat = next(n for n in g.nodes if n.op == "Concat")
    assert cat.attr(INPLACE_ATTR) == [False, True, False]
    plan = plan_memory(g)
    _check_no_overlap(plan)
    b = next(t for t in cat.inputs if t.name.endswith("b"))
    c = cat.outputs[0]
    assert plan.location[id(b)][1] == plan.location[id(c)][1] + 16 * 144 * 4  # after a's 16 channels
    r = verify(tmp_path / "m.onnx", out_dir=tmp_path / "p", cflags="-O2 -Wall -Wextra -Werror", threads=2)
    assert r.ok, r.outputs
    assert "copy-part" in (tmp_path / "p" / "model.c").read_text()


def _residual_model(path, hw, c):
    """Bottleneck-like 1x1 convs with residual Adds (before the Relu): `a` dies at the Add after conv c2 (the conv
    may write over it); r is conv c3's input and residual (not overwritable); q's residual r2 is read again by the
    last Add (alive after c4)."""
    rng = np.random.default_rng(2)
    names = ("w0", "w1", "w2", "w3", "w4")
    w = [helper.make_tensor(n, TensorProto.FLOAT, [c, c, 1, 1],
                            (rng.standard_normal((c, c)) / np.sqrt(c)).ravel()) for n in names]
    bias = helper.make_tensor("bias", TensorProto.FLOAT, [c], rng.standard_normal(c))
    nodes = [helper.make_node("Conv", ["x", "w0", "bias"], ["a0"]), helper.make_node("Relu", ["a0"], ["a"]),
             helper.make_node("Conv", ["a", "w1"], ["b0"]), helper.make_node("Relu", ["b0"], ["b"]),
             helper.make_node("Conv", ["b", "w2", "bias"], ["s0"]), helper.make_node("Add", ["s0", "a"], ["s1"]),
             helper.make_node("Relu", ["s1"], ["r"]),
             helper.make_node("Conv", ["r", "w3"], ["t0"]), helper.make_node("Add", ["t0", "r"], ["t1"]),
             helper.make_node("Relu", ["t1"], ["r2"]),
             helper.make_node("Conv", ["r2", "w4", "bias"], ["q0"]), helper.make_node("Add", ["q0", "r2"], ["q1"]),
             helper.make_node("Relu", ["q1"], ["q"]), helper.make_node("Add", ["q", "r2"], ["y"])]
    g = helper.make_graph(nodes, "res", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, hw, hw])],
                          initializer=w + [bias])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


@pytest.mark.parametrize("hw,c,env,threads", [(14, 40, {}, 1), (14, 40, {}, 2), (7, 128, {}, 2),
                                              (14, 40, {"EDGEC_BLK": "kc-half"}, 1),
                                              (14, 40, {"EDGEC_LAYOUT": "nchwc"}, 2)])
def test_conv_writes_over_its_dying_residual(tmp_path, monkeypatch, hw, c, env, threads):
    """A conv whose fused residual dies there takes the residual's buffer and accumulates onto it (NCHW GEMM,
    transposed GEMM at 7x7, K in blocks, the channel-blocked 1x1); a residual that is also the conv's input or
    is read later keeps its own. Built with ASan + UBSan, equal to onnxruntime."""
    from edgec.codegen import build_project, compile_model
    from edgec.codegen.memory import RES_ATTR, RES_TAKEN
    from edgec.codegen.verifier import onnxruntime_outputs, run_binary
    from edgec.codegen import layout
    from edgec.codegen.targets import get_target
    if "EDGEC_LAYOUT" in env and not layout.block_width(get_target("native")):
        pytest.skip("this host has no vector ISA with blocked kernels")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    _residual_model(tmp_path / "m.onnx", hw, c)
    b = compile_model(tmp_path / "m.onnx", tmp_path / "p", threads=threads)
    _check_no_overlap(b.plan)
    fused = [n for n in b.graph.nodes if n.op == "Conv" and n.epilogue.residual is not None]
    assert [n.epilogue.residual.name.removesuffix("__nchwc") for n in fused] == ["a", "r", "r2"]
    loc = b.plan.location
    (c2, c3, c4), y = fused, lambda n: loc[id(n.outputs[0])]
    assert c2.attr(RES_ATTR) == RES_TAKEN and y(c2) == loc[id(c2.epilogue.residual)]
    assert c3.attr(RES_ATTR) is None and y(c3) != loc[id(c3.epilogue.residual)]
    assert c4.attr(RES_ATTR) is None and y(c4) != loc[id(c4.epilogue.residual)]
    san = "-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all -Wall -Wextra -Werror"
    bins = build_project(b.dir, "native", cflags=san, ldflags="-fsanitize=address,undefined", jobs=2)
    x = np.random.default_rng(3).standard_normal((1, c, hw, hw)).astype(np.float32)
    _, (want,) = onnxruntime_outputs(tmp_path / "m.onnx", {"x": x})
    got = run_binary(bins["runner"], b.target, [x], tmp_path / "run", threads=threads)[0]
    algos = [la["algo"] for la in b.layers if la["op"] == "Conv" and "Add" in la["name"]]
    path = "conv1x1-nchwc" if "EDGEC_LAYOUT" in env else "gemm-"  # at 7x7 gemm-t where the cost model picks it
    assert len(algos) == 3 and all(a.startswith(path) for a in algos), algos
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
