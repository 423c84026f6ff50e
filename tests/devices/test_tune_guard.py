"""`edgec tune`'s whole-model check: a record that makes the model slower in place of the cost model's pick is
rejected for that model only (real builds and runs on `local`, the tuning database in SQLite)."""

from __future__ import annotations

import dataclasses
import json
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from devkit import run_cli
from edgec.devices import tuningdb
from edgec.devices.inventory import Inventory
from edgec.devices.transport import open_transport
from edgec.codegen.options import CompileOptions
from edgec.devices.tune import GUARD_LAYER_GAIN, Tuner, guard_decision, plan, tune

pytestmark = [pytest.mark.slow]


def _convs(path, chans: int, size: int, pool: bool):
    """3x3 conv + Relu (its signature shared by both models), then a max pool (pool) or a second conv."""
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((chans, chans, 3, 3)) * 0.1).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w0"), numpy_helper.from_array(np.zeros(chans, np.float32), "b0")]
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"])]
    if pool:
        nodes.append(helper.make_node("MaxPool", ["r0"], ["y"], kernel_shape=[2, 2], strides=[2, 2]))
        out = [1, chans, size // 2, size // 2]
    else:
        inits.append(numpy_helper.from_array((rng.standard_normal((chans, 1, 3, 3)) * 0.3).astype(np.float32), "w1"))
        nodes += [helper.make_node("Conv", ["r0", "w1"], ["c1"], pads=[1, 1, 1, 1], group=chans),
                  helper.make_node("Relu", ["c1"], ["y"])]
        out = [1, chans, size, size]
    g = helper.make_graph(nodes, path.stem, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, chans, size, size])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def _slow_record(a, dev, t, chans: int = 40):
    """Tune a's layers for real (no check), then record for its 3x3 conv the slowest variant the search timed, as
    if it had won: a record known to make the model slower. Returns (that record, the real one)."""
    rep = tune(a, dev, t, final_bench=False, guard=False)
    with tuningdb.TuningDB() as db:
        conv = next(r for r in db.records(rep["fingerprint"]) if r.cls == "conv3x3s1+relu"
                    and f"C{chans}H24W24K{chans}G1" in r.signature)
        # a record known to be slower: the slowest variant the search timed, recorded as if it had won
        slow = max((x for x in conv.trials if "ms" in x and x["variant"] not in ("default", conv.variant)),
                   key=lambda x: x["ms"])
        default_ms = next(x["ms"] for x in conv.trials if x["variant"] == "default")
        assert slow["ms"] > 1.3 * default_ms, conv.trials  # slower beyond this host's noise
        from edgec.codegen import variants
        var = next(v for v in variants.VARIANTS if v.name == slow["variant"])
        # its trials keep the pick and the slow variant only: no runner-up to try (the next test tries one)
        bad = dataclasses.replace(conv, variant=var.name, algo=slow["algo"],
                                  forced=var.forced_str({"G": 1, "kind": "conv"}),
                                  time_ms=default_ms / 2, default_ms=default_ms,
                                  trials=[x for x in conv.trials if "ms" not in x
                                          or x["variant"] in ("default", slow["variant"])])
        db.put(bad)
    return bad, conv


