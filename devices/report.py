"""Benchmark statistics, trust warnings and their rendering.

make_report() turns the bench program's JSON (see the codegen contract) plus the
board's state before/after into one flat dict with stable keys (what --json
prints); render() and compare_table() draw it with rich.
"""

from __future__ import annotations

import numpy as np
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from edgec.devices.inventory import Device
from edgec.devices.probe import describe_governor

COV_LIMIT_PCT = 5.0
OFF_CPU_LIMIT_PCT = 10.0  # a 1-thread run's wall time above its CPU time by more than this: others ran
TOP_LAYERS = 8


def stats(times_ms: list[float]) -> dict:
    a = np.asarray(times_ms, dtype=np.float64)
    if a.size == 0:
        return {}
    mean = float(a.mean())
    std = float(a.std(ddof=1)) if a.size > 1 else 0.0
    return {
        "runs": int(a.size), "mean_ms": mean, "median_ms": float(np.median(a)),
        "p90_ms": float(np.percentile(a, 90)), "p99_ms": float(np.percentile(a, 99)),
        "min_ms": float(a.min()), "max_ms": float(a.max()), "std_ms": std,
        "cov_pct": 100.0 * std / mean if mean > 0 else 0.0,
        "throughput_ips": 1000.0 / mean if mean > 0 else 0.0,
    }


def top_layers(layers: list[dict], n: int = TOP_LAYERS) -> list[dict]:
    """Slowest layers with their share of time next to their share of MACs."""
    total_ms = sum(l.get("ms", 0.0) for l in layers) or 1.0
    total_macs = sum(l.get("macs", 0) for l in layers) or 1
    rows = [{"name": l.get("name", "?"), "op": l.get("op", "?"), "algo": l.get("algo", ""),
             "macs": int(l.get("macs", 0)), "ms": float(l.get("ms", 0.0)),
             "time_pct": 100.0 * l.get("ms", 0.0) / total_ms,
             "mac_pct": 100.0 * l.get("macs", 0) / total_macs} for l in layers]
    return sorted(rows, key=lambda r: -r["ms"])[:n]


def make_report(raw: dict, *, device: Device, before: dict, after: dict, binary_bytes: int = 0, warmup: int = 0,
                ort: dict | None = None, mode: str = "", build_info: dict | None = None) -> dict:
    rep = {"device": device.name, "profile": device.profile, "address": device.address,
           "emulated": device.emulated, "build": mode, "model": raw.get("model"), "target": raw.get("target"),
           "threads": raw.get("threads"), "warmup": warmup,
           "init_ms": raw.get("init_ms"), "first_ms": raw.get("first_ms"),
           "peak_rss_kb": raw.get("peak_rss_kb"), "binary_bytes": binary_bytes,
           "weights_bytes": raw.get("weights_bytes"), "arena_bytes": raw.get("arena_bytes"),
           "runs_ms": list(raw.get("runs_ms", []))}
    rep.update(stats(rep["runs_ms"]))
    # what the bench program did and saw (older builds print none of these): the warm-up it ran (at least
    # --warmup runs and --warmup-ms), the process's CPU time per timed run, its involuntary context switches
    rep["warmup_runs"], rep["warmup_ms"] = raw.get("warmup_runs", warmup), raw.get("warmup_ms")
    rep["runs_cpu_ms"] = list(raw.get("runs_cpu_ms", []))
    rep["cpu_median_ms"] = float(np.median(rep["runs_cpu_ms"])) if rep["runs_cpu_ms"] else None
    rep["timed_nivcsw"] = raw.get("timed_nivcsw")
    rep["layers"] = top_layers(raw.get("layers") or [])
    tuned = {l.get("name"): l["details"]["tuned"] for l in (build_info or {}).get("layers", [])
             if l.get("details", {}).get("tuned")}
    for l in rep["layers"]:  # a layer built from a tuning record says where it was measured
        if l["name"] in tuned:
            l["tuned"] = tuned[l["name"]]
    rep["state_before"], rep["state_after"] = before, after
    rep["onnxruntime"] = None
    if ort is not None:
        rep["onnxruntime"] = ort if "skipped" in ort else {"version": ort.get("version"), "inputs": ort.get("inputs"),
                                                           "init_ms": ort.get("init_ms"), **stats(ort["runs_ms"])}
        if "median_ms" in rep["onnxruntime"] and rep.get("median_ms"):
            rep["onnxruntime"]["speedup"] = rep["onnxruntime"]["median_ms"] / rep["median_ms"]
    rep["warnings"] = trust_warnings(rep, device)
    return rep


