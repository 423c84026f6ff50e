"""The GSPC scaling set (gspc.md): grouped 3x3 layers at S, G(2), G(4), G(8), G(16), G(N),
compiled by edgec vs onnxruntime on the same models in the same run.

    python benchmarks/bench_gspc.py                 # ResNet34 + MobileNetV2 subset, a few minutes
    python benchmarks/bench_gspc.py --full          # every layer shape of WRN-40-2, ResNet34, MobileNetV2
    python benchmarks/bench_gspc.py --threads 1,2 --runs 50 --depth 4 --md
    python benchmarks/bench_gspc.py --shape 128:28:1 --shape 64:56:1   # chosen shapes only
    python benchmarks/bench_gspc.py --shape 128:28:1 --variants auto,conv=direct+gspc=tile,conv=winograd-f23
        # each grouped g compiled under each forced path (EDGEC_CONV / EDGEC_GSPC fields), CPU time per run
    python benchmarks/bench_gspc.py --shape 128:28:1 --engines edgec,onnxruntime,ncnn,mnn --threads 1
        # the same stacks on other engines (benchmarks/engines.py), outputs held against onnxruntime's
    python benchmarks/bench_gspc.py --full --threads 1 --engines edgec,onnxruntime,ncnn,mnn --cpu --md
        # every shape, CPU ms per inference of each engine, and the bars per shape

Each model is `depth` stacked (grouped 3x3 conv C->C + ReLU) layers (1 for strided shapes).
Per g it prints the median ms of edgec and onnxruntime, their ratio, and edgec's time against
the MAC-proportional expectation time(S) x MACs(G)/MACs(S). The bars (gspc.md): every G(g)
faster than S, time falling as g grows.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import median, time_edgec, time_onnxruntime  # noqa: E402

from edgec.codegen import build_project, compile_model  # noqa: E402
from edgec.codegen.options import CompileOptions  # noqa: E402

# (channels, input H=W, stride) x count, from gspc.md
SCALING = {
    "WRN-40-2": [(16, 32, 1, 1), (32, 32, 1, 11), (32, 32, 2, 1), (64, 16, 1, 11), (64, 16, 2, 1), (128, 8, 1, 11)],
    "ResNet34": [(64, 56, 1, 6), (64, 56, 2, 1), (128, 28, 1, 7), (128, 28, 2, 1), (256, 14, 1, 11), (256, 14, 2, 1),
                 (512, 7, 1, 5)],
    "MobileNetV2": [(32, 112, 1, 1), (96, 112, 2, 1), (144, 56, 1, 1), (144, 56, 2, 1), (192, 28, 1, 2),
                    (192, 28, 2, 1), (384, 14, 1, 4), (576, 14, 1, 2), (576, 14, 2, 1), (960, 7, 1, 3)],
}
SUBSET = {"ResNet34": [(128, 28, 1, 7), (256, 14, 1, 11)], "MobileNetV2": [(192, 28, 1, 2), (960, 7, 1, 3)]}


def stack_model(path: Path, c: int, h: int, stride: int, g: int, depth: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i in range(depth):
        w = (rng.standard_normal((c, c // g, 3, 3)) / np.sqrt(9 * c // g)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(np.zeros(c, np.float32), f"b{i}")]
        nodes += [helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], group=g, pads=[1, 1, 1, 1],
                                   strides=[stride, stride], name=f"conv{i}"),
                  helper.make_node("Relu", [f"c{i}"], [f"y{i}"], name=f"relu{i}")]
        x = f"y{i}"
    ho = (h - 1) // stride + 1
    hs = [h] + [ho] * depth
    for i in range(1, depth):
        hs[i + 1] = (hs[i] - 1) // stride + 1
    graph = helper.make_graph(nodes, "stack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, c, hs[-1], hs[-1]])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def macs(c: int, h: int, stride: int, g: int, depth: int) -> int:
    ho = (h - 1) // stride + 1
    return depth * c * (c // g) * 9 * ho * ho


def bench_shape(c, h, stride, depth, threads_list, runs, warmup, target, tmp: Path) -> list[dict]:
    rows = []
    for g in sorted({1, 2, 4, 8, 16, c}):  # G(16) is G(N) when c == 16
        path = stack_model(tmp / f"m{c}_{h}_{stride}_{g}.onnx", c, h, stride, g, depth)
        b = compile_model(path, tmp / f"p{c}_{h}_{stride}_{g}", target=target, threads=max(threads_list))
        bench = build_project(b.dir, target, jobs=2)["bench"]
        feeds = {"x": np.random.default_rng(1).standard_normal((1, c, h, h)).astype(np.float32)}
        algo = b.layers[0]["algo"]
        for t in threads_list:
            e = median(time_edgec(bench, t, runs, warmup)["runs_ms"])
            o = median(time_onnxruntime(path, feeds, t, runs, warmup))
            rows.append(dict(c=c, h=h, stride=stride, depth=depth, g=g, threads=t, algo=algo, edgec_ms=e,
                             ort_ms=o, ratio=e / o, macs=macs(c, h, stride, g, depth)))
    for t in threads_list:
        rs = [r for r in rows if r["threads"] == t]
        s = rs[0]
        for r in rs:
            r["expected_ms"] = s["edgec_ms"] * r["macs"] / s["macs"]
            r["vs_expected"] = r["edgec_ms"] / r["expected_ms"]
        grouped = [r["edgec_ms"] for r in rs[1:]]
        for r in rs:
            r["all_g_below_s"] = all(x < s["edgec_ms"] for x in grouped)
            r["monotonic"] = all(a >= b for a, b in zip(grouped, grouped[1:]))
    return rows


def cpu_ms_per_run(bench: Path, runs: int, warmup: int) -> tuple[float, float]:
    """(median CPU ms, median wall ms) per inference of the bench program on 1 thread: its own per-run process CPU
    time (runs_cpu_ms), which moves less than wall time on a shared host. The child's user+sys over runs+1
    inferences minus one inference's, used before, came out negative on some layers of 4-layer stacks (Zen 5):
    the one-run baseline's start-up varied by more than the runs' whole time."""
    out = subprocess.run([str(bench), "--runs", str(runs), "--warmup", str(warmup), "--threads", "1"],
                         capture_output=True, text=True, check=True).stdout
    rep = json.loads(out)
    return median(rep["runs_cpu_ms"]), median(rep["runs_ms"])


def bench_variants(c, h, stride, depth, variants, runs, warmup, target, tmp: Path,
                   groups=(2, 4, 8, 16)) -> list[dict]:
    """Each grouped g (1 < g < c) compiled under each variant ("auto" or field=value+field=value of
    CompileOptions, e.g. conv=winograd-f23, conv=direct+gspc=tile), timed in two alternating rounds
    (best of the two kept), beside onnxruntime."""
    rows = []
    for g in [g for g in groups if g < c]:
        path = stack_model(tmp / f"v{c}_{h}_{stride}_{g}.onnx", c, h, stride, g, depth)
        builds = []
        for v in variants:
            fields = dict(kv.split("=", 1) for kv in v.split("+")) if v != "auto" else {}
            opts = CompileOptions.from_env(target=target, threads=1, **fields)
            b = compile_model(path, tmp / f"v{c}_{h}_{stride}_{g}_{len(builds)}", options=opts)
            builds.append((v, b.layers[0]["algo"], build_project(b.dir, target, jobs=2)["bench"]))
        best = {}
        for _ in range(2):
            for v, algo, bench in builds:
                cpu, wall = cpu_ms_per_run(bench, runs, warmup)
                old = best.get(v)
                best[v] = (min(cpu, old[0]), min(wall, old[1])) if old else (cpu, wall)
        feeds = {"x": np.random.default_rng(1).standard_normal((1, c, h, h)).astype(np.float32)}
        o = median(time_onnxruntime(path, feeds, 1, runs, warmup))
        fastest = min(b[0] for b in best.values())
        for v, algo, _ in builds:
            rows.append(dict(c=c, h=h, stride=stride, depth=depth, g=g, variant=v, algo=algo, cpu_ms=best[v][0],
                             wall_ms=best[v][1], ort_ms=o, vs_fastest=best[v][0] / fastest))
    return rows


def _cpu_round(name: str, runner, work: Path, runs: int, warmup: int) -> float:
    """CPU ms per inference of one round on 1 thread: edgec's bench program through cpu_ms_per_run, the in-process
    engines (onnxruntime, ncnn, MNN, OpenVINO) as this process's CPU time over `runs` steps after the warm-up."""
    import time
    if name == "edgec":
        return cpu_ms_per_run(work / "edgec" / "bench", runs, warmup)[0]
    for _ in range(warmup):
        runner.step()
    t0 = time.process_time()
    for _ in range(runs):
        runner.step()
    return (time.process_time() - t0) / runs * 1e3


