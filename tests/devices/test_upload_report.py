"""Content-addressed upload, /proc/cpuinfo parsing and report statistics."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from edgec.devices.inventory import device_from_profile
from edgec.devices.probe import parse_cpuinfo
from edgec.devices.report import make_report, stats, top_layers, trust_warnings
from edgec.devices.transport import open_transport
from edgec.devices.upload import MARKER, Manifest, upload


def _files(tmp_path: Path, n: int, size: int = 50_000) -> list[Path]:
    out = []
    for i in range(n):
        p = tmp_path / f"file {i}.bin"
        p.write_bytes(os.urandom(size))
        out.append(p)
    return out


def test_upload_skips_unchanged_and_is_atomic(edgec_env, tmp_path):
    dev = device_from_profile("here", "local", workdir=str(edgec_env / "remote"))
    files = _files(tmp_path, 3)
    m = Manifest()
    for p in files:
        m.add("sub/" + p.name, p)
    with open_transport(dev) as t:
        events = []

        def stop_after_one(ev, name, n):
            events.append(ev)
            if ev == "sent":
                raise KeyboardInterrupt  # Ctrl-C mid-upload

        with pytest.raises(KeyboardInterrupt):
            upload(t, m, stop_after_one)
        assert not (edgec_env / "remote" / "builds").exists() or not list((edgec_env / "remote" / "builds").glob("[!.]*"))
        r = upload(t, m)
        assert r.sent_files == 2 and not r.reused  # the finished file is reused
        d = Path(r.dir)
        assert (d / MARKER).is_file()
        assert all((d / "sub" / p.name).read_bytes() == p.read_bytes() for p in files)
        assert upload(t, m).reused
        # A new build sharing two files sends only the changed one.
        files[0].write_bytes(os.urandom(1000))
        m2 = Manifest()
        for p in files:
            m2.add("sub/" + p.name, p)
        r2 = upload(t, m2)
        assert r2.sent_files == 1 and r2.sent_bytes == 1000 and r2.dir != r.dir


def test_manifest_refuses_escaping_paths(tmp_path):
    p = _files(tmp_path, 1)[0]
    with pytest.raises(ValueError):
        Manifest().add("../evil", p)


def test_parse_real_cpuinfo():
    info = parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    assert info["cpu"] and info["features"] and info["processors"] == os.cpu_count()


PI4_CPUINFO = "".join(f"""processor\t: {i}
BogoMIPS\t: 108.00
Features\t: fp asimd evtstrm crc32 cpuid
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x0
CPU part\t: 0xd08
CPU revision\t: 3