def trust_warnings(rep: dict, device: Device) -> list[str]:
    """Reasons not to trust the numbers, each with what to do about it."""
    w = []
    if device.emulated:
        w.append(f"EMULATED device: times are emulator times ({' '.join(device.exec_wrapper)}), not "
                 f"{device.profile} performance; run on the real board for numbers")
    if rep.get("cov_pct", 0) > COV_LIMIT_PCT:
        w.append(f"run-to-run variation is {rep['cov_pct']:.1f}% (> {COV_LIMIT_PCT:g}%): close other programs, "
                 f"set the performance governor, and use more --runs")
    b, a = rep["state_before"], rep["state_after"]
    for s, when in ((b, "before"), (a, "after")):
        if s.get("throttled") and s["throttled"] not in ("0x0", "0"):
            w.append(f"board reported throttling {s['throttled']} {when} the runs (under-voltage or heat): "
                     f"results are low; fix the power supply/cooling and rerun")
            break
    cores = b.get("cores") or device.cores or 1
    if b.get("loadavg_1m") is not None and b["loadavg_1m"] > max(0.5, 0.25 * cores):
        w.append(f"load average was {b['loadavg_1m']:.2f} on {cores} core(s) before the runs: another process "
                 f"is using the CPU; stop it and rerun")
    if b.get("governor") and b["governor"] != "performance":
        w.append(f"CPU governor is {b['governor']}: clocks may ramp during the runs; set it to performance")
    if b.get("freq_mhz") and a.get("freq_mhz") and a["freq_mhz"] < 0.9 * b["freq_mhz"]:
        w.append(f"CPU clock fell from {b['freq_mhz']} to {a['freq_mhz']} MHz during the runs (thermal or "
                 f"power limit): add cooling, rerun")
    if b.get("temp_c") and a.get("temp_c") and a["temp_c"] >= 80:
        w.append(f"temperature reached {a['temp_c']} C: the board is likely throttling")
    cpu, wall = rep.get("cpu_median_ms"), rep.get("median_ms")
    if rep.get("threads") == 1 and cpu and wall and wall > cpu * (1 + OFF_CPU_LIMIT_PCT / 100):
        w.append(f"the process was off the CPU for {100 * (1 - cpu / wall):.0f}% of the median run (wall "
                 f"{wall:.3g} ms, CPU time {cpu:.3g} ms): other programs ran in between; stop them and rerun")
    if rep.get("runs", 0) < 10:
        w.append(f"only {rep.get('runs', 0)} runs: percentiles are rough; use --runs 50 or more")
    return w


def _ms(v) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if v < 10 else f"{v:.1f}"


def _bytes(n) -> str:
    if not n:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _state(s: dict) -> str:
    parts = [describe_governor(s)] if s.get("governor") or s.get("freq_mhz") else []
    if s.get("temp_c") is not None:
        parts.append(f"{s['temp_c']} C")
    if s.get("throttled"):
        parts.append(f"throttled={s['throttled']}")
    if s.get("loadavg_1m") is not None:
        parts.append(f"load {s['loadavg_1m']:.2f}")
    return ", ".join(parts) or "unknown"


def compare_speed(a_ms, b_ms, a: str = "edgec", b: str = "onnxruntime") -> str:
    """Which of two timings is faster and by how much, in words a bare ratio would leave open."""
    if not a_ms or not b_ms:
        return f"no {a} time to compare" if not a_ms else f"no {b} time to compare"
    if f"{max(a_ms, b_ms) / min(a_ms, b_ms):.2f}" == "1.00":
        return f"{a} and {b} take the same time (within 0.5%)"
    if a_ms < b_ms:
        return f"{a} is {b_ms / a_ms:.2f}x faster than {b}"
    return f"{a} takes {a_ms / b_ms:.2f}x {b}'s time ({b} is faster)"