def test_the_whole_model_check_rejects_a_record_slower_in_the_model_for_that_model_only(edgec_env, monkeypatch):
    # 28 channels: not whole blocks of 8 or 16 lanes, so the conv stays out of the depthwise conv's region (a
    # Winograd conv on whole blocks would join it, codegen/layout.py, and be tuned with the region, not alone)
    a = _convs(edgec_env / "a.onnx", 28, 24, pool=False)
    b = _convs(edgec_env / "b.onnx", 28, 24, pool=True)  # the same first layer (signature), another model
    dev = Inventory().resolve(["local"])[0]
    with open_transport(dev) as t:
        bad, conv = _slow_record(a, dev, t, 28)
        rep = tune(a, dev, t)  # every layer resumed: the check alone runs, then the whole-model bench
    g = rep["guard"]
    # the forced record slowed the model: its interval (the 4th smallest and largest of 15 rounds, as the check
    # runs; 5 rounds' would be their min and max, which one disturbed round on the shared host moves) is above 1
    assert g["tuned_decision"] == "loss" and g["tuned_interval"][0] > 1, g
    # the constants learned from the records are checked too (where they move a pick): kept or not, the forced
    # record is what slowed the model
    assert bad.signature in g["dropped"] and set(g["dropped"]) <= {bad.signature, tuningdb.LEARNED}, g
    checked = {x["signature"]: x for x in g["records"]}
    x = checked[bad.signature]
    assert not x["kept"] and x["decision"] == "loss" and x["interval"][0] > 1 and x["with_over_without"] > 1
    assert "faster alone" in x["why"] and "a significant loss" in x["why"]
    assert "runner_up" not in x and g["replaced"] == {}  # no other variant timed: nothing else built
    row = next(r for r in rep["layers"] if r["signature"] == bad.signature)
    assert row["rejected"] == checked[bad.signature]["why"]
    with tuningdb.TuningDB() as db:
        assert db.get(bad.fingerprint, bad.signature).algo == bad.algo  # the record stays, for other models
        rej = db.rejections(bad.fingerprint, tuningdb.model_key(a))
        assert set(rej) == set(g["dropped"]) and rej[bad.signature].algo == bad.algo
        assert db.rejections(bad.fingerprint, tuningdb.model_key(b)) == {}
    # a's builds keep the cost model's pick on that layer and --explain says why; b's still use the record
    rc, out, err = run_cli("compile", str(a), "-o", str(edgec_env / "ca"), "--json")
    assert rc == 0, err
    layer = next(l for l in json.loads(out)["layers"] if l["details"].get("signature") == bad.signature)
    assert layer["algo"] == conv.default_algo and layer["algo"] != bad.algo
    assert "found it slower inside the whole model" in layer["details"]["tuned"]
    rc, out, err = run_cli("compile", str(b), "-o", str(edgec_env / "cb"), "--json")
    assert rc == 0, err
    layer = next(l for l in json.loads(out)["layers"] if l["details"].get("signature") == bad.signature)
    assert layer["algo"] == bad.algo and layer["details"]["tuned"].startswith("tuned on local")
    # the final bench times what compile builds: the tuned build no longer uses the record
    assert rep["whole_model"]["tuned_layers"] == 0 or bad.signature not in g.get("kept", [])
    # a second tune of a does not check the rejected record again
    with open_transport(dev) as t:
        again = tune(a, dev, t, final_bench=False, guard=True)
    assert again["guard"]["rejected_before"] == sorted(g["dropped"])
    assert bad.signature not in [x["signature"] for x in again["guard"]["records"]]
    # the rejections travel with the records: imported on another machine (an empty database here), a's
    # builds still leave the record out
    rc, out, err = run_cli("tune", "--export", str(edgec_env / "lab.json"))
    assert rc == 0, err
    monkeypatch.setenv("EDGEC_CACHE_DIR", str(edgec_env / "elsewhere"))
    rc, out, err = run_cli("tune", "--import", str(edgec_env / "lab.json"))
    assert rc == 0, err
    with tuningdb.TuningDB() as db:
        assert set(db.rejections(bad.fingerprint, tuningdb.model_key(a))) == set(g["dropped"])
    rc, out, err = run_cli("compile", str(a), "-o", str(edgec_env / "ca2"), "--json")
    assert rc == 0, err
    layer = next(l for l in json.loads(out)["layers"] if l["details"].get("signature") == bad.signature)
    assert layer["algo"] == conv.default_algo and "found it slower inside the whole model" in layer["details"]["tuned"]


