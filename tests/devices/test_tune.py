"""`edgec tune` end to end: real builds and runs on `local` and on the emulated Pi 4 over SSH, the tuning
database in SQLite, its records used (or ignored) by compile, transfer-tuning, export/import."""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
from pathlib import Path

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


def _local_kernels():
    """The local device's target and the names of its kernels the tests expect: the Winograd F(4,3) algo and
    the GSPC T_O = 8 row tile (an AVX2 host gives 6x16 / o8-avx2 tiles, an AVX-512 one 12x32 / o8-avx512)."""
    from edgec.codegen import kernels
    from edgec.codegen.targets import get_target

    t = get_target(Inventory().resolve(["local"])[0].target)
    gk = kernels.gemm_kernel(t)
    return t, f"winograd-f43-{gk.tile}-{gk.isa}", f"gspc-o8-{t.isa}"


def _cnn(path, specs, x_shape):
    """specs: ("conv", cin, cout, groups) 3x3 pad 1 + Relu, or ("pool",) 2x2 max pool."""
    rng = np.random.default_rng(len(specs) + x_shape[-1])
    nodes, inits, cur = [], [], "x"
    shape = list(x_shape)
    for i, s in enumerate(specs):
        if s[0] == "pool":
            shape[2:] = [shape[2] // 2, shape[3] // 2]
            nodes.append(helper.make_node("MaxPool", [cur], [f"p{i}"], kernel_shape=[2, 2], strides=[2, 2]))
            cur = f"p{i}"
            continue
        _, cin, cout, g = s
        shape[1] = cout
        inits += [numpy_helper.from_array((rng.standard_normal((cout, cin // g, 3, 3)) * 0.2).astype(np.float32),
                                          f"w{i}"),
                  numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32) * 0.1, f"b{i}")]
        nodes += [helper.make_node("Conv", [cur, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1], group=g),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        cur = f"r{i}"
    nodes.append(helper.make_node("Identity", [cur], ["y"]))
    g = helper.make_graph(nodes, path.stem, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


@pytest.fixture(scope="module")
def tune_cache(tmp_path_factory):
    """Builds shared by this module's tests; a tuning database apart from the other device tests'."""
    return tmp_path_factory.mktemp("tune-cache")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("tune-models")
    return {
        # a dense 3x3 conv (Winograd F(2,3)/F(4,3)/F(6,3) or direct) and a depthwise one (plane or channel-blocked);
        # 18 channels, not whole blocks on x86, so the dense conv stays out of the depthwise one's region (a
        # Winograd conv on whole blocks would join it, codegen/layout.py, and not be tuned as a layer of its own)
        "a": _cnn(d / "a.onnx", [("conv", 16, 18, 1), ("conv", 18, 18, 18)], [1, 16, 20, 20]),
        # the same first layer (an exact signature of a), then the same class at another size
        "b": _cnn(d / "b.onnx", [("conv", 16, 18, 1), ("pool",), ("conv", 18, 18, 1)], [1, 16, 20, 20]),
        "dw": _cnn(d / "dw.onnx", [("conv", 8, 8, 8)], [1, 8, 12, 12]),
    }


@pytest.fixture
def env(edgec_env, tune_cache, monkeypatch):
    monkeypatch.setenv("EDGEC_CACHE_DIR", str(tune_cache))
    return edgec_env


def _corrupt(victim):
    """after_run hook: damage the output file one candidate wrote in the real measurement program, before it
    is checked."""
    def hook(name, t, outputs):
        if name == victim:
            arr = np.load(io.BytesIO(t.read(outputs[0])))
            arr.flat[0] += 1.0
            with tempfile.TemporaryDirectory() as tmp:
                np.save(Path(tmp) / "bad.npy", arr)
                t.put(Path(tmp) / "bad.npy", outputs[0])
    return hook


@pytest.fixture(scope="module")
def tuned_a(tune_cache, models, tmp_path_factory):
    """Tune model a on local: interrupted after its first layer (Ctrl-C), then resumed from the command line."""
    mp = pytest.MonkeyPatch()
    mp.setenv("EDGEC_CACHE_DIR", str(tune_cache))
    home = tmp_path_factory.mktemp("home")
    mp.setenv("HOME", str(home))
    mp.setenv("EDGEC_CONFIG_DIR", str(home / "cfg"))
    (tune_cache / "tuning.sqlite").unlink(missing_ok=True)
    layers_done, hook = [], _corrupt("winograd-f23")

    def progress(event, **kw):
        if event == "done-layer":
            layers_done.append(kw["row"])
            raise KeyboardInterrupt

    dev = Inventory().resolve(["local"])[0]
    with open_transport(dev) as t, pytest.raises(KeyboardInterrupt):
        tune(models["a"], dev, t, progress=progress, after_run=hook)
    with tuningdb.TuningDB() as db:
        first = db.records()
    # the records as measured: the whole-model check may reject one for this model (test_tune_guard.py)
    rc, out, err = run_cli("tune", str(models["a"]), "--json", "--no-guard")
    assert rc == 0, err
    yield {"first": first, "interrupted_row": layers_done[0], "report": json.loads(out), "corrupted": hook}
    mp.undo()


def test_interrupted_tune_keeps_its_record_and_resumes(tuned_a):
    first, rep = tuned_a["first"], tuned_a["report"]
    assert len(first) == 1 and first[0].signature == tuned_a["interrupted_row"]["signature"]
    assert first[0].cls == "conv3x3s1+relu"  # most MACs first
    rows = {r["class"]: r for r in rep["layers"]}
    assert rows["conv3x3s1+relu"]["source"].startswith("exact record (measured on this model")
    # the depthwise layer is a region of its own: measured both ways as a whole first
    region = rows["region[dwconv3x3s1]"]
    assert region["source"] == "measured"
    assert {t["algo"] for t in region["record"]["trials"] if "ms" in t} == {"layout-nchw", "layout-nchwc"}
    blocked = region["record"]["algo"] == "layout-nchwc"
    assert rep["resumed"] == 1 and rep["measured"] == (1 if blocked else 2) and not rep["stopped_at_budget"]
    if blocked:  # then its NCHW variants are not measured alone
        assert rows["dwconv3x3s1+relu"]["source"] == "in a region tuned channel-blocked: not tuned alone"
        return
    assert rows["dwconv3x3s1+relu"]["source"] == "measured"
    dw = rows["dwconv3x3s1+relu"]["record"]
    assert {"default", "dw-plane", "dw-cb"} <= {t["variant"] for t in dw["trials"]}
    assert all("ms" in t or t["rejected"] == "same code as default" for t in dw["trials"])
    wm = rep["whole_model"]  # both builds run on the same inputs: the tuned one agrees with the untuned one
    assert wm["untuned_ms"] > 0 and wm["tuned_ms"] > 0 and wm["tuned_layers"] == 2
    assert wm["max_rel_err_vs_untuned"] < 1e-3


def test_every_candidate_is_checked_and_a_wrong_one_is_rejected(tuned_a):
    rec = tuned_a["first"][0]
    trials = {t["variant"]: t for t in rec.trials}
    assert {"default", "direct", "winograd-f23", "winograd-f43", "winograd-f63"} <= set(trials)
    # the corrupted output of the F(2,3) program is caught by the check against onnxruntime, never timed
    assert trials["winograd-f23"]["rejected"].startswith("wrong output") and "ms" not in trials["winograd-f23"]
    assert rec.variant != "winograd-f23" and rec.time_ms > 0 and rec.default_ms > 0
    assert all("ms" in t for n, t in trials.items() if n not in ("winograd-f23",) and "rejected" not in t)
    assert rec.facts["target"] == _local_kernels()[0].name and not rec.emulated and rec.facts["caches"]


def test_each_layer_is_one_program_holding_every_candidate(env, models, tmp_path, monkeypatch):
    """With programs of one layer (PROGRAM_CANDIDATES 1), one build per layer: its program holds every candidate
    that emits its own code (the others are dropped before the build), writes each candidate's outputs, and each
    is checked and timed. The runtime kernels are compiled once for all layers and tunes; a layer recompiles only
    its candidates. With the default PROGRAM_CANDIDATES the two layers (5 + 2 candidates) share one program."""
    from edgec.devices import tune as tune_mod

    monkeypatch.setenv("EDGEC_CACHE_DIR", str(tmp_path / "cache"))  # count this tune's builds only
    default = tune_mod.PROGRAM_CANDIDATES
    monkeypatch.setattr(tune_mod, "PROGRAM_CANDIDATES", 1)
    checked = []
    dev = Inventory().resolve(["local"])[0]
    with open_transport(dev) as t, tuningdb.TuningDB(tmp_path / "db.sqlite") as db:
        # NCHW builds: per-layer programs only (a region's program: test_a_region_is_measured_both_ways...)
        rep = tune(models["a"], dev, t, db=db, final_bench=False, layout="nchw",
                   after_run=lambda name, t, outs: checked.append((name, outs)))
        uploaded = [d for d in Path(t.workdir(), "builds").iterdir() if d.is_dir()]
    assert rep["measured"] == rep["programs"] == 2
    # what reached the device: one program per layer, nothing built per candidate
    assert len(uploaded) == 2 and all(sorted(p.name for p in d.iterdir() if not p.name.startswith(".")) == ["tune"]
                                      for d in uploaded)
    lives = []
    for row in rep["layers"]:
        trials = row["record"]["trials"]
        live = [t["variant"] for t in trials if not t.get("rejected", "").startswith("same code as")]
        assert len(live) >= 2 and len({t["algo"] for t in trials if t["variant"] in live}) == len(live)
        assert all("ms" in t for t in trials if "rejected" not in t)  # each live one timed by the program
        lives.append(live)
    # every live candidate's own output files were checked, all from one run folder per layer
    by_run = {}
    for name, outs in checked:
        assert len(outs) == 1 and outs[0].endswith("_output_0.npy")
        by_run.setdefault(outs[0].rsplit("/", 1)[0], []).append((name, outs[0].rsplit("/", 1)[1]))
    assert sorted(sorted(n for n, _ in v) for v in by_run.values()) == sorted(sorted(v) for v in lives)
    for v in by_run.values():
        assert [f for _, f in v] == [f"cand{i}_output_0.npy" for i in range(len(v))]
    # the runtime kernels were compiled once: one object each in the one build folder of the workspace
    (work,) = [d for d in (tmp_path / "cache" / "cross").iterdir() if d.is_dir() and d.name[0] != "."]
    objs = list(work.glob("obj/*/runtime/**/*.o"))
    assert objs and len({o.name for o in objs}) == len(objs)
    stamp = {o: o.stat().st_mtime_ns for o in objs}
    monkeypatch.setattr(tune_mod, "PROGRAM_CANDIDATES", default)
    assert default >= 7
    with open_transport(dev) as t, tuningdb.TuningDB(tmp_path / "db2.sqlite") as db:
        rep2 = tune(models["a"], dev, t, db=db, final_bench=False, layout="nchw")
    assert rep2["measured"] == 2 and rep2["programs"] == 1 and rep2["program_layers"] == [2]
    assert [len([x for x in r["record"]["trials"] if "ms" in x]) for r in rep2["layers"]] == \
        [len(v) for v in lives]  # every candidate measured as in its own program
    assert {o: o.stat().st_mtime_ns for o in work.glob("obj/*/runtime/**/*.o")} == stamp  # not compiled again


def test_a_candidate_that_crashes_the_program_is_rejected_and_the_others_measured(env, models, tmp_path):
    """A fault put into one candidate's generated code before the build: the program dies in that candidate,
    which is rejected, and the program runs again without it."""
    def crash(project):
        src = (project / "cand1.c").read_text()
        head = "int cand1_run(void *workspace, const void *const *in, void *const *out)\n{\n"
        assert head in src
        (project / "cand1.c").write_text(src.replace(head, head + "    __builtin_trap();\n"))

    dev = Inventory().resolve(["local"])[0]
    with open_transport(dev) as t, tuningdb.TuningDB(tmp_path / "db.sqlite") as db:
        rep = tune(models["dw"], dev, t, db=db, final_bench=False, before_build=crash, layout="nchw")
    rec = rep["layers"][0]["record"]
    crashed = [t for t in rec["trials"] if t.get("rejected", "").startswith("crashed with SIG")]
    assert len(crashed) == 1 and "ms" not in crashed[0] and crashed[0]["variant"] != "default"
    assert rec["variant"] == "default" and rec["default_ms"] > 0


def _wide_console(monkeypatch):
    """--explain's table wide enough that no note wraps inside a word's line (stdout is no terminal here)."""
    from edgec.cli import console
    monkeypatch.setattr(console.out, "width", 400)


def test_compile_uses_the_records_and_no_tuning_ignores_them(tuned_a, env, models, tmp_path, monkeypatch):
    rc, out, err = run_cli("compile", str(models["a"]), "-o", str(tmp_path / "t"), "--json")
    assert rc == 0, err
    layers = json.loads(out)["layers"]
    notes = [l["details"].get("tuned", "") for l in layers if l["op"] == "Conv"]
    # the depthwise layer's note is its region's when that was recorded blocked
    assert len(notes) == 2 and all(n.startswith(("tuned on local, ", "layout tuned on local, ")) for n in notes)
    rec = tuned_a["first"][0]
    conv = next(l for l in layers if l["details"].get("signature") == rec.signature)
    if rec.forced:  # the measured winner, forced on this layer
        assert conv["algo"] == rec.algo
    else:  # the cost model's pick won: nothing forced, and the constants learned from the records may move the pick
        assert f"the cost model's pick {rec.algo} measured fastest" in conv["details"]["tuned"]
    _wide_console(monkeypatch)
    rc, out, err = run_cli("compile", str(models["a"]), "-o", str(tmp_path / "e"), "--explain")
    assert rc == 0 and "tuned on local" in " ".join(out.split())
    rc, out, err = run_cli("compile", str(models["a"]), "-o", str(tmp_path / "n"), "--json", "--no-tuning")
    assert rc == 0, err
    assert not any("tuned" in l.get("details", {}) for l in json.loads(out)["layers"])
    # bench takes the records as well (its profile says which layers), and --no-tuning
    rc, out, err = run_cli("bench", str(models["a"]), "--runs", "3", "--json")
    assert rc == 0, err
    convs = [l for l in json.loads(out)["layers"] if l["op"] == "Conv"]
    assert len(convs) == 2 and all(l["tuned"].startswith(("tuned on local, ", "layout tuned on local, "))
                                   for l in convs)
    rc, out, err = run_cli("bench", str(models["a"]), "--runs", "3", "--json", "--no-tuning")
    assert rc == 0, err
    assert not any("tuned" in l for l in json.loads(out)["layers"])


def test_a_blocking_record_keeps_the_kernel_it_was_timed_with():
    """A blocking (or partitioning) variant forces its field only; the record adds the kernel choice whose trial
    gave the default's code, so the constants learned from the records cannot swap the kernel under it."""
    from edgec.devices.tune import _keep_kernel

    trials = [{"variant": "default", "algo": "winograd-f43-6x16-avx2", "ms": 1.0},
              {"variant": "direct", "algo": "gemm-6x16-avx2", "ms": 1.3},
              {"variant": "winograd-f43", "algo": "winograd-f43-6x16-avx2", "rejected": "same code as default"},
              {"variant": "winograd-f63", "algo": "winograd-f63-6x16-avx2", "rejected": "wrong output (1 LSB)"},
              {"variant": "par-cols", "algo": "winograd-f43-6x16-avx2", "rejected": "same code as default"},
              {"variant": "blk-kc-whole", "algo": "winograd-f43-6x16-avx2", "rejected": "same code as default"},
              {"variant": "blk-nc-half", "algo": "winograd-f43-6x16-avx2/nc-half", "ms": 0.8}]
    forcing_of = {"direct": "conv=direct", "winograd-f43": "conv=winograd-f43", "winograd-f63": "conv=winograd-f63",
                  "par-cols": "par=cols", "blk-kc-whole": "blk=kc-whole", "blk-nc-half": "blk=nc-half",
                  "direct+par-cols": "conv=direct;par=cols"}
    assert _keep_kernel("blk=nc-half", trials, forcing_of) == "blk=nc-half;conv=winograd-f43"
    assert _keep_kernel("par=cols", trials, forcing_of) == "par=cols;conv=winograd-f43"
    assert _keep_kernel("conv=direct", trials, forcing_of) == "conv=direct"  # a kernel variant names its own
    assert _keep_kernel("conv=direct;par=cols", trials, forcing_of) == "conv=direct;par=cols"
    assert _keep_kernel("", trials, forcing_of) == ""  # the default won: nothing forced
    # no twin of the default timed (a layer without kernel variants): the blocking alone
    assert _keep_kernel("blk=nc-half", trials[:2] + trials[-1:], forcing_of) == "blk=nc-half"


def test_records_of_another_fingerprint_are_not_used(tuned_a, env, models, tmp_path):
    n = sum(1 for r in tuned_a["report"]["layers"] if "record" in r)  # the conv, the region, maybe the dw layer
    rc, out, err = run_cli("tune", "--export", str(tmp_path / "mine.json"))
    assert rc == 0 and f"exported {n}" in out
    doc = json.loads((tmp_path / "mine.json").read_text())
    for r in doc["records"]:  # the same records, measured on another CPU
        r["facts"]["cpu"] = "Other CPU 9000"
        r["fingerprint"] = tuningdb.fingerprint(r["facts"])
    (tmp_path / "other.json").write_text(json.dumps(doc))
    os.environ["EDGEC_CACHE_DIR"] = str(tmp_path / "fresh-cache")  # an empty database; the env fixture restores it
    rc, out, err = run_cli("tune", "--import", str(tmp_path / "other.json"))
    assert rc == 0 and f"imported {n}" in out, err
    rc, out, err = run_cli("compile", str(models["a"]), "-o", str(tmp_path / "c"), "--json")
    assert rc == 0 and not any("tuned" in l.get("details", {}) for l in json.loads(out)["layers"])
    rc, out, err = run_cli("tune", "--import", str(tmp_path / "mine.json"))  # this machine's: used again
    rc, out, err = run_cli("compile", str(models["a"]), "-o", str(tmp_path / "c"), "--json")
    assert rc == 0 and all("tuned" in l["details"] for l in json.loads(out)["layers"] if l["op"] == "Conv")


@pytest.mark.parametrize("change, message", [
    (lambda d: "not json", "is not a JSON file of tuning records"),
    (lambda d: {"records": []}, "is not an edgec tuning export"),
    (lambda d: (d["records"][0].pop("forced"), d)[1], "lacks forced"),  # forced may be "" (default won)
    (lambda d: d["records"][0].update(forced="conv=fastest") or d, "conv=fastest"),
    (lambda d: d["records"][0].update(forced="layout=nchwc;wino=64x64x14x14g1:f63") or d, "wino is"),
    (lambda d: d["records"][0].update(time_ms="1") or d, "time_ms has the wrong type"),
    (lambda d: d.update(rejections=[{"model": "a.onnx"}]) or d, "rejection 1 lacks fingerprint"),
    (lambda d: d["records"][0].update(emulated=False) or d["records"][0]["facts"].update(emulated=True) or d,
     "fingerprint does not match"),
])
def test_bad_import_is_one_line_and_imports_nothing(tuned_a, env, tmp_path, change, message):
    run_cli("tune", "--export", str(tmp_path / "x.json"))
    doc = change(json.loads((tmp_path / "x.json").read_text()))
    (tmp_path / "bad.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
    with tuningdb.TuningDB() as db:
        before = len(db.records())
    rc, out, err = run_cli("tune", "--import", str(tmp_path / "bad.json"))
    assert rc != 0 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    with tuningdb.TuningDB() as db:
        assert len(db.records()) == before


def test_transfer_only_uses_another_models_records(tuned_a, env, models):
    rc, out, err = run_cli("tune", str(models["b"]), "--transfer-only", "--json")
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["transfer_only"] and rep["source_model"] == "a.onnx"
    rows = rep["layers"]
    assert len(rows) == 2 and rows[0]["source"].startswith("exact record (measured on model a.onnx")
    a_conv = tuned_a["first"][0]
    names = set(a_conv.transferable())
    second = rows[1]
    if second["source"].startswith("transferred"):
        assert second["source"] == f"transferred from a.onnx ({', '.join(sorted(names))})"
        tried = {t["variant"] for t in second["record"]["trials"]}
        assert tried == {"default"} | names  # only a's variants of this class, against the cost model's pick
        assert second["record"]["source"] == "transferred from a.onnx"
    else:  # a's winner is the cost model's pick of this layer too: nothing else to measure
        assert second["source"] == "not measured: one variant only"
    assert rep["search_s"] < tuned_a["report"]["search_s"] + 60
    rc, out, err = run_cli("tune", str(models["b"]), "--transfer-only")  # now every layer has a record
    assert rc == 0 and "exact" in out and "0 layer signature(s) measured" in out and "whole model:" in out


def test_budget_and_bad_arguments(env, models):
    rc, out, err = run_cli("tune", str(models["dw"]), "--budget", "0.001", "--json")
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["stopped_at_budget"] and rep["measured"] == 0
    assert rep["layers"][0]["source"] == "not measured: budget"
    for args, msg in ((["tune"], "give a model"), (["tune", "missing.onnx"], "does not exist"),
                      (["tune", str(models["dw"]), "--budget", "0"], "--budget must be positive"),
                      (["tune", str(models["dw"]), "--export", "x.json"], "--export/--import move records"),
                      (["tune", str(models["dw"]), "-d", "nowhere"], "nowhere")):
        rc, out, err = run_cli(*args)
        assert rc != 0 and msg in err and "Traceback" not in err, (args, err)


@pytest.mark.ssh
def test_tune_over_ssh_on_the_emulated_board(emu_board, env, models, monkeypatch):
    monkeypatch.setenv("EDGEC_LAYOUT", "nchw")  # as compile: the layer's NCHW kernels, no region to measure
    # the command as a user runs it: layer search, whole-model check, final bench
    rc, out, err = run_cli("tune", str(models["dw"]), "-d", "emu-pi4", "--json")
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["emulated"] and rep["mode"] == "cross" and rep["facts"]["target"] == "aarch64-neon"
    assert rep["facts"]["emulated"] and "qemu-aarch64" in rep["facts"]["emulator"]
    row = rep["layers"][0]
    assert row["source"] == "measured" and row["record"]["emulated"]
    assert {"default", "dw-plane", "dw-cb"} <= {t["variant"] for t in row["record"]["trials"]}
    # a forced record is checked in the model on the board; the cost model's pick needs no check. The emulated
    # board's fingerprint may also hold learned constants (fitted from the other tests' emulated records): they
    # change code too and are checked like a record
    g = rep["guard"]
    forced = row["record"]["algo"] != row["record"]["default_algo"]
    assert (g["verdict"] == "no record changes this model's code") == (not forced and not g["learned"]), g
    rejected = [x for x in g.get("records", []) if not x["kept"] and x["signature"] == row["signature"]]
    assert rep["whole_model"]["tuned_layers"] == 1 and rep["whole_model"]["max_rel_err_vs_untuned"] < 1e-3
    assert ("rejected" in row) == bool(rejected)
    with tuningdb.TuningDB() as db:
        rec = db.get(rep["fingerprint"], row["signature"])
        assert rec.emulated and db.applicable(rec.fingerprint, emulated=True) == [rec]
        # a real board never gets emulator timings, even under the same fingerprint
        assert db.applicable(rec.fingerprint, emulated=False) == []
        # the check's rejections are the emulated fingerprint's too
        key = tuningdb.model_key(models["dw"])
        assert {r.fingerprint for r in db.all_rejections() if r.model_key == key} <= {rec.fingerprint}
    # and a real board's fingerprint differs anyway: same facts without the emulator
    real = {k: v for k, v in rec.facts.items() if k != "emulator"} | {"emulated": False}
    assert tuningdb.fingerprint(real) != rec.fingerprint


def test_tune_with_threads_measures_each_kernel_under_each_partitioning(models, env, tmp_path):
    """At 2 threads a layer's candidates include every kernel variant combined with every partitioning, each
    built, checked and timed (or dropped as the same code as another); the record names the winner."""
    dev = Inventory().resolve(["local"])[0]
    with open_transport(dev) as t, tuningdb.TuningDB(tmp_path / "t.sqlite") as db:
        rep = tune(models["dw"], dev, t, threads=2, db=db, final_bench=False, layout="nchw")
        recs = db.records()
    (row,) = rep["layers"]
    trials = {t["variant"]: t for t in row["record"]["trials"]}
    assert {"dw-plane", "dw-cb", "par-serial", "dw-plane+par-serial", "dw-cb+par-serial"} <= set(trials), trials
    for name, t in trials.items():
        assert ("ms" in t) != ("rejected" in t), (name, t)
    # each kernel under par-serial: that kernel's code, run on one thread
    for k in ("dw-plane", "dw-cb"):
        assert trials[f"{k}+par-serial"]["algo"] == trials[k]["algo"] + "/serial", trials
    (rec,) = recs
    assert rec.variant in trials and rec.signature.endswith(":t2")


def _pointwise_dw(path, c=32, h=28):
    """1x1 conv, 3x3 depthwise, 1x1 conv (+ Relu each): a chain the layout pass blocks (NCHWc) by default."""
    rng = np.random.default_rng(1)
    nodes, inits, cur = [], [], "x"
    for i, (k, g) in enumerate([(1, 1), (3, c), (1, 1)]):
        inits += [numpy_helper.from_array((rng.standard_normal((c, c // g, k, k)) * 0.2).astype(np.float32),
                                          f"w{i}"),
                  numpy_helper.from_array(rng.standard_normal(c).astype(np.float32) * 0.1, f"b{i}")]
        nodes += [helper.make_node("Conv", [cur, f"w{i}", f"b{i}"], [f"c{i}"], pads=[k // 2] * 4, group=g),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        cur = f"r{i}"
    g = helper.make_graph(nodes, "pwdw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
                          [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [1, c, h, h])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_blocked_regions_are_not_tuned_per_layer(tmp_path):
    """Layers the layout pass puts in a channel-blocked region are not tuned one by one (an NCHW variant measured
    alone leaves out the region it would split: ppocr cls got 1.4x slower that way); a record that kept the cost
    model's pick does not take a layer out of its region, one that forces a variant does."""
    from edgec.codegen import variants
    from edgec.codegen.options import CompileOptions
    from edgec.codegen.project import compile_model
    from edgec.devices.inventory import device_from_profile
    from edgec.devices.tune import plan

    path = _pointwise_dw(tmp_path / "pwdw.onnx")
    dev = device_from_profile("local", "local")
    opts = CompileOptions(target=dev.target, threads=1, tuning="off")
    base = compile_model(path, tmp_path / "base", options=opts)
    convs = [(l, n) for l, n in zip(base.layers, base.graph.nodes) if n.op == "Conv"]
    assert all(l["details"]["layout"] not in (None, "nchw") for l, _ in convs), base.layers  # nchw8c on AVX2
    jobs = plan(path, dev, 1)  # the region alone, measured both ways as a whole (test_a_region_is_measured...)
    assert [(j.cls, j.region is not None, len(j.layers)) for j in jobs] == [("region[1x1,dwconv3x3s1]", True, 3)]
    sig = variants.signature(convs[1][1], 1)
    opts = opts.with_(tuning="auto")
    kept = compile_model(path, tmp_path / "kept", options=opts.with_(tuned=((sig, "", "kept"),)))
    assert [l["details"].get("layout") for l in kept.layers] == [l["details"].get("layout") for l in base.layers]
    forced = compile_model(path, tmp_path / "forced", options=opts.with_(tuned=((sig, "dw=plane", "forced"),)))
    assert all(l["details"].get("layout", "nchw") == "nchw" for l in forced.layers if l["op"] == "Conv")


def test_a_region_without_depthwise_is_measured_and_stays_nchw_until_a_record_says_blocked(tmp_path):
    """A region of 1x1 convs and a pool stays NCHW by default (layout.pays: the estimate is trusted only where
    depthwise gains dominate), but edgec tune measures it both ways like any region holding a 1x1 conv, and
    compile follows a record of its signature (SqueezeNet's fire modules: blocked 0.94x on an AVX-512 host)."""
    from edgec.codegen.options import CompileOptions
    from edgec.codegen.project import compile_model
    from edgec.devices.inventory import device_from_profile
    from edgec.devices.tune import plan

    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.2).astype(np.float32), n)
             for n, s in (("w0", (32, 16, 1, 1)), ("w1", (32, 32, 1, 1)))]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"]), helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("MaxPool", ["r0"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p", "w1"], ["c1"]), helper.make_node("Relu", ["c1"], ["y"])]
    graph = helper.make_graph(nodes, "pwpool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 12, 12])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 6, 6])], inits)
    path = tmp_path / "pwpool.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    dev = device_from_profile("local", "local")
    opts = CompileOptions(target=dev.target, threads=1, tuning="off")
    base = compile_model(path, tmp_path / "base", options=opts)
    assert all(l.get("details", {}).get("layout", "nchw") == "nchw" for l in base.layers), base.layers
    regions = [j for j in plan(path, dev, 1) if j.region is not None]
    assert [j.cls for j in regions] == ["region[1x1,pool]"] and regions[0].default_algo == "layout-nchw"
    rec = ((regions[0].signature, "layout=nchwc", "measured"),)
    blocked = compile_model(path, tmp_path / "blocked", options=opts.with_(tuning="auto", tuned=rec))
    assert all(l.get("details", {}).get("layout", "nchw") != "nchw" for l in blocked.layers if l["op"] == "Conv"), \
        blocked.layers


def _own_cache(tune_cache, tmp_path, monkeypatch) -> Path:
    """A cache folder (and so a tuning database) of the test's own, so that its region records and the layout
    constant they fit stay out of the module's other tests; compiled runtime kernels shared with them."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (tune_cache / "objects").mkdir(exist_ok=True)
    (cache / "objects").symlink_to(tune_cache / "objects")
    monkeypatch.setenv("EDGEC_CACHE_DIR", str(cache))
    return cache


def _conv_layouts(path, out, *extra):
    rc, js, err = run_cli("compile", str(path), "-o", str(out), "--json", *extra)
    assert rc == 0, err
    return [l for l in json.loads(js)["layers"] if l["op"] == "Conv"]


def _blocked(convs) -> list[bool]:
    return [l["details"].get("layout", "nchw") != "nchw" for l in convs]


def test_a_region_is_measured_both_ways_and_compile_follows_its_record(env, tune_cache, tmp_path, monkeypatch):
    """A 1x1 -> depthwise -> 1x1 chain's region is extracted as a model of its own, built with the layout forced
    NCHW and NCHWc in one program, both checked against onnxruntime and timed; the record's layout is what the
    next compile uses (--explain says so), even where it contradicts the estimate; --no-tuning ignores it."""
    import dataclasses

    _own_cache(tune_cache, tmp_path, monkeypatch)
    path = _pointwise_dw(tmp_path / "pwdw.onnx")
    dev = Inventory().resolve(["local"])[0]
    with open_transport(dev) as t:
        rep = tune(path, dev, t, final_bench=False)
    rows = [r for r in rep["layers"] if r["class"].startswith("region[")]
    assert len(rows) == 1 and rows[0]["source"] == "measured" and len(rows[0]["layers"]) == 3, rep["layers"]
    rec = rows[0]["record"]
    timed = {tr["algo"]: tr for tr in rec["trials"] if "ms" in tr}
    # both layouts, and blocked with the 1x1s' passes halved (nchwc.pass_channels) where that changes the code
    assert {"layout-nchw", "layout-nchwc"} <= set(timed) <= {"layout-nchw", "layout-nchwc", "layout-nchwc/kc-half"}
    assert all(tr["est_ns"] > 0 for tr in timed.values())
    assert rec["algo"] == min(timed, key=lambda a: timed[a]["ms"]) or rec["algo"] == rec["default_algo"]
    assert rep["programs"] == 1  # the region's program; its convs are not tuned one by one when it is blocked
    assert all(r["source"].startswith("in a region tuned channel-blocked") for r in rep["layers"] if r not in rows) \
        if rec["algo"].startswith("layout-nchwc") else True

    base = _blocked(_conv_layouts(path, tmp_path / "n", "--no-tuning"))
    assert base == [True] * 3  # the estimate blocks the chain
    convs = _conv_layouts(path, tmp_path / "t")
    assert _blocked(convs) == [rec["algo"].startswith("layout-nchwc")] * 3
    assert all(l["details"]["tuned"].startswith("layout tuned on local, ") for l in convs), convs
    # the record's layout wins over the estimate: turned to NCHW in the database, the compile follows it
    with tuningdb.TuningDB() as db:
        (r,) = [x for x in db.records() if x.cls.startswith("region[")]
        db.put(dataclasses.replace(r, variant="layout-nchw", forced="layout=nchw", algo="layout-nchw",
                                   time_ms=r.default_ms / 2))
    assert _blocked(_conv_layouts(path, tmp_path / "f")) == [False] * 3
    _wide_console(monkeypatch)
    rc, out, err = run_cli("compile", str(path), "-o", str(tmp_path / "e"), "--explain")
    assert rc == 0 and "layout tuned on local, " in out, out
    assert _blocked(_conv_layouts(path, tmp_path / "n2", "--no-tuning")) == base


def test_a_blocked_region_times_the_other_winograd_tile_on_each_conv_shape(env, tune_cache, tmp_path, monkeypatch):
    """Inside a channel-blocked region the tuner also builds the region with the other Winograd tile (F(2,3) for
    F(4,3) and back) on one shape of conv at a time, checked and timed beside the layouts; a record naming a tile
    makes compile run it on that shape's convs only, with --explain saying so; malformed tiles force nothing."""
    import dataclasses

    from edgec.codegen import layout
    from edgec.devices.tune import plan

    _own_cache(tune_cache, tmp_path, monkeypatch)
    path = _cnn(tmp_path / "wino.onnx", [("conv", 32, 32, 1), ("conv", 32, 32, 1), ("pool",), ("conv", 32, 32, 1)],
                [1, 32, 16, 16])
    dev = Inventory().resolve(["local"])[0]
    jobs = [j for j in plan(path, dev, 1) if j.region is not None]
    if not jobs or jobs[0].default_algo != "layout-nchwc" or not jobs[0].region["wino"]:
        pytest.skip(f"{dev.target}: the estimate does not run this region's 3x3 convs blocked on Winograd")
    shapes = dict(jobs[0].region["wino"])
    assert set(shapes) == {"32x32x16x16g1", "32x32x8x8g1"}, shapes
    flip = {s: "f23" if a == "winograd-f43" else "f43" for s, a in shapes.items()}
    with open_transport(dev) as t:
        rep = tune(path, dev, t, final_bench=False)
    (row,) = [r for r in rep["layers"] if r["class"].startswith("region[")]
    rec = row["record"]
    trials = {tr["variant"]: tr for tr in rec["trials"]}
    assert {f"layout-nchwc-{s}:{m}" for s, m in flip.items()} <= {v for v, tr in trials.items() if "ms" in tr}, trials
    assert trials["layout-nchwc"]["rejected"] == "same code as default"  # the estimate's tiles, blocked
    assert "ms" in trials["layout-nchwc/kc-half"], trials  # its 1x1 GEMMs' passes halved (32 -> 16 channels)
    assert tuningdb.min_gain("layout-nchwc/kc-half") == tuningdb.BLK_MIN_GAIN  # recorded as a blocking is
    with tuningdb.TuningDB() as db:
        (r,) = [x for x in db.records() if x.cls.startswith("region[")]
        if r.algo == "layout-nchwc/kc-half":  # the halved passes won: the record forces them on the region
            assert r.forced == "layout=nchwc;blk=kc-half" and "the 1x1 passes kc-half" in r.note(), r
        elif r.algo.startswith("layout-nchwc-"):  # a tile won: the record forces it on that shape
            shape, tile = r.algo.removeprefix("layout-nchwc-").split(":")
            assert r.forced == f"layout=nchwc;wino={shape}:{tile}" and flip[shape] == tile, r
        else:
            assert r.forced == f"layout={r.algo.removeprefix('layout-')}", r
        # a record naming the other tile on the 16x16 convs: compile runs it there, the estimate's on the 8x8 one
        v = f"layout-nchwc-32x32x16x16g1:{flip['32x32x16x16g1']}"
        db.put(dataclasses.replace(r, variant=v, forced=f"layout=nchwc;wino=32x32x16x16g1:{flip['32x32x16x16g1']}",
                                   algo=v, time_ms=r.default_ms / 2))
    convs = _conv_layouts(path, tmp_path / "t")
    want = [f"winograd-{flip['32x32x16x16g1']}"] * 2 + [shapes["32x32x8x8g1"]]
    assert [l["algo"][:len("winograd-f23")] for l in convs] == want, convs
    assert all("its region's tuning record" in l["details"]["why"] for l in convs[:2]), convs
    assert "NCHWc, Winograd F(" in convs[0]["details"]["tuned"], convs[0]["details"]
    assert layout.wino_forced("32x32x16x16g1:f63,:f23,junk,8x8:f43") == {"8x8": "winograd-f43"}
    # exported and imported again, the record keeps its tile
    rc, _, err = run_cli("tune", "--export", str(tmp_path / "x.json"))
    assert rc == 0, err
    rc, _, err = run_cli("tune", "--import", str(tmp_path / "x.json"))
    assert rc == 0, err
    assert [l["algo"][:len("winograd-f23")] for l in _conv_layouts(path, tmp_path / "i")] == want


def _region_record(dev, t, cls, variant, trials, sig="0123456789abcdef", model="src.onnx"):
    from edgec.devices.deploy import choose_mode

    facts = tuningdb.device_facts(dev, t, choose_mode(dev, "auto"), 1)
    return tuningdb.Record(tuningdb.fingerprint(facts), f"{cls}:{sig}:t1", cls, variant,
                           f"layout={variant.removeprefix('layout-')}", variant, 1.0, "layout-nchwc", 1.5, "measured",
                           model, dev.name, "2026-11-24", False, facts, trials)


def test_the_layout_scale_is_fitted_from_region_records_and_moves_the_pick(env, tune_cache, tmp_path, monkeypatch):
    """Region records whose blocked / NCHW time ratio is 3x the estimate's fit layout-scale 3: a region of
    another size with no record of its own then stays NCHW (the estimate alone blocks it), --explain names the
    constant, --no-tuning drops it. Records agreeing with the estimate leave it alone."""
    from edgec.codegen.targets import get_target
    from edgec.devices.tune import learned_constants

    _own_cache(tune_cache, tmp_path, monkeypatch)
    other = _pointwise_dw(tmp_path / "other.onnx", c=48, h=20)
    dev = Inventory().resolve(["local"])[0]
    trials = [{"variant": "default", "algo": "layout-nchwc", "ms": 2.0, "est_ns": 1000.0},
              {"variant": "layout-nchw", "algo": "layout-nchw", "ms": 1.0, "est_ns": 1500.0},
              {"variant": "layout-nchwc", "algo": "layout-nchwc", "est_ns": 1000.0, "rejected": "same code as default"}]
    agree = [dict(trials[0], ms=1.0), dict(trials[1], ms=1.5)]
    with open_transport(dev) as t:
        slow = _region_record(dev, t, "region[1x1,dwconv3x3s1]", "layout-nchw", trials)
        fine = _region_record(dev, t, "region[1x1,dwconv3x3s1]", "layout-nchwc", agree, sig="fedcba9876543210")
    tgt = get_target(dev.target)
    assert learned_constants([fine], tgt) == {}
    assert learned_constants([slow], tgt) == pytest.approx({"layout-scale": 3.0})
    assert _blocked(_conv_layouts(other, tmp_path / "a")) == [True] * 3
    with tuningdb.TuningDB() as db:
        db.put(slow)
    convs = _conv_layouts(other, tmp_path / "b")
    assert _blocked(convs) == [False] * 3
    assert all("layout-scale 3.00" in l["details"].get("tuned", "") for l in convs), convs
    assert _blocked(_conv_layouts(other, tmp_path / "c", "--no-tuning")) == [True] * 3


def test_transfer_applies_a_region_record_of_the_same_class(env, tune_cache, tmp_path, monkeypatch):
    """Another model's region record of the same class (here one that chose NCHW) transfers to a region of other
    sizes: both layouts are measured there in the transfer's one program and the region gets its own record."""
    _own_cache(tune_cache, tmp_path, monkeypatch)
    dst = _pointwise_dw(tmp_path / "dst.onnx", c=24, h=18)
    dev = Inventory().resolve(["local"])[0]
    with open_transport(dev) as t:
        with tuningdb.TuningDB() as db:
            db.put(_region_record(dev, t, "region[1x1,dwconv3x3s1]", "layout-nchw", []))
        rep = tune(dst, dev, t, transfer_only=True, final_bench=False)
    assert rep["source_model"] == "src.onnx" and rep["programs"] == 1
    (row,) = [r for r in rep["layers"] if r["class"] == "region[1x1,dwconv3x3s1]"]
    assert row["source"].startswith("transferred from src.onnx (layout-nchw)"), row
    timed = {tr["algo"] for tr in row["record"]["trials"] if "ms" in tr}
    assert timed == {"layout-nchw", "layout-nchwc"} and row["record"]["source"] == "transferred from src.onnx"


def _source_records(dev, t, sigs_variants, model="src.onnx", threads=1):
    """Records of this machine for `model` that forced the given variants (no trials of their own)."""
    from edgec.devices.deploy import choose_mode

    facts = tuningdb.device_facts(dev, t, choose_mode(dev, "auto"), threads)
    fp = tuningdb.fingerprint(facts)
    return [tuningdb.Record(fp, sig, cls, v, vf, f"{v}-kernel", 1.0, "cost-model-kernel", 1.5, "measured", model,
                            dev.name, "2026-11-24", False, facts, [])
            for sig, cls, v, vf in sigs_variants]


def test_transfer_of_several_layers_is_one_program_with_per_layer_records(env, models, tmp_path, monkeypatch):
    """Transfer measures every layer it transfers in one measurement program: one build, one upload, one run;
    each candidate still checked against onnxruntime on its own extracted layer (a wrong one rejected), and
    a record per layer. Full tuning of the same model builds programs of consecutive layers up to
    PROGRAM_CANDIDATES candidates, a region's program its own."""
    monkeypatch.setenv("EDGEC_CACHE_DIR", str(tmp_path / "cache"))
    # channels not whole blocks: the dense convs stay out of the depthwise conv's region (see models())
    dst = _cnn(tmp_path / "dst.onnx", [("conv", 16, 18, 1), ("conv", 18, 18, 18), ("pool",), ("conv", 18, 18, 1)],
               [1, 16, 20, 20])
    dev = Inventory().resolve(["local"])[0]
    checked, corrupt = [], _corrupt("dw-cb")

    def after_run(name, t, outs):
        corrupt(name, t, outs)
        checked.append((name, outs))

    with open_transport(dev) as t, tuningdb.TuningDB(tmp_path / "db.sqlite") as db:
        for r in _source_records(dev, t, [
                ("conv3x3s1+relu:src-a", "conv3x3s1+relu", "direct", "conv=direct;sparse=dense"),
                ("conv3x3s1+relu:src-b", "conv3x3s1+relu", "winograd-f23", "conv=winograd-f23;sparse=dense"),
                ("dwconv3x3s1+relu:src-c", "dwconv3x3s1+relu", "dw-cb", "dw=cb")]):
            db.put(r)
        rep = tune(dst, dev, t, db=db, transfer_only=True, final_bench=False, after_run=after_run)
        uploaded = [d for d in Path(t.workdir(), "builds").iterdir() if d.is_dir()]
        recs = {r.signature: r for r in db.records() if r.model == "dst.onnx"}
    # the depthwise layer's region: src.onnx has no region record of its class
    (region,) = [r for r in rep["layers"] if r["class"].startswith("region[")]
    assert region["source"] == f"no record of class {region['class']} to transfer: cost model's pick kept"
    assert region["class"] == "region[dwconv3x3s1,pool]"  # the depthwise conv and the max pool after it
    rows = [r for r in rep["layers"] if r is not region]
    assert rep["source_model"] == "src.onnx" and len(rows) == 3
    assert rep["measured"] == 3 and rep["programs"] == 1 and rep["program_layers"] == [3]
    assert len(uploaded) == 1 and sorted(p.name for p in uploaded[0].iterdir() if p.name[0] != ".") == ["tune"]
    assert set(recs) == {r["signature"] for r in rows}  # one record per layer, each from the one program
    names = set()
    for row in rows:
        rec = recs[row["signature"]]
        assert row["source"].startswith("transferred from src.onnx") and rec.source == "transferred from src.onnx"
        live = [t for t in rec.trials if not t.get("rejected", "").startswith("same code as")]
        assert live[0]["variant"] == "default" and len(live) >= 2
        assert {t["variant"] for t in rec.trials} <= {"default", "direct", "winograd-f23", "dw-cb"}
        for tr in live:
            if tr["variant"] == "dw-cb":  # its output was damaged on the device: caught, never timed
                assert tr["rejected"].startswith("wrong output") and "ms" not in tr
            else:
                assert tr["ms"] > 0 and "rejected" not in tr
        names |= {(row["signature"], t["variant"]) for t in live}
    # every live candidate of every layer was checked, its own output file, all from the one run
    assert len({outs[0].rsplit("/", 1)[0] for _, outs in checked}) == 1
    assert sorted(outs[0].rsplit("/", 1)[1] for _, outs in checked) == \
        sorted(f"cand{i}_output_0.npy" for i in range(len(names)))
    assert sorted(n for n, _ in checked) == sorted(v for _, v in names)
    with open_transport(dev) as t, tuningdb.TuningDB(tmp_path / "full.sqlite") as db:
        full = tune(dst, dev, t, db=db, final_bench=False)
    # the two dense layers (9 candidates) in one program, the region in one of its own, then the depthwise layer
    # unless the region was recorded blocked (then it is not tuned alone)
    assert full["measured"] == sum(full["program_layers"]) >= 3
    assert full["program_layers"][:2] == [2, 1] and full["programs"] == len(full["program_layers"]) <= 3


def test_transfer_builds_a_variant_only_where_it_gives_the_source_models_kernel(env, tmp_path):
    """A source record says which kernel its variant gave there: gspc-tile gave the T_O=8 tiles, which a layer with
    2 channels per group does not get from it (T_O=4 there), so it is neither built nor measured; a variant that
    gives the same kernel (Winograd F(4,3)) is."""
    import dataclasses

    dst = _cnn(tmp_path / "dst.onnx", [("conv", 64, 64, 32)], [1, 64, 14, 14])
    dev = Inventory().resolve(["local"])[0]
    _, wino, o8 = _local_kernels()
    with open_transport(dev) as t, tuningdb.TuningDB(tmp_path / "db.sqlite") as db:
        for r, algo in zip(_source_records(dev, t, [
                ("gconv3x3s1+relu:src-a", "gconv3x3s1+relu", "gspc-tile", "gspc=tile"),
                ("gconv3x3s1+relu:src-b", "gconv3x3s1+relu", "winograd-f43", "conv=winograd-f43")]),
                (o8, wino)):
            db.put(dataclasses.replace(r, algo=algo, trials=[{"variant": r.variant, "algo": algo, "ms": 1.0}]))
        rep = tune(dst, dev, t, db=db, transfer_only=True, final_bench=False)
    (row,) = rep["layers"]
    trials = {tr["variant"]: tr for tr in row["record"]["trials"]}
    tile = trials["gspc-tile"]
    assert tile["rejected"] == "another kernel than on the source model" and "ms" not in tile
    assert trials["winograd-f43"]["algo"] == wino and trials["winograd-f43"]["ms"] > 0


def test_runtime_objects_are_reused_across_searches_and_keyed_by_flags_and_compiler(env, models, tmp_path,
                                                                                    monkeypatch):
    """Compiled runtime kernels are cached by their sources, flags and compiler: a second search whose build
    folders are gone compiles none again, a deploy of the model reuses them; another CFLAGS or compiler is
    another key."""
    import shutil

    from edgec.devices import deploy

    cache = tmp_path / "cache"
    monkeypatch.setenv("EDGEC_CACHE_DIR", str(cache))
    dev = Inventory().resolve(["local"])[0]

    def search(name):
        before = dict(deploy.OBJECT_STATS)
        with open_transport(dev) as t, tuningdb.TuningDB(tmp_path / f"{name}.sqlite") as db:
            rep = tune(models["dw"], dev, t, db=db, final_bench=False, layout="nchw")
        assert rep["measured"] == 1
        (work,) = [d for d in (cache / "cross").iterdir() if d.is_dir() and d.name[0] != "."]
        objs = sorted(work.glob("obj/*/runtime/**/*.o"))
        return {k: deploy.OBJECT_STATS[k] - before[k] for k in before}, work, objs

    first, work, objs = search("one")
    assert objs and first == {"hits": 0, "stored": len(objs)}
    cached = sorted((cache / "objects").glob("*/*.o"))
    assert len(cached) == len(objs)
    for d in ("cross", "builds"):  # a new workspace and build folder: only the object cache is left
        shutil.rmtree(cache / d)
    second, work, objs2 = search("two")
    assert second == {"hits": len(objs), "stored": 0}
    assert [o.read_bytes() for o in objs2] == [o.read_bytes() for o in objs]
    rel = next(str(o.relative_to(work / "obj" / o.relative_to(work / "obj").parts[0]))[:-2] + ".c" for o in objs2)
    key = deploy.object_key(work, rel, "cc", False)
    assert deploy.object_key(work, rel, "clang", False) != key  # another compiler
    # no runtime source reads EC_PROFILE: a profiling deploy of the model shares the tune program's kernels
    assert deploy.object_key(work, rel, "cc", True) == key
    before = dict(deploy.OBJECT_STATS)
    with open_transport(dev) as t:
        deploy.deploy(models["dw"], dev, t, profile=True)
    assert deploy.OBJECT_STATS["hits"] > before["hits"]
    monkeypatch.setenv("CFLAGS", "-O2")
    assert deploy.object_key(work, rel, "cc", False) != key
    shutil.rmtree(cache / "cross")
    n = len(list((cache / "objects").glob("*/*.o")))
    third, _, objs3 = search("three")  # the same sources under other flags: compiled again, cached apart
    assert third == {"hits": 0, "stored": len(objs3)}
    assert len(list((cache / "objects").glob("*/*.o"))) == n + len(objs3)



def _srcs(makefile: Path) -> list[str]:
    """The sources a generated Makefile compiles (its SRCS list)."""
    mk = makefile.read_text()
    return mk[mk.index("SRCS = ") + 7:mk.index("\nOBJS")].replace("\\", " ").split()


def test_candidates_are_grouped_in_units_by_the_headers_they_include(env, models):
    """A measurement program's candidates go into at most BUILD_JOBS translation units: those including the
    same runtime headers together (a unit parses them once), every candidate in exactly one unit, in candidate
    order; with one make job, one unit."""
    from edgec.devices import tune as tune_mod

    dev = Inventory().resolve(["local"])[0]
    with open_transport(dev) as t, tuningdb.TuningDB(env / "units.sqlite") as db:
        tu = tune_mod.Tuner(models["a"], dev, t, db=db, layout="nchw")
        jobs = tune_mod.plan(models["a"], dev, 1, None, "nchw")
        live, base = [], 0
        for k, j in enumerate(jobs):  # codegen only: both layers' candidates, as a transfer program holds them
            _, _, lv = tu._prepare(j, None, base, k)
            live += lv
            base += len(lv)
    heads = {c.build.prefix: tuple(sorted(r for r in c.build.ctx.required if r.endswith(".h"))) for c in live}
    assert len(set(heads.values())) >= 3  # Winograd, direct and depthwise kernels: something to group
    units = tune_mod._units(live, 2)
    assert len(units) == 2 and sorted(p for u in units for p in u) == sorted(heads)
    for u in units:
        assert u == sorted(u, key=lambda p: int(p[4:]))
    for h in set(heads.values()):  # a header set is never split between units
        assert sum(1 for u in units if any(heads[p] == h for p in u)) == 1
    assert tune_mod._units(live, 1) == [[c.build.prefix for c in live]]


def test_a_second_search_compiles_no_candidate_again(env, models, tmp_path, monkeypatch):
    """The program compiles its candidates in units (no candidate file alone), whose objects, like the
    harness's and the runtime kernels', are cached by their sources, flags and compiler: a second search of
    the same layer, its build folders gone, compiles nothing (counts) and measures as before. Built one object
    per candidate (tune.UNITS off, the build before units), the program lists the candidate files and caches
    none of them."""
    import shutil

    from edgec.devices import deploy
    from edgec.devices import tune as tune_mod

    cache = tmp_path / "cache"
    monkeypatch.setenv("EDGEC_CACHE_DIR", str(cache))
    dev = Inventory().resolve(["local"])[0]

    def search(name):
        before = {k: dict(d) for k, d in (("kernels", deploy.OBJECT_STATS), ("own", deploy.TUNE_OBJECT_STATS))}
        with open_transport(dev) as t, tuningdb.TuningDB(tmp_path / f"{name}.sqlite") as db:
            rep = tune(models["dw"], dev, t, db=db, final_bench=False, layout="nchw")
        assert rep["measured"] == rep["programs"] == 1
        (work,) = [d for d in (cache / "cross").iterdir() if d.is_dir() and d.name[0] != "."]
        stats = {k: {x: d[x] - before[k][x] for x in d}
                 for k, d in (("kernels", deploy.OBJECT_STATS), ("own", deploy.TUNE_OBJECT_STATS))}
        return rep, stats, work

    rep, first, work = search("one")
    srcs = _srcs(work / "Makefile")
    units = [s for s in srcs if s.startswith("tune_unit")]
    cands = re.findall(r'#include "(cand\d+)\.h"', (work / "tune_cands.c").read_text())
    included = [m for u in units for m in re.findall(r'#include "(cand\d+)\.c"', (work / u).read_text())]
    assert 1 <= len(units) <= tune_mod.BUILD_JOBS and sorted(included) == sorted(cands) and len(cands) >= 2
    assert not [s for s in srcs if s.startswith("cand")] and not list(work.glob("obj/*/cand*.o"))
    # compiled and cached: the units, tune.c and tune_cands.c
    assert first["own"] == {"hits": 0, "stored": len(units) + 2} and first["kernels"]["hits"] == 0
    for d in ("cross", "builds"):  # a new workspace and build folder: only the object cache is left
        shutil.rmtree(cache / d)
    rep2, second, _ = search("two")
    assert second["own"] == {"hits": len(units) + 2, "stored": 0} and second["kernels"]["stored"] == 0
    assert [t["algo"] for t in rep2["layers"][0]["record"]["trials"]] == \
        [t["algo"] for t in rep["layers"][0]["record"]["trials"]]
    monkeypatch.setattr(tune_mod, "UNITS", False)
    shutil.rmtree(cache / "cross")
    _, third, work = search("three")
    srcs = _srcs(work / "Makefile")
    assert sorted(s for s in srcs if s.startswith("cand")) == sorted(f"{c}.c" for c in cands)
    assert not [s for s in srcs if s.startswith("tune_unit")] and len(list(work.glob("obj/*/cand*.o"))) == len(cands)
    assert third["own"]["stored"] == 0  # tune.c and tune_cands.c from the cache; candidate objects not cached

def _q8_sparse_1x1(path, c=64, k=64, hw=14, sparsity=0.8, seed=3):
    """One int8 QLinearConv 1x1 whose weights are pruned in 4x1 blocks (4 output channels x 1 input channel)."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-100, 100, (k, c), dtype=np.int8)
    w[w == 0] = 1
    w[np.repeat(rng.random((k // 4, c)) < sparsity, 4, axis=0)] = 0
    inits = [numpy_helper.from_array(np.float32(0.02), "xs"), numpy_helper.from_array(np.uint8(128), "xz"),
             numpy_helper.from_array(w.reshape(k, c, 1, 1), "w"), numpy_helper.from_array(np.float32(0.01), "ws"),
             numpy_helper.from_array(np.int8(0), "wz"), numpy_helper.from_array(np.float32(0.05), "ys"),
             numpy_helper.from_array(np.uint8(128), "yz"),
             numpy_helper.from_array(rng.integers(-500, 500, k).astype(np.int32), "b")]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"])
    g = helper.make_graph([node], path.stem, [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, k, hw, hw])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


def test_int8_sparse_layers_time_dense_and_sparse_and_the_break_even_is_fitted(env, tmp_path):
    """An int8 1x1 conv with 4x1-block pruned weights is tuned between the sparse kernel and the dense int8
    GEMM (the registry's sparse family, int8 4x1 only); its record's zero fraction and trials fit the int8
    break-even (costmodel.fit_q8_sparse), which choose_int8_sparse then follows on untuned layers."""
    from edgec.codegen import costmodel
    from edgec.codegen.options import CompileOptions, using
    from edgec.codegen.targets import get_target
    from edgec.devices.tune import learned_constants

    # the local device's hand-set break-even (0.70 on AVX2, 0.90 with VNNI's faster dense GEMM, 1.0 on AMX: never):
    # weights above it where there is one
    local = _local_kernels()[0]
    be = costmodel.Q8_SPARSE_BREAK_EVEN[costmodel._q8_family(local)]
    z = 0.8 if be < 0.75 else 0.95
    path = _q8_sparse_1x1(tmp_path / "q8s.onnx", sparsity=z)
    dev = Inventory().resolve(["local"])[0]
    with open_transport(dev) as t, tuningdb.TuningDB(tmp_path / "db.sqlite") as db:
        rep = tune(path, dev, t, db=db, final_bench=False)
        (rec,) = db.records()
    got_z = float(rec.signature.rsplit(":z", 1)[1])
    assert rep["measured"] == 1 and rec.cls == "q8conv1x1s1" and ":uint8:t1:z" in rec.signature
    timed = {t["algo"]: t["ms"] for t in rec.trials if "ms" in t}
    sparse = [ms for a, ms in timed.items() if a.startswith("q8-spmm")]
    dense = [ms for a, ms in timed.items() if not a.startswith("q8-spmm")]
    assert sparse and dense, rec.trials  # both timed on the device, both checked against onnxruntime
    fit = learned_constants([rec], local)
    if be >= 1.0:  # AMX: the dense GEMM is the default at any sparsity, and no sparsity can move that up
        assert not rec.default_algo.startswith("q8-spmm") and fit.get("q8-sparse-be", be) >= got_z
    else:
        assert got_z > be and rec.default_algo.startswith("q8-spmm")  # above the break-even: the sparse kernel
        if min(sparse) < min(dense):  # the device agrees with the hand-set break-even: nothing to learn
            assert "q8-sparse-be" not in fit
        else:
            assert fit["q8-sparse-be"] >= got_z

    # the rest is the fit alone, on the AVX2 break-even
    target = get_target("x86_64-avx2")

    # records where the sparse kernel won at 50% and 60% zeros move the break-even below them
    def record(z, sparse_ms, dense_ms):
        sig = f"q8conv1x1s1:N1C64H14W14K64G1k1x1s1x1d1x1p0x0o14x14:uint8:t1:z{z:.2f}"
        trials = [{"variant": "default", "algo": "q8-gemm-4x16", "ms": dense_ms},
                  {"variant": "sparse-4x1", "algo": "q8-spmm-4x1", "ms": sparse_ms}]
        return tuningdb.Record("fp", sig, "q8conv1x1s1", "sparse-4x1", "sparse=sparse-4x1", "q8-spmm-4x1", sparse_ms,
                               "q8-gemm-4x16", dense_ms, "measured", "m.onnx", "local", "2026-11-24", False, {}, trials)

    fit = learned_constants([record(0.5, 0.8, 1.0), record(0.6, 0.7, 1.0)], target)
    assert 0.4 <= fit["q8-sparse-be"] < 0.5
    w = np.repeat(np.where(np.random.default_rng(1).random((16, 64)) < 0.55, 0.0, 3.0), 4, axis=0)  # 4x1 blocks
    assert 0.5 < costmodel.block_sparsity(w, 4, 1) < 0.6
    assert costmodel.choose_int8_sparse(target, w).algo == "dense"
    with using(CompileOptions(learned=tuple(fit.items()))):
        got = costmodel.choose_int8_sparse(target, w)
    assert got.algo == "q8-spmm" and f"break-even {fit['q8-sparse-be']:.2f}" in got.why
    assert learned_constants([record(0.8, 0.5, 1.0)], target) == {}  # agrees with the hand-set 0.70


def test_winograd_split_axis_is_a_par_variant(env, tmp_path):
    """The Winograd driver's split axis is tunable: par-rows splits each tile block's output channels, par-cols
    the tiles; forced with F(4,3) on a dense and a grouped 3x3 layer at 2 threads (transferred in one program)
    each emits its own code, passes the check against onnxruntime and is timed."""
    from edgec.codegen.options import CompileOptions
    from edgec.codegen.project import compile_model

    path = _cnn(tmp_path / "w.onnx", [("conv", 32, 36, 1), ("conv", 36, 64, 4)], [1, 32, 14, 14])  # see models()
    dev = Inventory().resolve(["local"])[0]
    wino = _local_kernels()[1]
    forced = {k: f"conv=winograd-f43;sparse=dense;par={k.rsplit('-', 1)[1]}" for k in ("winograd-f43+par-rows",
                                                                         "winograd-f43+par-cols")}
    with open_transport(dev) as t, tuningdb.TuningDB(tmp_path / "db.sqlite") as db:
        for i, (cls, v) in enumerate((c, v) for c in ("conv3x3s1+relu", "gconv3x3s1+relu") for v in forced):
            db.put(_source_records(dev, t, [(f"{cls}:src{i}", cls, v, forced[v])], threads=2)[0])
        rep = tune(path, dev, t, threads=2, db=db, transfer_only=True, final_bench=False)
    assert rep["programs"] == 1 and rep["measured"] == 2
    for row in rep["layers"]:
        trials = {t["variant"]: t for t in row["record"]["trials"]}
        for v, axis in (("winograd-f43+par-rows", "rows"), ("winograd-f43+par-cols", "cols")):
            assert trials[v]["algo"] == f"{wino}/{axis}" and trials[v]["ms"] > 0, trials
    # what each axis emits: all 16 tiles in one block, its output channels (or groups) split; or no channel split
    sigs = [row["signature"] for row in rep["layers"]]
    for axis, check in (("rows", lambda d: d["tb"] >= 16), ("cols", lambda d: d["ksplit"] == 1)):
        opts = CompileOptions(target=dev.target, threads=2, tuned=tuple((s, forced[f"winograd-f43+par-{axis}"], "x")
                                                                        for s in sigs))
        layers = [l for l in compile_model(path, tmp_path / axis, options=opts).layers if l["op"] == "Conv"]
        assert len(layers) == 2 and all(check(l["details"]) for l in layers), [l["details"] for l in layers]


@pytest.mark.ssh
def test_transfer_over_ssh_on_the_emulated_board_is_one_program(emu_board, env, tmp_path):
    """The several-layer transfer program cross-built for aarch64, uploaded over SSH and run under qemu: one
    program, each layer's candidates checked against onnxruntime, a record per layer (flagged emulated)."""
    # dw: plane by default; 10 channels, not whole NEON blocks (see models())
    dst = _cnn(tmp_path / "dst.onnx", [("conv", 8, 10, 1), ("conv", 10, 10, 10)], [1, 8, 20, 20])
    with open_transport(emu_board) as t, tuningdb.TuningDB(tmp_path / "db.sqlite") as db:
        for r in _source_records(emu_board, t, [
                ("conv3x3s1+relu:src-a", "conv3x3s1+relu", "direct", "conv=direct;sparse=dense"),
                ("conv3x3s1+relu:src-b", "conv3x3s1+relu", "winograd-f23", "conv=winograd-f23;sparse=dense"),
                ("dwconv3x3s1+relu:src-c", "dwconv3x3s1+relu", "dw-cb", "dw=cb")]):
            db.put(r)
        rep = tune(dst, emu_board, t, db=db, transfer_only=True, final_bench=False)
        recs = [r for r in db.records() if r.model == "dst.onnx"]
    assert rep["emulated"] and rep["mode"] == "cross" and rep["facts"]["target"] == "aarch64-neon"
    assert rep["measured"] == 2 and rep["programs"] == 1 and rep["program_layers"] == [2]
    assert len(recs) == 2 and all(r.emulated and r.source == "transferred from src.onnx" for r in recs)
    for r in recs:
        live = [t for t in r.trials if not t.get("rejected", "").startswith("same code as")]
        assert len(live) >= 2 and all(t["ms"] > 0 and "rejected" not in t for t in live), r.trials
