"""Pruning on the trained digits CNN (and ppocr for channel pruning through SE blocks and depthwise convs)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from edgec.analysis import model_stats
from edgec.errors import EdgecError
from edgec.model import load_model
from edgec.optimizer import channel
from edgec.optimizer.graph import get_init
from edgec.optimizer.prune import as_rows, layer_sparsity, parse_spec, prune_weights, select_layers
from edgec.optimizer.runner import session

from opt_helpers import cli


def _digits(digits_cnn):
    from edgec.optimizer.graph import name_nodes
    from edgec.optimizer.graph_passes import constants_to_initializers

    return name_nodes(constants_to_initializers(load_model(digits_cnn.model)))


def _accuracy(model, npz) -> float:
    d = np.load(npz)
    s = session(model)
    return float(np.mean([s.run(None, {"input": d["input"][i:i + 1]})[0].argmax() == d["labels"][i]
                          for i in range(len(d["labels"]))]))


def test_parse_specs():
    assert str(parse_spec("block:4x4:0.5")) == "block:4x4:0.5"
    assert parse_spec("nm:2:4").amount == 0.5
    assert parse_spec("channel:0.3").kind == "channel"
    for bad in ("magic:0.5", "unstructured:1.0", "unstructured:-0.1", "block:4:0.5", "nm:4:2", "unstructured:x"):
        with pytest.raises(EdgecError):
            parse_spec(bad)


def test_unstructured_80_percent(digits_cnn):
    m = _digits(digits_cnn)
    chosen, _ = select_layers(m, [], False)
    out = prune_weights(m, parse_spec("unstructured:0.8"))
    assert abs(layer_sparsity(out, {n.name for n in chosen}) - 0.8) <= 0.01
    onnx.checker.check_model(out)
    # first conv and last classifier untouched by default
    first, last = m.graph.node[[n.op_type for n in m.graph.node].index("Conv")], [n for n in m.graph.node if n.op_type == "Gemm"][0]
    for n in (first, last):
        assert np.array_equal(get_init(out, n.input[1]), get_init(m, n.input[1]))


def test_unstructured_global_scope(digits_cnn):
    m = _digits(digits_cnn)
    chosen, _ = select_layers(m, [], False)
    out = prune_weights(m, parse_spec("unstructured:0.8"), scope="global")
    assert abs(layer_sparsity(out, {n.name for n in chosen}) - 0.8) <= 0.01


def test_block_4x4_zeros_whole_blocks(digits_cnn):
    m = _digits(digits_cnn)
    out = prune_weights(m, parse_spec("block:4x4:0.5"))
    layers, _ = select_layers(m, [], False)
    for n in layers:
        before, after = as_rows(n, get_init(m, n.input[1])), as_rows(n, get_init(out, n.input[1]))
        h, w = before.shape
        zero_blocks = 0
        for i in range(0, h, 4):
            for j in range(0, w, 4):
                b, a = before[i:i + 4, j:j + 4], after[i:i + 4, j:j + 4]
                assert np.all(a == 0) or np.array_equal(a, b), f"{n.name}: block ({i},{j}) partly zeroed"
                zero_blocks += int(np.all(a == 0))
        total = -(-h // 4) * -(-w // 4)
        assert zero_blocks == round(0.5 * total)


def test_nm_2_of_4(digits_cnn):
    m = _digits(digits_cnn)
    out = prune_weights(m, parse_spec("nm:2:4"))
    for n in select_layers(m, [], False)[0]:
        rows = as_rows(n, get_init(out, n.input[1]))
        full = rows[:, : rows.shape[1] // 4 * 4].reshape(rows.shape[0], -1, 4)
        assert np.all(np.count_nonzero(full, axis=2) <= 2)


def test_channel_30_percent_cli(digits_cnn, digits_split, tmp_path, capsys):
    calib, ev = digits_split
    out, rep = tmp_path / "pruned.onnx", tmp_path / "report.json"
    rc, stdout, _ = cli(capsys, "optimize", digits_cnn.model, "-o", out, "--prune", "channel:0.3",
                        "--calib", calib, "--eval", ev, "--report", rep)
    assert rc == 0
    doc = json.loads(rep.read_text())
    before, after = doc["before"], doc["after"]
    assert after["macs"] < 0.8 * before["macs"] and after["params"] < 0.8 * before["params"]
    assert "top1" in before["eval"] and "top1" in after["eval"]
    assert "top-1" in stdout
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    stats = model_stats(load_model(out))
    assert stats["macs"] == after["macs"]
    acc = _accuracy(model, ev)
    assert acc == pytest.approx(after["eval"]["top1"])
    notes = next(p for p in doc["passes"] if p["name"] == "prune-channel")["notes"]
    assert any("first conv" in n for n in notes)  # skipped by default, and said so
    assert any(n.startswith("bias compensation in") for n in notes)
    # without retraining, bias compensation is what keeps the pruned model useful
    plain = channel.prune_channels(_digits(digits_cnn), 0.3)
    assert acc >= _accuracy(plain, ev) + 0.1


def test_channel_prune_through_se_and_depthwise(ppocr_cls):
    m = load_model(ppocr_cls, {"x": [1, 3, 48, 192]})
    from edgec.optimizer.graph_passes import constants_to_initializers, fold_batchnorm

    m = fold_batchnorm(constants_to_initializers(m))
    notes: list[str] = []
    out = channel.prune_channels(m, 0.3, notes=notes)
    onnx.checker.check_model(out)
    s0, s1 = model_stats(m), model_stats(out)
    assert s1["macs"] < 0.8 * s0["macs"] and s1["params"] < s0["params"]
    x = np.random.default_rng(0).standard_normal((1, 3, 48, 192)).astype(np.float32)
    y = session(out).run(None, {"x": x})[0]
    assert y.shape == (1, 2) and np.all(np.isfinite(y))


def test_channel_prune_skips_what_it_cannot_prune():
    """A conv feeding an op channel pruning does not understand (here Transpose) keeps its filters."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal((8, 8, 1, 1)).astype(np.float32), "w2"),
             numpy_helper.from_array(rng.standard_normal((6, 8, 1, 1)).astype(np.float32), "w3")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1"),
             helper.make_node("Conv", ["a", "w2"], ["b"], name="c2"),
             helper.make_node("Transpose", ["b"], ["t"], perm=[0, 1, 3, 2], name="tr"),
             helper.make_node("Conv", ["t", "w3"], ["y"], name="c3")]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    m = onnx.shape_inference.infer_shapes(m)
    notes: list[str] = []
    out = channel.prune_channels(m, 0.5, first_last=True, notes=notes)
    assert any(n.startswith("c2: kept 8") and "Transpose" in n for n in notes)
    assert any(n.startswith("c1: 8 -> 4") for n in notes)
    assert get_init(out, out.graph.node[1].input[1]).shape == (8, 4, 1, 1)