def test_records_the_check_had_no_budget_for_stay_out_of_a_slower_model_until_checked(edgec_env, monkeypatch):
    """The tuned build is a significant loss and the budget runs out before the record is timed in the model:
    it is not kept unchecked (the model's builds leave it out, --explain says why), and the next tune checks it."""
    a = _convs(edgec_env / "a.onnx", 36, 24, pool=False)  # a layer of its own in the session's database
    dev = Inventory().resolve(["local"])[0]
    real_race = Tuner.race

    def race_then_out_of_budget(self, x, y, rounds=None):
        out = real_race(self, x, y, rounds)
        self.budget = 0.0  # the budget ends right after the first race: no item gets its own check
        return out

    with open_transport(dev) as t:
        bad, conv = _slow_record(a, dev, t, 36)
        monkeypatch.setattr(Tuner, "race", race_then_out_of_budget)
        rep = tune(a, dev, t, final_bench=False, guard=True)
        g = rep["guard"]
        assert g["tuned_decision"] == "loss" and g["records"] == [], g
        assert bad.signature in g["unchecked"] and not g["unchecked_kept"], g
        assert "left out of this model's builds until a later tune checks them" in g["verdict"]
        with tuningdb.TuningDB() as db:
            rej = db.rejections(bad.fingerprint, tuningdb.model_key(a))
            assert rej[bad.signature].reason.startswith("not checked in the model")
        rc, out, err = run_cli("compile", str(a), "-o", str(edgec_env / "ca"), "--json")
        assert rc == 0, err
        layer = next(l for l in json.loads(out)["layers"] if l["details"].get("signature") == bad.signature)
        assert layer["algo"] == conv.default_algo and "not checked in the model" in layer["details"]["tuned"]
        # with its budget, the next tune times it in the model like any record, and rejects it for what it does
        monkeypatch.setattr(Tuner, "race", real_race)
        again = tune(a, dev, t, final_bench=False, guard=True)
    x = next(x for x in again["guard"]["records"] if x["signature"] == bad.signature)
    assert not x["kept"] and x["decision"] == "loss" and not again["guard"]["unchecked"], again["guard"]
    with tuningdb.TuningDB() as db:
        assert not db.rejections(bad.fingerprint, tuningdb.model_key(a))[bad.signature].reason.startswith(
            "not checked")


def test_the_check_begins_an_item_only_when_the_last_ones_time_still_fits_in_the_budget(edgec_env, monkeypatch):
    """After the first race the budget left is half of what that race alone took: the check is not over its budget
    yet, but one more item (two whole-model builds and a race) cannot fit, so it begins none: the record stays
    unchecked and nothing more is built (stopping only once past the budget overran it by an item)."""
    a = _convs(edgec_env / "a.onnx", 44, 24, pool=False)  # a layer of its own in the session's database
    dev = Inventory().resolve(["local"])[0]
    real_race, real_deploy = Tuner.race, Tuner.deploy_whole
    events: list[str] = []

    def race_leaving_half_a_race(self, x, y, rounds=None):
        t0 = time.monotonic()
        out = real_race(self, x, y, rounds)
        if "race" not in events:
            self.budget = (self.elapsed() + 0.5 * (time.monotonic() - t0)) / self.share
        events.append("race")
        return out

    def deploy_counted(self, *args, **kwargs):
        events.append("build")
        return real_deploy(self, *args, **kwargs)

    with open_transport(dev) as t:
        bad, conv = _slow_record(a, dev, t, 44)
        monkeypatch.setattr(Tuner, "race", race_leaving_half_a_race)
        monkeypatch.setattr(Tuner, "deploy_whole", deploy_counted)
        rep = tune(a, dev, t, final_bench=False, guard=True)
    g = rep["guard"]
    assert events == ["build", "build", "race"], events  # untuned and tuned builds, their race, then nothing
    assert g["tuned_decision"] == "loss" and g["records"] == [], g
    assert bad.signature in g["unchecked"] and not g["unchecked_kept"], g
    with tuningdb.TuningDB() as db:
        assert db.rejections(bad.fingerprint, tuningdb.model_key(a))[bad.signature].reason.startswith(
            "not checked in the model")


def test_candidates_can_be_timed_with_the_caches_evicted_between_runs(edgec_env, monkeypatch):
    """tune.EVICT_BYTES: the measurement program reads that much memory before each timed run (a diagnostic of
    the state a layer meets inside a model); the candidates are still checked and timed."""
    monkeypatch.setattr("edgec.devices.tune.EVICT_BYTES", 3 << 20)  # above the program's parse limit in bytes
    m = _convs(edgec_env / "e.onnx", 24, 12, pool=True)
    dev = Inventory().resolve(["local"])[0]
    with open_transport(dev) as t:
        rep = tune(m, dev, t, final_bench=False, layout="nchw")
    row = next(r for r in rep["layers"] if r["class"] == "conv3x3s1+relu")
    timed = [x for x in row["record"]["trials"] if "ms" in x]
    assert row["source"] == "measured" and len(timed) >= 2 and all(x["ms"] > 0 for x in timed)


