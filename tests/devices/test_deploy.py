"""deploy and bench end to end: compiled models on local, an SSH board and an emulated aarch64 Pi 4."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from devkit import run_cli
from edgec.devices.bench import bench, check_outputs, run_model
from edgec.devices.deploy import build_local, deploy
from edgec.devices.inventory import Inventory, device_from_profile
from edgec.devices.transport import open_transport
from edgec.errors import EdgecError

pytestmark = [pytest.mark.ssh, pytest.mark.slow]

JSON_KEYS = {"device", "median_ms", "p90_ms", "p99_ms", "mean_ms", "runs", "min_ms", "max_ms", "std_ms", "cov_pct",
             "init_ms", "first_ms", "throughput_ips", "peak_rss_kb", "binary_bytes", "weights_bytes", "layers",
             "state_before", "state_after", "warnings", "emulated", "target"}


def test_bench_local_zero_config(edgec_env, tiny_model):
    rc, out, err = run_cli("bench", str(tiny_model), "--runs", "12", "--json")
    assert rc == 0, err
    rep = json.loads(out)
    assert JSON_KEYS <= set(rep)
    assert rep["device"] == "local" and rep["runs"] == 12 and len(rep["runs_ms"]) == 12
    t = np.array(rep["runs_ms"])
    assert rep["median_ms"] == pytest.approx(np.median(t)) and rep["p90_ms"] == pytest.approx(np.percentile(t, 90))
    assert rep["min_ms"] <= rep["median_ms"] <= rep["p99_ms"] <= rep["max_ms"]
    assert {l["op"] for l in rep["layers"]} >= {"Tanh"}
    assert sum(l["time_pct"] for l in rep["layers"]) == pytest.approx(100, abs=0.5)
    assert rep["binary_bytes"] > 1000 and rep["peak_rss_kb"] > 0 and not rep["emulated"]
    # human report: same numbers in tables
    rc, out, err = run_cli("bench", str(tiny_model), "--runs", "5")
    assert rc == 0 and "median / mean" in out and "slowest layers" in out and "only 5 runs" in out


def test_deploy_ssh_cross_and_on_device(board, tiny_model):
    for mode in ("cross", "on-device"):
        rc, out, err = run_cli("deploy", str(tiny_model), "--device", "board", "--build", mode)
        assert rc == 0, err
        assert f"({mode} build" in out and "outputs match onnxruntime" in out
    # A second deploy sends nothing: the build is content-addressed.
    rc, out, err = run_cli("deploy", str(tiny_model), "-d", "board", "--build", "cross")
    assert rc == 0 and re.search(r"\b0 bytes sent", out)


def test_emulated_pi4_deploy_and_bench(emu_board, tiny_model):
    with open_transport(emu_board) as t:
        dep = deploy(tiny_model, emu_board, t)
        assert dep.mode == "cross"
        assert b"ELF" in t.read(dep.dir + "/bench")[:4] and t.read(dep.dir + "/bench")[18] == 0xB7  # EM_AARCH64
        chk = check_outputs(dep)
        assert chk["ok"] and chk["max_rel_err"] < 1e-4
        rep = bench(dep, runs=5, warmup=1, compare_ort=True)
    assert rep["emulated"] and rep["target"] == "aarch64-neon"
    assert any("EMULATED" in w for w in rep["warnings"])
    assert "skipped" in rep["onnxruntime"]
    rc, out, err = run_cli("bench", str(tiny_model), "-d", "emu-pi4", "--runs", "3")
    assert rc == 0 and "EMULATED" in out


def test_several_devices_one_table(board, emu_board, tiny_model, edgec_env):
    inv = Inventory()
    inv.user_doc["device_groups"] = {"lab": ["board", "emu-pi4", "local"]}
    inv._save()
    rc, out, err = run_cli("bench", str(tiny_model), "-d", "lab", "--runs", "5", "--warmup", "1")
    assert rc == 0, err
    assert "comparison" in out
    for name in ("board", "emu-pi4", "local"):
        assert f"on {name} (" in out
    rc, out, err = run_cli("bench", str(tiny_model), "-d", "board", "-d", "local", "--runs", "3", "--json")
    doc = json.loads(out)
    assert [r["device"] for r in doc["reports"]] == ["board", "local"] and doc["errors"] == {}


def test_compare_ort_on_board(board, tiny_model):
    with open_transport(board) as t:
        has_ort = t.run(["python3", "-c", "import onnxruntime, numpy"]).ok
        dep = deploy(tiny_model, board, t)
        rep = bench(dep, runs=5, warmup=1, compare_ort=True)
    ort = rep["onnxruntime"]
    if has_ort:
        assert ort["runs"] == 5 and ort["median_ms"] > 0 and ort["speedup"] > 0
        assert ort["inputs"] == {"x": [1, 4, 6, 6]}
    else:  # the board's python3 lacks onnxruntime: said so, edgec's numbers still there
        assert "python3 with onnxruntime not found on board" in ort["skipped"] and rep["median_ms"] > 0


def test_remote_crash_reports_signal(board, emu_board, tiny_model, tmp_path):
    from edgec.devices.deploy import prepare_project

    for dev in (emu_board, board):
        project, _ = prepare_project(tiny_model, dev)
        broken = tmp_path / f"broken build {dev.name}"
        shutil.copytree(project, broken)
        src = (broken / "bench.c").read_text()
        (broken / "bench.c").write_text(src.replace("int main(int argc, char **argv)\n{",
                                                    "int main(int argc, char **argv)\n{\n"
                                                    "    { volatile int *p = 0; *p = argc; }", 1))
        rc, out, err = run_cli("bench", str(broken), "-d", dev.name, "--runs", "2")
        assert rc != 0 and f"bench crashed on {dev.name}" in err and "SIGSEGV (signal 11)" in err, err
    rc, out, err = run_cli("bench", str(broken), "-d", "emu-pi4")  # an x86 build folder for an Arm board
    assert rc != 0 and "compiled for x86_64-avx2 (x86_64) but emu-pi4 needs aarch64-neon" in err, err


def test_missing_compiler_on_device(board, tiny_model):
    import dataclasses
    Inventory().add(dataclasses.replace(board, cc="no-such-cc"), replace=True)
    rc, out, err = run_cli("deploy", str(tiny_model), "-d", "board", "--build", "on-device")
    assert rc != 0 and "no `no-such-cc` on board" in err and "--build cross" in err


def test_interrupted_deploy_then_retry(sshd, board, tiny_model):
    with open_transport(board) as t:
        sent = []

        def drop(stage, name, nbytes):
            if stage == "upload" and nbytes and name in ("bench", "runner"):
                sent.append(name)
                if len(sent) == 1:  # the board vanishes after the first file
                    sshd.stop()
                    t.client.get_transport().close()

        try:
            with pytest.raises(EdgecError, match="connection refused by board"):
                deploy(tiny_model, board, t, progress=drop)
        finally:
            sshd.start()
    with open_transport(board) as t:
        builds = t.run(["ls", "-a", f"{board.workdir}/builds"]).out.split()
        assert not [b for b in builds if not b.startswith(".")]  # nothing that looks complete
        dep = deploy(tiny_model, board, t)
        bins = build_local(dep.project, board, True)
        other = [b for b in ("runner", "bench") if b != sent[0]][0]
        assert dep.sent_bytes == bins[other].stat().st_size  # the finished file is not sent again
        assert check_outputs(dep)["ok"]
        out = run_model(dep, [np.zeros((1, 4, 6, 6), np.float32)])
        assert out[0].shape == (1, 4, 6, 6)


def test_hostile_device_and_paths(sshd, edgec_env, tiny_model, tmp_path):
    canary = tmp_path / "canary"
    (edgec_env / "cfg").mkdir(exist_ok=True)
    (edgec_env / "cfg" / "known_hosts").write_text(sshd.known_hosts_line())
    name = f"my board; touch {canary}"
    dev = device_from_profile(name, "x86-avx2", host="127.0.0.1", port=sshd.port, user="root",
                              identity_file=str(sshd.client_key), timeout=5,
                              workdir=str(tmp_path / f"w $(touch {canary}) `x`; y"))
    with pytest.raises(EdgecError, match="device name"):
        Inventory().add(dev)  # `devices add` refuses such a name...
    # ...but a hand-written inventory can still hold one: every command built from it must stay quoted
    import yaml
    from edgec.devices.inventory import inventory_path
    inventory_path().parent.mkdir(parents=True, exist_ok=True)
    inventory_path().write_text(yaml.safe_dump({"devices": {name: dev.entry()}}))
    rc, out, err = run_cli("deploy", str(tiny_model), "-d", name)
    assert rc == 0, err
    assert "outputs match onnxruntime" in out
    assert not canary.exists()


def test_cnn_on_three_boards_at_once(board, emu_board, conv_model):
    """Concurrent deploys (x86 over SSH, emulated Pi 4, local) of a CNN; each checked against onnxruntime."""
    rc, out, err = run_cli("deploy", str(conv_model), "-d", "board", "-d", "emu-pi4", "-d", "local")
    assert rc == 0, err
    assert out.count("outputs match onnxruntime") == 3
    rc, out, err = run_cli("bench", str(conv_model), "-d", "emu-pi4", "--runs", "3", "--json")
    rep = json.loads(out)
    assert {l["op"] for l in rep["layers"]} - {"LayoutReorder"} == {"Conv", "GlobalAveragePool"}  # + NCHWc edges
    assert sum(l["mac_pct"] for l in rep["layers"]) == pytest.approx(100, abs=0.5)


def test_armv7_board_emulated_locally(edgec_env, conv_model):
    """`--host local` + an exec wrapper: a 32-bit Pi without SSH, binaries through qemu-arm."""
    if not (shutil.which("qemu-arm") and shutil.which("arm-linux-gnueabihf-gcc")):
        pytest.skip("needs qemu-user and gcc-arm-linux-gnueabihf")
    rc, out, err = run_cli("devices", "add", "pi32", "--host", "local", "--profile", "pi-armv7",
                           "--exec-wrapper", "qemu-arm -cpu max")
    assert rc == 0, err
    rc, out, err = run_cli("deploy", str(conv_model), "-d", "pi32")
    assert rc == 0, err
    assert "(cross build" in out and "outputs match onnxruntime" in out
    dep_dir = out.split("deployed to pi32:")[1].split(" ")[0]
    assert open(f"{dep_dir}/bench", "rb").read(20)[18] == 40  # EM_ARM


@pytest.mark.torch
def test_digits_cnn_on_emulated_pi4_matches_onnxruntime(emu_board, digits_cnn):
    """The trained digits CNN, batch 360, cross-built for the Pi 4 and run under qemu: same predictions as ORT."""
    import onnxruntime as ort

    data = np.load(digits_cnn.data)
    x, labels = data["input"], data["labels"]
    shapes = {"input": list(x.shape)}
    with open_transport(emu_board) as t:
        dep = deploy(digits_cnn.model, emu_board, t, input_shapes=shapes)
        (logits,) = run_model(dep, [x])
    ref = ort.InferenceSession(str(digits_cnn.model), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    assert logits.shape == (len(x), 10)
    np.testing.assert_allclose(logits, ref, rtol=1e-4, atol=1e-4)
    assert (logits.argmax(1) == ref.argmax(1)).all()
    assert (logits.argmax(1) == labels).mean() > 0.9


def test_compare_ort_uses_pinned_shapes(edgec_env, digits_cnn):
    rc, out, err = run_cli("bench", str(digits_cnn.model), "-s", "input:4,1,8,8", "--runs", "5", "--compare-ort",
                           "--json")
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["onnxruntime"]["inputs"] == {"input": [4, 1, 8, 8]} and rep["onnxruntime"]["runs"] == 5


def test_deploy_build_folder(edgec_env, tiny_model, tmp_path):
    from edgec.codegen import compile_model

    out = tmp_path / "tiny build"
    compile_model(tiny_model, out, target="native")
    rc, stdout, err = run_cli("deploy", str(out))
    assert rc == 0, err
    assert "outputs not checked (pass --model MODEL.onnx)" in stdout
    rc, stdout, err = run_cli("deploy", str(out), "--model", str(tiny_model))
    assert rc == 0 and re.search(r"\b0 bytes sent", stdout) and "outputs match onnxruntime" in stdout
    rc, stdout, err = run_cli("deploy", str(tmp_path))
    assert rc != 0 and "not an edgec build folder" in err


def test_clean_removes_uploads(board, tiny_model):
    assert run_cli("deploy", str(tiny_model), "-d", "board", "--no-check")[0] == 0
    with open_transport(board) as t:
        assert t.run(["test", "-d", f"{board.workdir}/objects"]).ok
    rc, out, err = run_cli("devices", "clean", "board")
    assert rc == 0 and "board: removed edgec's files" in out and " MB)" in out
    with open_transport(board) as t:
        assert t.run(["ls", "-A", board.workdir]).out.strip() == ""
    rc, out, err = run_cli("deploy", str(tiny_model), "-d", "board")  # and deploys again from scratch
    assert rc == 0 and "outputs match onnxruntime" in out and not re.search(r"\b0 bytes sent", out)


@pytest.mark.parametrize("change, message", [
    ({"port": "free"}, "connection refused by bad"),
    ({"host": "no-such-board.invalid"}, "cannot resolve host 'no-such-board.invalid' of device bad (DNS failure)"),
    ({"identity_file": "wrong"}, "authentication failed for bad"),
    ({"known_hosts": "other"}, "host key of bad (root@127.0.0.1:"),
])
def test_cli_failures_are_one_line(board, edgec_env, tiny_model, change, message):
    import dataclasses
    import subprocess
    from devkit import free_port

    fields = {}
    if change.get("port"):
        fields["port"] = free_port()
    if change.get("host"):
        fields["host"] = change["host"]
    if change.get("identity_file") or change.get("known_hosts"):
        key = edgec_env / "otherkey"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        if change.get("identity_file"):
            fields["identity_file"] = str(key)
        else:
            pub = " ".join(key.with_suffix(".pub").read_text().split()[:2])
            (edgec_env / "cfg" / "known_hosts").write_text(f"[127.0.0.1]:{board.port} {pub}\n")
    Inventory().add(dataclasses.replace(board, name="bad", **fields))
    for args in (["bench", str(tiny_model), "-d", "bad"], ["deploy", str(tiny_model), "-d", "bad"],
                 ["devices", "check", "bad"]):
        rc, out, err = run_cli(*args)
        assert rc != 0 and message in err, err
        assert "Traceback" not in err and len([l for l in err.splitlines() if l.startswith("error:")]) == 1


def test_cli_disk_full(board, edgec_env, tiny_model):
    import dataclasses
    import subprocess

    mnt = edgec_env / "tiny disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)]).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        Inventory().add(dataclasses.replace(board, name="full", workdir=str(mnt)))
        rc, out, err = run_cli("deploy", str(tiny_model), "-d", "full")
        assert rc != 0 and "disk full on full" in err and "Traceback" not in err, err
    finally:
        subprocess.run(["umount", str(mnt)])


def test_compile_cache_keys_profile_and_resolved_target(edgec_env, tiny_model):
    """A profiled and a plain build never share a cached project, and "native" is cached under the target it
    resolves to on this CPU (a cache shared between machines must not hand one CPU's code to another)."""
    from edgec.codegen.targets import detect_native
    from edgec.devices.deploy import prepare_project

    local = Inventory().get("local")
    plain, _ = prepare_project(tiny_model, local, profile=False)
    profiled, _ = prepare_project(tiny_model, local, profile=True)
    assert plain != profiled
    assert plain.name.startswith(f"tiny_model-{detect_native()}-")  # "tiny model": the label keeps safe characters


def test_deploy_checks_int8_against_the_exact_qdq_arithmetic(edgec_env, conv_model, tmp_path):
    """An int8 (QDQ) model is checked like `edgec verify` checks it: against its exact QDQ arithmetic, quantized
    outputs within one step, not against onnxruntime's CPU-specific int8 kernels with a float tolerance."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    inp = onnx.load(str(conv_model)).graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    rng = np.random.default_rng(3)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{inp.name: rng.standard_normal(shape).astype(np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.it, None)

    q = tmp_path / "int8.onnx"
    quantize_static(str(conv_model), str(q), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    rc, out, err = run_cli("deploy", str(q), "--device", "local")
    assert rc == 0, err
    assert "outputs match exact QDQ arithmetic" in out and "quantization steps" in out
    dev = Inventory().get("local")
    with open_transport(dev) as t:
        chk = check_outputs(deploy(q, dev, t))
    assert chk["ok"] and chk["reference"] == "exact QDQ arithmetic" and chk["max_err_lsb"] <= 1.0