def test_sensitivity_scan_cli(digits_cnn, tmp_path, capsys):
    rep = tmp_path / "r.json"
    rc, stdout, _ = cli(capsys, "optimize", digits_cnn.model, "-o", tmp_path / "o.onnx", "--sensitivity",
                        "--prune", "unstructured:0.5", "--eval", digits_cnn.data, "--report", rep)
    assert rc == 0 and "sensitivity" in stdout
    rows = json.loads(rep.read_text())["sensitivity"]["rows"]
    assert rows and all(len(r["drops"]) == 4 for r in rows)
    # pruning a layer harder never helps much more than noise: the 90% column is the worst on average
    worst = np.mean([r["drops"]["0.9"] for r in rows])
    assert worst >= np.mean([r["drops"]["0.25"] for r in rows])


def test_channel_prune_through_concat_on_old_ir(onnx_light, tmp_path, capsys):
    """SqueezeNet (IR 3, weights listed as inputs): fire modules Concat two branches; pruned end to end."""
    rep = tmp_path / "r.json"
    rc, _, err = cli(capsys, "optimize", onnx_light("squeezenet"), "-o", tmp_path / "s.onnx", "--prune", "channel:0.3",
                     "--report", rep)
    assert rc == 0, err
    doc = json.loads(rep.read_text())
    assert doc["after"]["macs"] < 0.8 * doc["before"]["macs"]
    assert not any("reverted" in n for p in doc["passes"] for n in p["notes"])
    out = onnx.load(str(tmp_path / "s.onnx"))
    onnx.checker.check_model(out)
    assert [i.name for i in out.graph.input] == ["data_0"]
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    assert session(out).run(None, {"data_0": x})[0].shape == (1, 1000, 1, 1)