def test_rejected_learned_constants_leave_that_models_picks_to_the_hand_set_ones(edgec_env, monkeypatch):
    """A rejection of tuningdb.LEARNED for a model: its builds fit no constants from the records (the picks of
    its layers without a record go back to the hand-set cost model), another model's builds still do."""
    from edgec.devices.deploy import choose_mode
    from test_tune_learn import geom, measured, record

    monkeypatch.setenv("EDGEC_CACHE_DIR", str(edgec_env / "cache"))  # a database of its own: codegen only here
    a = _convs(edgec_env / "a.onnx", 32, 28, pool=True)
    b = _convs(edgec_env / "b.onnx", 32, 28, pool=False)

    def conv_algo(model):
        rc, out, err = run_cli("compile", str(model), "-o", str(edgec_env / f"out-{model.stem}"), "--json")
        assert rc == 0, err
        layer = next(l for l in json.loads(out)["layers"] if "C32H28W28K32G1" in l["details"].get("signature", ""))
        return layer["algo"]

    hand_set = conv_algo(a)
    assert hand_set.startswith("winograd")
    dev = Inventory().resolve(["local"])[0]
    with open_transport(dev) as t:
        fp = tuningdb.fingerprint(tuningdb.device_facts(dev, t, choose_mode(dev, "auto"), 1))
    other = geom(96, 160, 28)  # another layer's record on this device: Winograd 2x slower than estimated
    with tuningdb.TuningDB() as db:
        db.put(dataclasses.replace(record(other, measured(other, 2.0)), fingerprint=fp))
    learned = conv_algo(a)
    assert learned != hand_set  # the fitted factors move the pick
    with tuningdb.TuningDB() as db:
        db.reject(tuningdb.Rejection(fp, tuningdb.model_key(a), tuningdb.LEARNED, "a.onnx", "learned",
                                     "learned constants", "slower", "local", "2026-11-25"))
    assert conv_algo(a) == hand_set
    assert conv_algo(b) == learned


def _conv_record(db, fp, chans, size):
    return next(r for r in db.records(fp) if r.cls == "conv3x3s1+relu" and f"C{chans}H{size}W{size}K{chans}G1" in r.signature)