""" for i in range(4)) + "Hardware\t: BCM2835\nRevision\t: c03114\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n"


def test_parse_pi4_cpuinfo():
    info = parse_cpuinfo(PI4_CPUINFO)
    assert info == {"cpu": "Cortex-A72 (Raspberry Pi 4 Model B Rev 1.4)", "cpu_part": "0xd08",
                    "features": ["fp", "asimd", "evtstrm", "crc32", "cpuid"], "processors": 4}


def test_stats_match_numpy():
    t = list(np.random.default_rng(0).gamma(5.0, 1.0, 101))
    s = stats(t)
    a = np.array(t)
    assert s["median_ms"] == pytest.approx(np.median(a)) and s["p99_ms"] == pytest.approx(np.percentile(a, 99))
    assert s["std_ms"] == pytest.approx(a.std(ddof=1)) and s["cov_pct"] == pytest.approx(100 * a.std(ddof=1) / a.mean())
    assert s["throughput_ips"] == pytest.approx(1000 / a.mean()) and s["runs"] == 101


def test_layers_and_warnings():
    layers = [{"name": "a", "op": "Conv", "algo": "gemm", "macs": 900, "ms": 1.0},
              {"name": "b", "op": "Conv", "algo": "dw", "macs": 100, "ms": 3.0}]
    top = top_layers(layers)
    assert [l["name"] for l in top] == ["b", "a"]
    assert top[0]["time_pct"] == pytest.approx(75) and top[0]["mac_pct"] == pytest.approx(10)
    dev = device_from_profile("emu", "pi4", host="x", exec_wrapper=["qemu-aarch64", "-cpu", "cortex-a72"])
    raw = {"model": "m", "target": "aarch64-neon", "threads": 1, "init_ms": 1, "first_ms": 2,
           "runs_ms": [1.0, 1.0, 2.0, 1.0] * 5, "layers": layers}
    hot = {"governor": "ondemand", "freq_mhz": 1500, "throttled": "0x50005", "loadavg_1m": 3.2, "cores": 4,
           "temp_c": 70}
    rep = make_report(raw, device=dev, before=hot, after={**hot, "freq_mhz": 600, "temp_c": 85})
    text = " | ".join(rep["warnings"])
    for needle in ("EMULATED", "variation", "throttling 0x50005", "load average was 3.20", "governor is ondemand",
                   "fell from 1500 to 600", "temperature reached 85"):
        assert needle in text, needle
    calm = {"governor": "performance", "freq_mhz": 1500, "throttled": "0x0", "loadavg_1m": 0.0, "cores": 4}
    real = device_from_profile("pi", "pi4", host="x")
    rep = make_report({**raw, "runs_ms": [1.0] * 20}, device=real, before=calm, after=calm)
    assert trust_warnings(rep, real) == []


def test_wall_vs_cpu_time_and_warmup_are_reported():
    """A 1-thread run whose wall time is well above its CPU time was sharing the CPU: said so, with both medians;
    the warm-up the bench program actually did is shown; old bench output without these keys still reports."""
    calm = {"governor": "performance", "loadavg_1m": 0.0, "cores": 4}
    real = device_from_profile("pi", "pi4", host="x")
    raw = {"model": "m", "target": "aarch64-neon", "threads": 1, "runs_ms": [2.0] * 20, "runs_cpu_ms": [1.0] * 20,
           "warmup_runs": 37, "warmup_ms": 251.5, "timed_nivcsw": 9}
    rep = make_report(raw, device=real, before=calm, after=calm, warmup=5)
    assert rep["cpu_median_ms"] == 1.0 and rep["warmup_runs"] == 37 and rep["timed_nivcsw"] == 9
    assert [w for w in rep["warnings"] if "off the CPU for 50%" in w and "CPU time 1 ms" in w]
    text = " ".join(_rendered(rep).replace("│", " ").split())  # the table's column rule
    assert "median / mean (wall clock) 2 / 2 ms" in text and "+37 warm-up in 251.5 ms" in text
    assert "CPU time median 1 ms" in text
    # within 10%, or 2 threads (the process's CPU time counts both): no warning
    assert trust_warnings(make_report({**raw, "runs_cpu_ms": [1.9] * 20}, device=real, before=calm, after=calm),
                          real) == []
    assert trust_warnings(make_report({**raw, "threads": 2}, device=real, before=calm, after=calm), real) == []
    old = make_report({k: raw[k] for k in ("model", "target", "threads", "runs_ms")}, device=real, before=calm,
                      after=calm, warmup=5)
    assert old["cpu_median_ms"] is None and old["warmup_runs"] == 5 and old["warnings"] == []
    assert "+5 warm-up)" in _rendered(old) and "CPU time median" not in _rendered(old)


def test_pi4_board_entered_as_pi5_is_flagged():
    from edgec.devices.probe import compare
    info = parse_cpuinfo(PI4_CPUINFO)
    rec = {"arch": "aarch64", "cpu": info["cpu"], "cpu_part": info["cpu_part"], "features": info["features"],
           "cores": 4, "cc": "/usr/bin/cc", "governor": "ondemand", "throttled": "0x0", "temp_c": 55.0}
    w = " | ".join(compare(device_from_profile("b", "pi5", host="x"), rec))
    assert "CPU is Cortex-A72" in w and "tuned for Cortex-A76" in w and "lacks asimddp, asimdhp" in w
    assert "governor is ondemand" in w
    assert [x for x in compare(device_from_profile("b", "pi4", host="x"), rec) if "governor" not in x] == []


@pytest.mark.parametrize("terminal", [True, False])
def test_progress_display(terminal):
    import io
    from rich.console import Console
    from edgec.devices.progress import DeviceProgress

    buf = io.StringIO()
    con = Console(file=buf, force_terminal=terminal, width=100)
    with DeviceProgress(["pi a", "pi b"], con) as prog:
        a, b = prog.callback("pi a"), prog.callback("pi b")
        a("compile", "m.onnx", 0)
        a("upload", "2 files, 3000 bytes", 0)
        a("upload", "bench", 1000)
        b("upload", "1 files, 10 bytes", 0)
        prog.done("pi a")
        prog.done("pi b", failed=True)
    text = buf.getvalue()
    assert "pi a: done" in text and "pi b: failed" in text
    if not terminal:  # piped: one plain line per stage change
        assert "pi a: upload 2 files, 3000 bytes" in text and "pi a: upload bench" not in text


def _rendered(rep: dict, table=None) -> str:
    from rich.console import Console

    from edgec.devices.report import render

    con = Console(width=300, record=True, file=open(os.devnull, "w"))
    if table is not None:
        con.print(table)
    else:
        render(rep, con)
    return " ".join(con.export_text().split())


@pytest.mark.parametrize("edgec_ms,ort_ms,expect", [
    (1.90, 1.60, "edgec takes 1.19x onnxruntime's time (onnxruntime is faster)"),
    (1.60, 2.00, "edgec is 1.25x faster than onnxruntime"),
    (1.60, 1.601, "edgec and onnxruntime take the same time"),
])
def test_onnxruntime_comparison_says_who_is_faster(edgec_ms, ort_ms, expect):
    from edgec.devices.report import compare_table

    dev = device_from_profile("here", "local")
    calm = {"governor": "performance", "loadavg_1m": 0.0, "cores": 2}
    raw = {"model": "m", "target": "x86_64-avx2", "threads": 1, "runs_ms": [edgec_ms] * 20}
    rep = make_report(raw, device=dev, before=calm, after=calm, ort={"version": "1.x", "runs_ms": [ort_ms] * 20})
    text = _rendered(rep)
    assert expect in text, text
    assert "edgec is 0." not in text and "edgec is 1.19x" not in text
    other = make_report({**raw, "runs_ms": [edgec_ms * 1.5] * 20}, device=device_from_profile("pi", "pi4", host="x"),
                        before=calm, after=calm)
    table = _rendered({}, compare_table([other, rep], {}))
    assert "time vs fastest" in table and "fastest" in table.split("here", 1)[1] and "1.50x its time" in table


def test_profile_chosen_from_a_probed_pi4():
    from edgec.devices.probe import choose_profile
    from edgec.errors import EdgecError

    info = parse_cpuinfo(PI4_CPUINFO)
    rec = {"device": "b", "arch": "aarch64", "cpu": info["cpu"], "cpu_part": info["cpu_part"],
           "features": info["features"], "userland_bits": 64}
    assert choose_profile(rec)[0] == "pi4"
    assert choose_profile({**rec, "userland_bits": 32})[0] == "pi-armv7"  # 64-bit kernel, 32-bit OS
    assert choose_profile({**rec, "cpu_part": "0xd4f"})[0] == "pi4"     # unknown ARMv8.0 core: closest
    assert choose_profile({**rec, "cpu_part": "0xd4f", "features": info["features"] + ["asimddp", "asimdhp"]})[0] == "pi5"
    x86 = {**rec, "arch": "x86_64", "cpu_part": None, "features": ["sse4_2", "avx2", "fma"]}
    assert choose_profile(x86)[0] == "x86-avx2"
    assert choose_profile({**x86, "features": x86["features"] + ["avx_vnni"]})[0] == "x86-avxvnni"  # N100-class
    assert choose_profile({**x86, "features": x86["features"] + ["avx_vnni", "avx512f"]})[0] == "x86-avx2"
    with pytest.raises(EdgecError, match="no built-in profile fits b: x86_64"):
        choose_profile({**rec, "arch": "x86_64", "cpu_part": None, "features": ["sse4_2"]})
