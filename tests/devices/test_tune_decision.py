"""The whole-model check's decision rule (devices/tune.py guard_decision) on rounds of ratios, and the rejections
table's runner-up columns (an older database and older exports still open and import)."""

from __future__ import annotations

import json
import math
import sqlite3

import numpy as np
import pytest

from edgec.devices import tuningdb
from edgec.devices.tune import GUARD_LAYER_GAIN, guard_decision, median_interval
from edgec.errors import EdgecError


def test_the_interval_is_the_sign_tests_order_statistics():
    x = list(np.linspace(0.80, 1.20, 15))
    rng = np.random.default_rng(3)
    med, lo, hi = median_interval(list(rng.permutation(x)), 0.9)
    # 15 rounds: P(Binomial(15, 1/2) <= 3) = 0.018 <= 0.05 < P(<= 4): the 4th smallest and 4th largest
    assert med == pytest.approx(1.0) and lo == pytest.approx(x[3]) and hi == pytest.approx(x[11])
    # coverage of at least the confidence asked for, and no bound at all where the rounds cannot give one
    k = 4
    assert 1 - 2 * sum(math.comb(15, j) for j in range(k)) / 2 ** 15 >= 0.9
    assert median_interval([0.9, 0.95], 0.9)[1:] == (0.0, math.inf)
    # 5 rounds (the tests' check): min and max, 94% coverage
    assert median_interval([1.1, 0.9, 1.0, 1.2, 0.8], 0.9) == (1.0, 0.8, 1.2)


def test_bimodal_processes_do_not_hide_a_real_gain_or_make_one():
    """The shared host's processes of one binary run at one of two speeds (about 8.5 or 12 ms on mnv2g16): a round
    whose two processes landed in different modes gives a ratio near 1.4 or 0.7. With 15% of processes slow, a
    real 10% gain is found significant in most races (a race fails to when 4 of its 15 rounds paired a slow
    process of the faster build: 12%), and the same binary against itself is almost never taken for a gain."""
    rng = np.random.default_rng(11)
    found, false_gain, n = 0, 0, 400
    for _ in range(n):
        modes = rng.choice([1.0, 1.4], size=(15, 2), p=[0.85, 0.15])
        jitter = rng.normal(1.0, 0.01, size=(15, 2))
        found += guard_decision(list(0.9 * modes[:, 0] * jitter[:, 0] / (modes[:, 1] * jitter[:, 1])))["keep"]
        false_gain += guard_decision(list(modes[:, 0] * jitter[:, 0] / (modes[:, 1] * jitter[:, 1])))["keep"]
    assert found / n >= 0.8 and false_gain / n <= 0.04, (found, false_gain)


def test_in_between_the_layer_gain_alone_decides():
    noisy = [1.02, 0.97, 1.05, 0.99, 1.01, 0.96, 1.03, 1.0, 0.98, 1.04, 0.95, 1.02, 0.99, 1.01, 1.0]
    d = guard_decision(noisy, GUARD_LAYER_GAIN)
    assert d["decision"] == "inconclusive" and d["keep"]
    assert not guard_decision(noisy, GUARD_LAYER_GAIN * 0.99)["keep"]
    assert not guard_decision(noisy, None)["keep"]  # the learned constants and whole builds: no layer to go by
    loss = [x * 1.08 for x in noisy]
    assert guard_decision(loss, 5.0) == {**guard_decision(loss, 5.0), "decision": "loss", "keep": False}
    gain = [x * 0.92 for x in noisy]
    assert guard_decision(gain, None)["decision"] == "gain" and guard_decision(gain, None)["keep"]
    json.dumps(guard_decision([1.0, 1.1]))  # no bound: the interval's top is null in the report, not Infinity


def test_an_older_rejections_table_gets_the_runner_up_columns(tmp_path):
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    con.execute("""CREATE TABLE rejections (
      fingerprint TEXT NOT NULL, model_key TEXT NOT NULL, signature TEXT NOT NULL, model TEXT NOT NULL,
      variant TEXT NOT NULL, algo TEXT NOT NULL, reason TEXT NOT NULL, device TEXT NOT NULL, date TEXT NOT NULL,
      PRIMARY KEY (fingerprint, model_key, signature))""")
    con.execute("INSERT INTO rejections VALUES ('fp', 'k', 'sig', 'm.onnx', 'winograd-f63', 'wf63', 'slower', "
                "'local', '2026-11-25')")
    con.commit()
    con.close()
    with tuningdb.TuningDB(path) as db:
        (old,) = db.rejections("fp", "k").values()
        assert old.instead == "" and old.algo == "wf63" and "runner-up" not in old.note()
        db.reject(tuningdb.Rejection("fp", "k2", "sig", "m.onnx", "winograd-f63", "wf63", "slower", "local",
                                     "2026-11-25", "conv=winograd-f23", "winograd-f23", "wf23"))
    with tuningdb.TuningDB(path) as db:
        new = db.rejections("fp", "k2")["sig"]
        assert new.instead == "conv=winograd-f23" and "its runner-up winograd-f23 (wf23) is used instead" in new.note()
        tuningdb.export(tmp_path / "x.json", db)
    doc = json.loads((tmp_path / "x.json").read_text())
    assert {r["instead"] for r in doc["rejections"]} == {"", "conv=winograd-f23"}
    for r in doc["rejections"]:  # an export made before the runner-up: no instead fields, still imports
        for k in ("instead", "instead_variant", "instead_algo"):
            r.pop(k)
    (tmp_path / "older.json").write_text(json.dumps(doc))
    with tuningdb.TuningDB(tmp_path / "fresh.sqlite") as db:
        tuningdb.import_file(tmp_path / "older.json", db)
        assert {r.instead for r in db.all_rejections()} == {""}
    doc["rejections"][0]["instead"] = "conv=fastest"
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with tuningdb.TuningDB(tmp_path / "fresh2.sqlite") as db, pytest.raises(EdgecError, match="rejection 1.*conv=fastest"):
        tuningdb.import_file(tmp_path / "bad.json", db)


def test_a_blocking_needs_a_larger_gain_than_a_kernel_to_be_recorded():
    """A blk-* variant (alone or combined) is recorded only at BLK_MIN_GAIN: layer gains of a few percent from a
    scaled block did not hold in the model; other variants keep MIN_GAIN."""
    from edgec.devices.tune import BLK_MIN_GAIN, MIN_GAIN, min_gain

    assert min_gain("blk-nc-double") == min_gain("x+blk-nc-half") == BLK_MIN_GAIN > MIN_GAIN
    assert min_gain("winograd-f43") == min_gain("winograd-f43+par-rows") == MIN_GAIN