def render(rep: dict, console: Console) -> None:
    title = f"{rep['model']} on {rep['device']} ({rep['profile']}, {rep['target']}, {rep['threads']} thread(s))"
    if rep["emulated"]:
        title += " [EMULATED: emulator times]"
    t = Table(title=escape(title), show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    warm = f"+{rep.get('warmup_runs', rep['warmup'])} warm-up" + (
        f" in {_ms(rep['warmup_ms'])} ms" if rep.get("warmup_ms") is not None else "")
    rows = [("init", f"{_ms(rep['init_ms'])} ms"), ("first inference", f"{_ms(rep['first_ms'])} ms"),
            ("median / mean (wall clock)", f"{_ms(rep.get('median_ms'))} / {_ms(rep.get('mean_ms'))} ms"),
            ("p90 / p99", f"{_ms(rep.get('p90_ms'))} / {_ms(rep.get('p99_ms'))} ms"),
            ("min / max / std", f"{_ms(rep.get('min_ms'))} / {_ms(rep.get('max_ms'))} / {_ms(rep.get('std_ms'))} ms"),
            ("variation (CoV)", f"{rep.get('cov_pct', 0):.1f}% over {rep.get('runs', 0)} runs ({warm})"),
            ("throughput", f"{rep.get('throughput_ips', 0):.1f} inferences/s"),
            *([("CPU time median", f"{_ms(rep['cpu_median_ms'])} ms (the process's, all threads)")]
              if rep.get("cpu_median_ms") is not None else []),
            ("peak RSS", _bytes((rep.get("peak_rss_kb") or 0) * 1024)),
            ("binary / weights / arena", f"{_bytes(rep['binary_bytes'])} / {_bytes(rep['weights_bytes'])} / "
                                         f"{_bytes(rep['arena_bytes'])}"),
            ("device before", _state(rep["state_before"])), ("device after", _state(rep["state_after"]))]
    ort = rep.get("onnxruntime")
    if ort:
        rows.append(("onnxruntime", ort["skipped"] if "skipped" in ort else
                     f"{_ms(ort['median_ms'])} ms median (v{ort.get('version')}): "
                     + compare_speed(rep.get("median_ms"), ort.get("median_ms"))))
    for k, v in rows:
        t.add_row(k, Text(str(v)))  # board and model text is data, not markup
    parts = [t]
    if rep["layers"]:
        parts.append(_layers_table(rep["layers"]))
    for w in rep["warnings"]:
        parts.append(Text(f"warning: {w}", style="yellow"))
    console.print(Group(*parts))


def _layers_table(layers: list[dict]) -> Table:
    t = Table(title="slowest layers (time share vs MAC share: far apart = a kernel worth a look)",
              title_justify="left")
    for col in ("layer", "op", "algo", "ms", "time %", "MAC %"):
        t.add_column(col, justify="right" if col in ("ms", "time %", "MAC %") else "left")
    for l in layers:
        algo = l["algo"] + (f" ({l['tuned'].split(':', 1)[0]})" if l.get("tuned") else "")
        t.add_row(Text(_layer_name(l["name"])), Text(l["op"]), Text(algo), _ms(l["ms"]), f"{l['time_pct']:.1f}",
                  f"{l['mac_pct']:.1f}")
    return t


TAGS = (("EMULATED", "emulated"), ("variation", "noisy"), ("throttling", "throttled"), ("load average", "busy"),
        ("CPU governor is", "governor"), ("clock fell", "clock drop"), ("temperature", "hot"),
        ("off the CPU", "shared"), ("percentiles are rough", "few runs"))


def warning_tags(warnings: list[str]) -> list[str]:
    return [tag for key, tag in TAGS if any(key in w for w in warnings)]


def _layer_name(name: str) -> str:
    """'Conv_3, BatchNormalization_2, Relu_1' -> 'Conv_3 (+2 fused)'."""
    parts = [p for p in name.split(", ") if p]
    head = (parts[0] if parts else name)[:32]
    return head + (f" (+{len(parts) - 1} fused)" if len(parts) > 1 else "")


def compare_table(reports: list[dict], errors: dict[str, str]) -> Table:
    """One row per device, fastest first; failed devices at the end (their errors are printed below)."""
    t = Table(title="comparison (median of the timed runs)", title_justify="left")
    for col in ("device", "target", "median ms", "p90 ms", "CoV %", "inf/s", "time vs fastest", "notes"):
        left = col in ("device", "target", "notes")
        t.add_column(col, justify="left" if left else "right", no_wrap=not left,
                     min_width=16 if col == "notes" else None)
    ok = sorted(reports, key=lambda r: r.get("median_ms") or float("inf"))
    best = ok[0].get("median_ms") if ok else None
    for r in ok:
        rel = "-" if not best or not r.get("median_ms") else (
            "fastest" if r is ok[0] else f"{r['median_ms'] / best:.2f}x its time")
        t.add_row(Text(r["device"]), Text(r["target"] or "-"), _ms(r.get("median_ms")), _ms(r.get("p90_ms")),
                  f"{r.get('cov_pct', 0):.1f}", f"{r.get('throughput_ips', 0):.0f}", rel,
                  ", ".join(warning_tags(r["warnings"])) or "ok")
    for name in errors:
        t.add_row(Text(name), "-", "-", "-", "-", "-", "-", Text("failed", style="red"))
    return t