def test_budget_applies_to_pruning_too(digits_cnn, digits_split, tmp_path, capsys):
    """unstructured:0.8 wrecks the untrained-for-it digits CNN: with a budget nothing may be written."""
    calib, ev = digits_split
    rc, _, err = cli(capsys, "optimize", digits_cnn.model, "-o", tmp_path / "o.onnx", "--prune", "unstructured:0.8",
                     "--eval", ev, "--max-accuracy-drop", "2")
    assert rc != 0 and "top-1 points" in err and "nothing written" in err
    assert list(tmp_path.iterdir()) == []


def test_sensitivity_channel_marks_frozen_layers(digits_cnn, digits_split, tmp_path, capsys):
    calib, ev = digits_split
    rep = tmp_path / "r.json"
    rc, stdout, _ = cli(capsys, "optimize", digits_cnn.model, "-o", tmp_path / "o.onnx", "--sensitivity",
                        "--prune", "channel:0.3", "--calib", calib, "--eval", ev, "--report", rep)
    assert rc == 0
    rows = {r["layer"]: r["drops"] for r in json.loads(rep.read_text())["sensitivity"]["rows"]}
    assert all(v is None for v in rows["/3/Conv"].values())  # depthwise: follows the first conv's channels
    assert rows["/11/Conv"]["0.9"] is not None and "kept" in stdout


def _masked(m, a, keep):
    """The same model with the removed filters zeroed (weights and biases, depthwise biases too)."""
    from edgec.optimizer.graph import attr, set_init

    masked = onnx.ModelProto()
    masked.CopyFrom(m)
    for root, kept in keep.items():
        for conv in a.g.producers[root]:
            for pos in (1, 2)[: len(conv.input) - 1]:
                if conv.input[pos]:
                    w = get_init(masked, conv.input[pos]).copy()
                    w[np.setdiff1d(np.arange(w.shape[0]), kept)] = 0
                    set_init(masked, conv.input[pos], w)
    for n in masked.graph.node:
        k = channel._flat_keep(a, keep, n.output[0])
        if n.op_type == "Conv" and k is not None and len(n.input) > 2 and attr(n, "group", 1) > 1:
            b = get_init(masked, n.input[2]).copy()
            b[np.setdiff1d(np.arange(b.size), k)] = 0
            set_init(masked, n.input[2], b)
    return masked


def test_channel_prune_equals_zeroed_filters(ppocr_cls):
    """Invariant: removing channels computes exactly what zeroing them does (ppocr: ReLU/HardSwish/SE gates all
    map a zero channel to zero), so the slicing through every op is right, not just shape-valid."""
    from edgec.optimizer.graph_passes import constants_to_initializers, fold_batchnorm, ort_basic

    m = ort_basic(fold_batchnorm(constants_to_initializers(load_model(ppocr_cls, {"x": [1, 3, 48, 192]}))))
    m = channel.topo_sort(m)
    a = channel.Analysis(m)
    keep, _ = channel.choose(m, a, 0.3)
    assert len(keep) > 10
    pruned = channel.apply(m, a, keep)
    x = np.random.default_rng(0).standard_normal((1, 3, 48, 192)).astype(np.float32)
    ya = session(_masked(m, a, keep)).run(None, {"x": x})[0]
    yb = session(pruned).run(None, {"x": x})[0]
    assert np.allclose(ya, yb, atol=1e-5)
    assert not np.allclose(yb, session(m).run(None, {"x": x})[0], atol=1e-3)  # and it did prune something real