def _edgec_algo(work: Path) -> str:
    """The first Conv's algo in the generated model.c's layer table"""
    import re
    m = re.search(r'"Conv", "([^"]+)"', (work / "edgec" / "model.c").read_text())
    return m.group(1) if m else "?"


def bench_engines(c, h, stride, depth, names, threads, runs, warmup, target, tmp: Path,
                  groups=(2, 4, 8, 16), cpu: bool = False) -> list[dict]:
    """Each g's stack on each engine (benchmarks/engines.py; a missing one is skipped with its reason), in
    interleaved rounds (median of each engine's runs over them), outputs checked against onnxruntime's. With
    cpu (1 thread only), each round's CPU ms per inference instead, median of the rounds: on a shared host
    the wall time of one process moves with the others' load, its CPU time much less."""
    from engines import ENGINES, EngineError, check, time_interleaved

    engines = []
    for n in names:
        e = ENGINES[n](target=target) if n == "edgec" else ENGINES[n]()
        why = e.missing()
        if why:
            print(f"skipped {n}: {why}", flush=True)
        else:
            engines.append(e)
    rows = []
    for g in sorted({1, c, *(g for g in groups if g < c)}):
        path = stack_model(tmp / f"e{c}_{h}_{stride}_{g}.onnx", c, h, stride, g, depth)
        feeds = {"x": np.random.default_rng(1).standard_normal((1, c, h, h)).astype(np.float32)}
        want = [v for v in __import__("onnxruntime").InferenceSession(str(path)).run(None, feeds)]
        runners = {}
        for e in engines:
            try:
                r = e.prepare(path, feeds, threads, tmp / f"w{c}_{h}_{stride}_{g}_{e.name}")
            except EngineError as err:
                print(f"{e.name} {c}ch {h}x{h} stride {stride} g={g}: {err}", flush=True)
                continue
            ok = check(r.outputs(), want, 1e-3)
            if not ok["ok"]:
                print(f"{e.name} {c}ch {h}x{h} stride {stride} g={g}: {ok['why']} (left out)", flush=True)
                continue
            runners[e.name] = (r, ok["max_abs"])
        times: dict[str, list[float]] = {n: [] for n in runners}
        if cpu and runners:  # at least ~30 ms of inferences a round: the bench program's start-up CPU cancels
            est = min(median(r.time(3, 1)) for r, _ in runners.values())
            n_cpu = min(2000, max(max(1, runs // 3), int(30 / max(est, 1e-3))))
            for _ in range(3):
                for n, (r, _) in runners.items():
                    times[n].append(_cpu_round(n, r, tmp / f"w{c}_{h}_{stride}_{g}_{n}", n_cpu, warmup))
        elif runners:
            # rotating order, warm-up and a pause between engines (time_interleaved): on several threads an
            # in-process engine's workers spin on after its runs, and whichever engine runs next shares the cores
            times = time_interleaved({n: r for n, (r, _) in runners.items()}, runs, 3, warmup)[0]
        for n, (_, err) in runners.items():
            algo = _edgec_algo(tmp / f"w{c}_{h}_{stride}_{g}_{n}") if n == "edgec" else ""
            rows.append(dict(c=c, h=h, stride=stride, depth=depth, g=g, engine=n, ms=median(times[n]), max_abs=err,
                             algo=algo, cpu=cpu))
    return rows


def print_engines(rows: list[dict]) -> None:
    """One row per g (edgec's algo, each engine's ms, the fastest, edgec / the fastest other), then the bars for
    edgec: every G(g) below S, time falling as g grows (S, G(2) .. G(16), N), fastest at every grouped g."""
    names = list(dict.fromkeys(r["engine"] for r in rows))
    unit = "CPU ms" if rows and rows[0].get("cpu") else "ms"
    head = ["layer", "g", "edgec algo", *(f"{n} {unit}" for n in names), "fastest", "edgec / best other"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    mine, fastest = [], []
    for key in dict.fromkeys((r["c"], r["h"], r["stride"], r["depth"], r["g"]) for r in rows):
        c, h, stride, depth, g = key
        rs = [r for r in rows if (r["c"], r["h"], r["stride"], r["depth"], r["g"]) == key]
        by = {r["engine"]: r["ms"] for r in rs}
        algo = next((r["algo"] for r in rs if r["engine"] == "edgec"), "-")
        gs = "S" if g == 1 else ("N" if g == c else str(g))
        cells = [f"{by[n]:.3f}" if n in by else "-" for n in names]
        others = [v for n, v in by.items() if n != "edgec"]
        rel = f"{by['edgec'] / min(others):.2f}" if "edgec" in by and others else "-"
        print(f"| {c}x{h}s{stride}x{depth} | {gs} | {algo} | " + " | ".join(cells) + f" | {min(by, key=by.get)} | {rel} |")
        if "edgec" in by:
            mine.append((g, by["edgec"]))
            if 1 < g < c:
                fastest.append(min(by, key=by.get) == "edgec")
    if mine and mine[0][0] == 1:
        grouped = [v for _, v in mine[1:]]
        below = all(v < mine[0][1] for v in grouped)
        falls = all(a >= b for a, b in zip(grouped, grouped[1:]))
        print(f"edgec: every G(g) < S: {'yes' if below else 'NO'}; time falls as g grows: {'yes' if falls else 'NO'}; "
              f"fastest engine at {sum(fastest)} of {len(fastest)} grouped g")


def print_variants(rows: list[dict]) -> None:
    head = ["layer", "g", "variant", "algo", "edgec CPU ms", "wall ms", "ort ms", "CPU/fastest"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        print(f"| {r['c']}x{r['h']}s{r['stride']}x{r['depth']} | {r['g']} | {r['variant']} | {r['algo']} | "
              f"{r['cpu_ms']:.3f} | {r['wall_ms']:.3f} | {r['ort_ms']:.3f} | {r['vs_fastest']:.2f} |")


def print_rows(rows: list[dict], md: bool) -> None:
    head = ["layer", "thr", "g", "algo", "edgec ms", "ort ms", "edgec/ort", "expected ms", "meas/exp"]
    if md:
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    else:
        print(f"{'layer':<14}{'thr':>4}{'g':>5}  {'algo':<20}{'edgec':>9}{'ort':>9}{'e/o':>7}{'expect':>9}{'m/e':>7}")
    for r in rows:
        layer = f"{r['c']}x{r['h']}s{r['stride']}x{r['depth']}"
        g = "S" if r["g"] == 1 else ("N" if r["g"] == r["c"] else str(r["g"]))
        vals = [layer, str(r["threads"]), g, r["algo"], f"{r['edgec_ms']:.3f}", f"{r['ort_ms']:.3f}",
                f"{r['ratio']:.2f}", f"{r['expected_ms']:.3f}", f"{r['vs_expected']:.2f}"]
        if md:
            print("| " + " | ".join(vals) + " |")
        else:
            print(f"{vals[0]:<14}{vals[1]:>4}{vals[2]:>5}  {vals[3]:<20}{vals[4]:>9}{vals[5]:>9}{vals[6]:>7}"
                  f"{vals[7]:>9}{vals[8]:>7}")
        if r["g"] == r["c"]:
            ok = "yes" if r["all_g_below_s"] else "NO"
            mono = "yes" if r["monotonic"] else "NO"
            print(f"{'':<14}every G(g) < S: {ok}; time falls as g grows: {mono}" + ("  |" if md else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="every layer shape of the three networks")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--depth", type=int, default=4, help="stacked layers per model (strided shapes use 1)")
    ap.add_argument("--target", default="native")
    ap.add_argument("--md", action="store_true", help="markdown table")
    ap.add_argument("--shape", action="append", default=[], metavar="C:H:S",
                    help="only this layer shape (repeatable), e.g. 128:28:1")
    ap.add_argument("--json", type=Path, help="also write every row to this file")
    ap.add_argument("--variants", help="comma-separated forced paths per grouped g (1 thread, CPU time): "
                                       "auto or field=value[+field=value], e.g. conv=winograd-f43")
    ap.add_argument("--groups", default="2,4,8,16", help="grouped g timed by --variants / --engines")
    ap.add_argument("--engines", help="comma-separated engines of benchmarks/engines.py (edgec, onnxruntime, ncnn, "
                                      "mnn, openvino): wall ms per run on the first --threads count")
    ap.add_argument("--cpu", action="store_true", help="with --engines and 1 thread: CPU ms per inference of each "
                                                         "engine (median of 3 rounds) instead of wall ms")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    sets = SCALING if a.full else SUBSET
    if a.shape:
        sets = {"selected": [tuple(int(v) for v in sh.split(":")) + (1,) for sh in a.shape]}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for net, shapes in sets.items():
            for c, h, s, _count in shapes:
                depth = a.depth if s == 1 else 1
                if a.engines:
                    rs = bench_engines(c, h, s, depth, a.engines.split(","), threads[0], a.runs, a.warmup,
                                       a.target, Path(tmp), [int(v) for v in a.groups.split(",")],
                                       cpu=a.cpu and threads[0] == 1)
                    print(f"# {net} {c}ch {h}x{h} stride {s}: engines, {threads[0]} thread(s); load "
                          f"{open('/proc/loadavg').read().split()[0]}", flush=True)
                    print_engines(rs)
                    rows += rs
                    continue
                if a.variants:
                    rs = bench_variants(c, h, s, depth, a.variants.split(","), a.runs, a.warmup, a.target,
                                        Path(tmp), [int(v) for v in a.groups.split(",")])
                    print(f"# {net} {c}ch {h}x{h} stride {s}: forced paths", flush=True)
                    print_variants(rs)
                    rows += rs
                    continue
                rs = bench_shape(c, h, s, depth, threads, a.runs, a.warmup, a.target, Path(tmp))
                print(f"# {net} {c}ch {h}x{h} stride {s}", flush=True)
                print_rows(sorted(rs, key=lambda r: (r["threads"], r["g"])), a.md)
                rows += rs
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