def test_a_rejected_records_runner_up_gets_one_check_and_the_model_follows_its_verdict(edgec_env, monkeypatch):
    """The record forces the slowest variant the search timed (a significant loss in the model: rejected); its
    trials are made to say a third variant ran 1.5x faster than the cost model's pick alone, so that variant is the
    runner-up: checked once in the model against the cost model's pick, kept when not a significant loss (its claimed
    layer gain is over GUARD_LAYER_GAIN), and the model's builds then use it in place of the record."""
    from edgec.codegen import variants

    import os

    # a tuning database of its own: the session's holds the other tests' records, whose learned constants can make
    # the cost model's pick here the runner-up itself; the compiled runtime kernels are still the session's
    shared = os.environ["EDGEC_CACHE_DIR"]
    (edgec_env / "cache").mkdir()
    os.makedirs(os.path.join(shared, "objects"), exist_ok=True)
    os.symlink(os.path.join(shared, "objects"), edgec_env / "cache" / "objects")
    monkeypatch.setenv("EDGEC_CACHE_DIR", str(edgec_env / "cache"))
    a = _convs(edgec_env / "ru.onnx", 36, 24, pool=False)
    dev = Inventory().resolve(["local"])[0]
    with open_transport(dev) as t:
        rep = tune(a, dev, t, final_bench=False, guard=False, layout="nchw")
        with tuningdb.TuningDB() as db:
            conv = _conv_record(db, rep["fingerprint"], 36, 24)
            timed = {x["variant"]: x for x in conv.trials if "ms" in x}
            default_ms = timed["default"]["ms"]
            slow = max((x for x in timed.values() if x["variant"] not in ("default", conv.variant)),
                       key=lambda x: x["ms"])
            others = [x for x in timed.values() if x["variant"] not in ("default", slow["variant"])
                      and x["algo"] not in (slow["algo"], conv.default_algo)]
            assert others, conv.trials
            ru = others[0]
            trials = [{**x, "ms": default_ms / 1.5} if x["variant"] == ru["variant"] else x for x in conv.trials]
            var = next(v for v in variants.VARIANTS if v.name == slow["variant"])
            bad = dataclasses.replace(conv, variant=var.name, algo=slow["algo"], forced=var.forced_str({"G": 1, "kind": "conv"}),
                                      time_ms=default_ms / 2, default_ms=default_ms, trials=trials)
            db.put(bad)
        rep = tune(a, dev, t, final_bench=False, guard=True, layout="nchw")
    g = rep["guard"]
    x = next(x for x in g["records"] if x["signature"] == bad.signature)
    assert not x["kept"] and x["decision"] == "loss", x
    r = x["runner_up"]
    assert r["variant"] == ru["variant"] and r["algo"] == ru["algo"] and r["alone_speedup"] == 1.5 and r["checked"], r
    assert len(r["rounds"]) == 15 and r["decision"] in ("gain", "inconclusive", "loss")
    # 1.5x alone: kept unless a significant loss in the model, or unless the set kept together (the runner-up with
    # the other records) was then a significant loss against the untuned build, which revokes every keep
    revoked = g.get("kept_decision") == "loss"
    assert r["kept"] == (r["decision"] != "loss" and not revoked), (r, g.get("kept_decision"))
    if revoked:
        assert "together" in r.get("why", "") or r["decision"] == "loss", r
    with tuningdb.TuningDB() as db:
        rej = db.rejections(bad.fingerprint, tuningdb.model_key(a))[bad.signature]
    row = next(w for w in rep["layers"] if w["signature"] == bad.signature)
    monkeypatch.setenv("EDGEC_LAYOUT", "nchw")
    rc, out, err = run_cli("compile", str(a), "-o", str(edgec_env / "ca"), "--json")
    assert rc == 0, err
    layer = next(l for l in json.loads(out)["layers"] if l["details"].get("signature") == bad.signature)
    if r["kept"]:
        assert g["replaced"] == {bad.signature: ru["variant"]} and row["replaced_by"] == ru["variant"]
        assert rej.instead and rej.instead_variant == ru["variant"] and rej.instead_algo == ru["algo"]
        assert layer["algo"] == ru["algo"] and "runner-up" in layer["details"]["tuned"]
    else:
        assert g["replaced"] == {} and "replaced_by" not in row and rej.instead == ""
        assert layer["algo"] == conv.default_algo and "runner-up" not in layer["details"]["tuned"]


def test_the_decision_on_real_builds_keeps_a_faster_build_and_rejects_a_slower_one(edgec_env):
    """guard_decision on Tuner.race's rounds of two real builds of one model: the 3x3 layer forced to its direct
    kernel (2-5x slower than Winograd alone on this host) against the cost model's Winograd pick. 15 rounds, as the
    check: the faster build is a significant gain (kept even without a layer gain to go by), the slower one a
    significant loss (rejected whatever its layer claimed)."""
    from edgec.codegen import variants
    from edgec.codegen.targets import get_target
    from edgec.devices.deploy import deploy

    a = _convs(edgec_env / "a.onnx", 40, 24, pool=True)
    dev = Inventory().resolve(["local"])[0]
    job = next(j for j in plan(a, dev, 1, layout="nchw") if j.cls == "conv3x3s1+relu")
    assert job.default_algo.startswith("winograd"), job.default_algo
    forced = dict(variants.forcings(variants.candidates(job.node, get_target(dev.target), job.facts), job.facts, 1))
    with open_transport(dev) as t:
        def build(tuned):
            return deploy(a, dev, t, profile=False, options=CompileOptions(target=dev.target, layout="nchw", tuned=tuned))

        fast = build(())
        slow = build(((job.signature, forced["direct"], "forced direct"),))
        assert slow.build_info["layers"][0]["algo"] != fast.build_info["layers"][0]["algo"]
        tu = Tuner(a, dev, t, layout="nchw")
        ratio, rounds = tu.race(fast, slow)
        d = guard_decision(rounds)
        assert d["decision"] == "gain" and d["keep"] and d["interval"][1] < 1 and len(rounds) == 15, d
        ratio, rounds = tu.race(slow, fast)
        d = guard_decision(rounds, alone=10.0)
        assert d["decision"] == "loss" and not d["keep"] and d["interval"][0] > 1, d
        assert GUARD_LAYER_GAIN < 10.0
