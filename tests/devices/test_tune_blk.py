"""Cache blocking as a tuning knob (registry family blk): a full tune measures the blocking variants of a dense
GEMM-path layer (those giving the default's code dropped), a transfer measures a source record's blocking on a
layer of the same class and another shape, and compile forces a recorded blocking on its layer."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from devkit import run_cli
from edgec.devices import tuningdb
from edgec.devices.inventory import Inventory
from edgec.devices.transport import open_transport
from edgec.devices.tune import tune

pytestmark = [pytest.mark.slow]

BLK = ("blk-nc-half", "blk-nc-double", "blk-kc-whole")


def _gemm_model(path, c: int, hw: int, seed: int = 0):
    """A 1x1 stride-2 conv (strided pack GEMM) + ReLU, then a 1x1 conv (packed 1x1 GEMM) + ReLU (a strided 3x3
    may run GSPC's row kernel, which has no cache blocking)."""
    rng = np.random.default_rng(seed)
    inits, nodes, cur = [], [], "x"
    for i, (ci, co, k, s) in enumerate(((c, 2 * c, 1, 2), (2 * c, 2 * c, 1, 1))):
        inits += [numpy_helper.from_array((rng.standard_normal((co, ci, k, k)) / np.sqrt(ci * k * k))
                                          .astype(np.float32), f"w{i}"),
                  numpy_helper.from_array((rng.standard_normal(co) * 0.1).astype(np.float32), f"b{i}")]
        nodes += [helper.make_node("Conv", [cur, f"w{i}", f"b{i}"], [f"c{i}"], pads=[k // 2] * 4, strides=[s, s]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        cur = f"r{i}"
    ho = (hw - 1) // 2 + 1
    g = helper.make_graph(nodes, path.stem, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                          [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [1, 2 * c, ho, ho])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_blockings_are_measured_transferred_and_compiled(edgec_env, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EDGEC_LAYOUT", "nchw")  # the GEMM drivers, not the channel-blocked kernels
    src, dst = _gemm_model(tmp_path / "src.onnx", 24, 45), _gemm_model(tmp_path / "dst.onnx", 32, 39, seed=1)
    dev = Inventory().resolve(["local"])[0]
    with open_transport(dev) as t, tuningdb.TuningDB(tmp_path / "full.sqlite") as db:
        rep = tune(src, dev, t, db=db, final_bench=False, layout="nchw")
    rows = [r for r in rep["layers"] if "record" in r]
    assert len(rows) == 2, rep["layers"]
    for row in rows:
        trials = {x["variant"]: x for x in row["record"]["trials"]}
        assert set(BLK) <= set(trials), trials
        live = [v for v in BLK if "rejected" not in trials[v]]
        assert live, trials  # at least one blocking differs from the cost model's on these layers
        for v in BLK:
            x = trials[v]
            if v in live:  # its own code, checked against onnxruntime, timed
                assert x["algo"] == f"{trials['default']['algo']}/{v[4:]}" and x["ms"] > 0, x
            else:
                assert x["rejected"] == "same code as default", x
    # transfer: a source record whose winner is a blocking, for the class of dst's 1x1 s2 layer (other shapes)
    with open_transport(dev) as t, tuningdb.TuningDB(tmp_path / "xfer.sqlite") as db:
        from edgec.devices.deploy import choose_mode
        facts = tuningdb.device_facts(dev, t, choose_mode(dev, "auto"), 1)
        db.put(tuningdb.Record(tuningdb.fingerprint(facts), "conv1x1s2+relu:src", "conv1x1s2+relu", "blk-nc-half",
                               "blk=nc-half", "gemm/nc-half", 1.0, "gemm", 1.3, "measured", "src.onnx", dev.name,
                               "2026-11-25", False, facts, []))
        rep = tune(dst, dev, t, db=db, transfer_only=True, final_bench=False, layout="nchw")
    (row,) = [r for r in rep["layers"] if r["class"] == "conv1x1s2+relu"]
    trials = {x["variant"]: x for x in row["record"]["trials"]}
    assert set(trials) == {"default", "blk-nc-half"} and row["source"].startswith("transferred from src.onnx")
    assert trials["blk-nc-half"]["algo"].endswith("/nc-half") and trials["blk-nc-half"]["ms"] > 0, trials
    # compile: a record of this machine forcing a blocking on dst's 1x1 layer (400 columns); the others keep theirs
    rc, out, err = run_cli("compile", str(dst), "-o", str(tmp_path / "u"), "--json", "--no-tuning")
    assert rc == 0, err
    base = {l["details"]["signature"]: l for l in json.loads(out)["layers"] if "signature" in l["details"]}
    sig = next(s for s in base if s.startswith("conv1x1s1+relu:"))
    with open_transport(dev) as t, tuningdb.TuningDB() as db:
        facts = tuningdb.device_facts(dev, t, choose_mode(dev, "auto"), 1)
        db.put(tuningdb.Record(tuningdb.fingerprint(facts), sig, "conv1x1s1+relu", "blk-nc-double", "blk=nc-double",
                               base[sig]["algo"] + "/nc-double", 1.0, base[sig]["algo"], 1.3, "measured", "dst.onnx",
                               dev.name, "2026-11-25", False, facts, []))
    rc, out, err = run_cli("compile", str(dst), "-o", str(tmp_path / "t"), "--json")
    assert rc == 0, err
    layers = {l["details"]["signature"]: l for l in json.loads(out)["layers"] if "signature" in l["details"]}
    assert layers[sig]["algo"] == base[sig]["algo"] + "/nc-double" and layers[sig]["details"]["blocking"] == "nc-double"
    assert layers[sig]["details"]["nc"] == 2 * base[sig]["details"]["nc"] and layers[sig]["details"]["nc"] < 400
    assert all(layers[s]["algo"] == base[s]["algo"] for s in base if s != sig)
    # and the project computes the model
    from edgec.codegen import build_project
    from edgec.codegen.targets import get_target
    from edgec.codegen.verifier import onnxruntime_outputs, run_binary
    x = np.random.default_rng(5).standard_normal((1, 32, 39, 39)).astype(np.float32)
    runner = build_project(tmp_path / "t", "native", cflags="-O2 -Wall -Wextra -Werror", jobs=2)["runner"]
    (got,) = run_binary(runner, get_target("native"), [x], tmp_path / "run", threads=1)
    (want,) = onnxruntime_outputs(dst, {"x": x})[1]
    assert float(np.max(np.abs(got - want) / (1 + np.abs(want)))) <= 1e-4
