"""int8 and fp16 in edgec's compiled C vs edgec fp32 and onnxruntime fp32 / int8, same run, same
thread count, median of --runs runs after warm-up (not a timed test).

Test models: the digits CNN (batch 1) and ppocr cls (1x3x48x192); on request (--models) SqueezeNet 1.1 and
ResNet-50 (1x3x224x224) from the onnx zoo with random variance-preserving weights as in bench_models.py,
calibrated on 4 random inputs (speed only: their outputs mean nothing, the oracle check still holds). int8 = onnxruntime
quantize_static QDQ, per-channel int8 weights, uint8 activations (ppocr: BN folded by onnxruntime's
pre-processing, opset 13); "7-bit" = the same with reduce_range (weights within +-64, what
`edgec optimize --target` picks for AVX2 without VNNI: edgec then runs its vpmaddubsw kernels). fp16 = edgec.optimizer's fp16 conversion (weights stored as fp16 in the
compiled model, fp32 arithmetic). Both builds are for native, the best target
this CPU has (x86_64-avx512-amx on AMX Xeons); `--target T` builds fp32 and int8 for T instead (a target this CPU
runs: x86_64-avx512-vnni on an AMX host, x86_64-avx2-vnni or x86_64-avx2 on an AVX-512 host, as a stand-in for a
core without them).

Accuracy (second table) is measured against the exact QDQ arithmetic of the int8 model (edgec verify's
int8 oracle: onnxruntime with graph optimizations off), the same on every CPU: max error of edgec's
int8 output in output LSB, argmax agreement, and top-1 on the digits test set (360 images; ppocr: one
random input, no labels). onnxruntime's own optimized int8 run is shown beside it, labelled as such:
its integer kernels differ between CPUs (u8 x s8 saturation on x86 without VNNI).

Other engines' int8 on the same QDQ models (third table; `--engines openvino,mnn`, the `bench` extra): each
engine's output is first held against the exact QDQ result (max error in output LSB, top-1 agreement; an engine
whose top-1 differs or that is more than --engine-lsb LSB off is reported and not timed), then timed as in
bench_models.py: --runs runs after warm-up, same thread count, in --engine-rounds rounds interleaved with edgec's
int8 build (each in turn, the order rotating); the table gives medians, the fastest runs (which a loaded host
disturbs least) and edgec's time over the engine's round by round, of the rounds' medians and of their fastest
runs (a slow spell of the host, which lasts ~0.1-1 s, can cover one engine's share of a round; its fastest run is
what such a spell moves least). At one thread on a host whose cores run at different speeds, pin the run to one
core (`taskset -c 0 python benchmarks/bench_int8.py ...`): edgec's bench process and the engines in this process
may otherwise sit on different cores. OpenVINO reads the QDQ ONNX model
and runs it in int8 (its CPU plugin turns the Q/DQ pairs into u8 x i8 convolutions; the table counts the
convolutions whose runtime precision is u8/i8, so a silently dequantized run shows). MNN is tried through
MNNConvert; a converter that cannot take the QDQ model is reported with its error.

    python benchmarks/bench_int8.py [--runs 50] [--threads 1] [--models digits,ppocr] [--engines openvino,mnn]
    python benchmarks/bench_int8.py --micro   # q8 GEMM microbenchmark: vpmaddwd vs vpmaddubsw kernels
    python benchmarks/bench_int8.py --models ppocr --rounds 15 --runs 200   # edgec builds interleaved

--rounds N measures only edgec's own builds (fp32, 8-bit int8, 7-bit int8 of each model), built once and run
one after the other in each of N rounds, the order reversed every other round, so a change in the host's load
reaches all of them alike. Each round takes the median of the bench program's per-run CPU time (--runs runs
after warm-up; with one thread that leaves out the time others ran; with more, wall-clock time, as CPU time would
count the pool's spinning) per build; the table gives each build's
median and fastest round and the per-round fp32 / int8 ratio's median, spread (min-max) and quartiles, with
the load average seen at the start of the rounds.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import onnx

from common import check_target, median, quantize_qdq, time_edgec, time_onnxruntime
from edgec import zoo
from edgec.codegen.project import compile_model
from edgec.codegen.targets import get_target
from edgec.codegen.verifier import exact_outputs, onnxruntime_outputs, output_steps, run_binary


def models(work: Path, which: list[str]) -> dict:
    """name -> (fp32 path, int8 path, 7-bit int8 path, fp16 path, input name, input array, eval inputs,
    eval labels or None)."""
    from edgec.optimizer.fp16 import convert
    from onnxruntime.quantization.shape_inference import quant_pre_process

    out, evals = {}, {}
    rng = np.random.default_rng(0)
    if "digits" in which:
        d = zoo.digits_cnn()
        x = np.load(d.data)["input"]
        cal = [x[i:i + 1] for i in range(64)]
        q, q7 = (quantize_qdq(d.model, work / f"digits_int8{t}.onnx", "input", cal, t == "_7bit")
                 for t in ("", "_7bit"))
        out["digits"] = (d.model, q, q7, "input", x[:1])
        evals["digits"] = (x, np.load(d.data)["labels"])
    if "ppocr" in which:
        p = zoo.ppocr_cls()
        quant_pre_process(str(p), str(work / "pre.onnx"), skip_symbolic_shape=True)
        f32 = work / "ppocr_fp32.onnx"
        onnx.save(onnx.version_converter.convert_version(onnx.load(str(work / "pre.onnx")), 13), str(f32))
        cal = [rng.uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32) for _ in range(8)]
        q, q7 = (quantize_qdq(f32, work / f"ppocr_int8{t}.onnx", "x", cal, t == "_7bit") for t in ("", "_7bit"))
        out["ppocr"] = (f32, q, q7, "x", rng.uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32))
        evals["ppocr"] = (out["ppocr"][4], None)
    for name in ("squeezenet", "resnet50"):
        if name not in which:
            continue
        from bench_models import engine_model  # randomized weights: needs pytest (the test extra)
        path, _ = engine_model(name, work)
        quant_pre_process(str(path), str(work / f"{name}_pre.onnx"), skip_symbolic_shape=True)
        f32 = work / f"{name}_pre.onnx"
        iname = onnx.load(str(f32)).graph.input[0].name
        cal = [rng.standard_normal((1, 3, 224, 224)).astype(np.float32) for _ in range(4)]
        q, q7 = (quantize_qdq(f32, work / f"{name}_int8{t}.onnx", iname, cal, t == "_7bit") for t in ("", "_7bit"))
        out[name] = (f32, q, q7, iname, rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
        evals[name] = (out[name][4], None)
    for name, (f32, q, q7, iname, x) in list(out.items()):
        h = work / f"{name}_fp16.onnx"
        onnx.save(convert(onnx.load(str(f32)), []), str(h))
        out[name] = (f32, q, q7, h, iname, x, *evals[name])
    return out


def edgec_ms(model: Path, out: Path, target: str, shapes: dict, threads: int, runs: int) -> tuple[float, int]:
    b = compile_model(model, out, target=target, build=True, input_shapes=shapes, threads=threads)
    d = time_edgec(b.binaries["bench"], threads, runs, 10)
    return median(d["runs_ms"]), b.weights_bytes


def _cpu_ms(bench: Path, threads: int, runs: int, warmup: int) -> float:
    """One thread: CPU time (leaves out the time others ran); more: wall time (CPU time would add the pool's
    waiting threads' spinning)."""
    return median(time_edgec(bench, threads, runs, warmup)["runs_cpu_ms" if threads == 1 else "runs_ms"])


def _quartiles(xs: list[float]) -> tuple[float, float]:
    s = sorted(xs)
    return s[(len(s) - 1) // 4], s[(3 * (len(s) - 1) + 3) // 4]


def interleaved(model_list: dict, work: Path, int8_target: str, threads: int, runs: int, rounds: int,
                fp32_target: str = "native") -> None:
    """fp32 and int8 builds of each model run alternately over `rounds` rounds, CPU time per run."""
    print(f"edgec builds interleaved: {rounds} rounds (order reversed every other round), threads {threads}, "
          f"median {'CPU' if threads == 1 else 'wall-clock'} ms of {runs} runs per build and round; "
          f"int8 target {int8_target}, fp32 target {fp32_target}\n")
    print("| model | load (1 min) | fp32 median / fastest | int8 median / fastest | fp32 / int8: median | "
          "min-max | quartiles |")
    print("|---|---|---|---|---|---|---|")
    for name, (f32, q, q7, _h, iname, x, _xe, _labels) in model_list.items():
        shapes = {iname: list(x.shape)}
        builds = {"fp32": compile_model(f32, work / f"{name}_r32", target=fp32_target, build=True, input_shapes=shapes,
                                        threads=threads).binaries["bench"]}
        for tag, qm in (("8-bit", q), ("7-bit", q7)):
            builds[tag] = compile_model(qm, work / f"{name}_r8{tag}", target=int8_target, build=True,
                                        input_shapes=shapes, threads=threads).binaries["bench"]
        ms = {k: [] for k in builds}
        loads = []
        for r in range(rounds):
            loads.append(float(Path("/proc/loadavg").read_text().split()[0]))
            for k in (list(builds) if r % 2 == 0 else list(builds)[::-1]):
                ms[k].append(_cpu_ms(builds[k], threads, runs, 10))
        for tag in ("8-bit", "7-bit"):
            ratio = [a / b for a, b in zip(ms["fp32"], ms[tag])]
            q1, q3 = _quartiles(ratio)
            print(f"| {name} {tag} | {min(loads):.1f}-{max(loads):.1f} | {median(ms['fp32']):.4f} / "
                  f"{min(ms['fp32']):.4f} | {median(ms[tag]):.4f} / {min(ms[tag]):.4f} | {median(ratio):.3f}x | "
                  f"{min(ratio):.3f}-{max(ratio):.3f} | {q1:.3f}-{q3:.3f} |")


def int8_accuracy(q: Path, out: Path, target: str, iname: str, x: np.ndarray, labels) -> dict:
    """edgec's int8 build and onnxruntime's optimized int8 run against the exact QDQ arithmetic."""
    b = compile_model(q, out, target=target, build=True, input_shapes={iname: list(x.shape)})
    (y,) = run_binary(b.binaries["runner"], get_target(target), [x], out / "run")[:1]
    names, (ref,), _ = exact_outputs(q, {iname: x})
    _, (ort8,) = onnxruntime_outputs(q, {iname: x})
    step = output_steps(onnx.load(str(q))).get(names[0]) or 1.0
    r = {"lsb_edgec": float(np.abs(y.reshape(ref.shape) - ref).max() / step),
         "lsb_ort": float(np.abs(ort8 - ref).max() / step),
         "agree_edgec": float(np.mean(y.reshape(ref.shape).argmax(1) == ref.argmax(1))),
         "agree_ort": float(np.mean(ort8.argmax(1) == ref.argmax(1)))}
    if labels is not None:
        r.update(top1_exact=float(np.mean(ref.argmax(1) == labels)),
                 top1_edgec=float(np.mean(y.reshape(ref.shape).argmax(1) == labels)),
                 top1_ort=float(np.mean(ort8.argmax(1) == labels)))
    return r


def _ov_int8_convs(runner) -> str:
    """'n/m': of OpenVINO's m compiled convolutions (and fully connected layers), n run in u8/i8."""
    ops = runner.step.__self__.get_compiled_model().get_runtime_model().get_ops()  # step is InferRequest.infer
    convs = [op.get_rt_info() for op in ops
             if op.get_rt_info()["layerType"].astype(str) in ("Convolution", "FullyConnected")]
    n = sum(1 for i in convs if i["runtimePrecision"].astype(str) in ("u8", "i8"))
    return f"{n}/{len(convs)}"


def engines_int8(qm: Path, names: list[str], iname: str, x: np.ndarray, threads: int, runs: int, lsb: float,
                 work: Path, target: str, rounds: int) -> tuple[list[dict], dict]:
    """Each other engine's run of the QDQ model qm: checked against the exact QDQ result, then timed in `rounds`
    rounds interleaved with edgec's int8 build for `target` (engines.time_interleaved: a slow spell of a shared
    host reaches all of them alike, so the per-round ratio is what holds). Returns the engines' rows and edgec's
    {"ms", "best"} of the same rounds."""
    import engines as E

    out_names, (ref,), _ = exact_outputs(qm, {iname: x})
    step = output_steps(onnx.load(str(qm))).get(out_names[0]) or 1.0
    rows, runners = [], {}
    for n in names:
        e = E.ENGINES[n]()
        r = {"engine": n, "version": "", "ms": None, "best": None, "why": "", "lsb": None, "int8": "-", "paired": []}
        rows.append(r)
        why = e.missing()
        if why:
            r["why"] = f"missing: {why}"
            continue
        r["version"] = e.version()
        try:
            run = e.prepare(qm, {iname: x}, threads, work / n)
            y = np.asarray(run.outputs()[0], np.float64).reshape(ref.shape)
        except Exception as ex:  # converter or runtime errors of a third-party engine: one line, the run goes on
            text = str(ex).strip().splitlines()
            r["why"] = "cannot run: " + (text[0] if text else type(ex).__name__)[:160]
            continue
        if n == "openvino":
            r["int8"] = _ov_int8_convs(run)
        r["lsb"] = float(np.abs(y - ref).max() / step)
        agree = bool(np.all(y.argmax(1) == ref.argmax(1)))
        if not agree or r["lsb"] > lsb:
            r["why"] = f"wrong output: {r['lsb']:.0f} LSB off the exact QDQ result" + ("" if agree else ", top-1 differs")
            if run.close is not None:
                run.close()
            continue
        runners[n] = run
    if not runners:
        return rows, {}
    runners = {"edgec": E.Edgec(target).prepare(qm, {iname: x}, threads, work / "edgec"), **runners}
    times, rounds_ms, best = E.time_interleaved(runners, runs, rounds, 10)
    for r in rows:
        if r["engine"] in times:
            t = times[r["engine"]]
            r["ms"], r["best"] = median(t), min(t)
            r["paired"] = [e / o for e, o in zip(rounds_ms["edgec"], rounds_ms[r["engine"]])]
            r["paired_best"] = [e / o for e, o in zip(best["edgec"], best[r["engine"]])]
    return rows, {"ms": median(times["edgec"]), "best": min(times["edgec"])}


def micro() -> None:
    """Build and run benchmarks/c/q8_gemm_micro.c natively (AVX2): the same packed operands through the
    vpmaddwd and vpmaddubsw q8 GEMMs; on CPUs with AMX also q8_gemm_amx_micro.c (the VNNI GEMM against the AMX one)."""
    from edgec.codegen.targets import _cpu_flags, get_target
    from edgec.runtime_c import root

    rt, here = root(), Path(__file__).parent
    g = rt / "q8-gemm"
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "micro"
        subprocess.run(["gcc", "-O2", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-mavx2", "-mfma", f"-I{rt}",
                        str(here / "c" / "q8_gemm_micro.c"), str(g / "q8-pack.c"),
                        str(g / "q8-gemm-4x8-avx2.c"), str(g / "q8-gemm-4x16-avx2-maddubs.c"),
                        "-o", str(exe)], check=True)
        print(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout)
        if not {"amx_tile", "amx_int8", "avx512_vnni"} <= _cpu_flags():
            print("AMX: skipped, this CPU has no AMX-INT8")
            return
        subprocess.run(["gcc", "-O2", "-std=c11", "-D_POSIX_C_SOURCE=200809L",
                        *get_target("x86_64-avx512-amx").cflags, f"-I{rt}", str(here / "c" / "q8_gemm_amx_micro.c"),
                        *(str(g / f) for f in ("q8-pack.c", "q8-gemm-8x32-avx512vnni.c", "q8-gemm-32x32-amx.c",
                                               "q8-gemm-amx-scalar.c")), "-o", str(exe), "-lm"], check=True)
        r = subprocess.run([str(exe)], capture_output=True, text=True)
        print(r.stdout if r.returncode == 0 else f"AMX: skipped, {r.stdout.strip() or r.stderr.strip()}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--models", default="digits,ppocr")
    ap.add_argument("--micro", action="store_true", help="only the q8 GEMM microbenchmark")
    ap.add_argument("--engines", default="openvino,mnn",
                    help="other engines' int8 on the same QDQ models (comma-separated; '' for none)")
    ap.add_argument("--rounds", type=int, default=0,
                    help="only edgec's fp32 and int8 builds, interleaved over this many rounds (CPU time)")
    ap.add_argument("--engine-rounds", type=int, default=5,
                    help="rounds the other engines' timing is interleaved with edgec's int8 build over")
    ap.add_argument("--engine-lsb", type=float, default=16.0,
                    help="an engine more than this many output LSB off the exact QDQ result is not timed")
    ap.add_argument("--target", default=None, help="build fp32 and int8 for this target (default: fp32 native, "
                    "int8 the best this CPU has)")
    a = ap.parse_args()
    if a.micro:
        micro()
        return
    int8_target = a.target or "native"
    fp32_target = a.target or "native"
    if a.target:
        check_target(ap, a.target)
    eng = [n.strip() for n in a.engines.split(",") if n.strip()]
    if eng:
        import engines as E
        bad = [n for n in eng if n not in E.ENGINES or n in ("edgec", "onnxruntime")]
        if bad:
            ap.error(f"--engines: {bad[0]!r} is not another engine; choose from openvino, ncnn, mnn")
    if a.rounds < 0 or a.runs < 1 or a.engine_rounds < 1:
        ap.error("--rounds must be >= 0, --runs and --engine-rounds >= 1")
    if a.rounds:
        with tempfile.TemporaryDirectory() as tmp:
            interleaved(models(Path(tmp), a.models.split(",")), Path(tmp), int8_target, a.threads, a.runs, a.rounds,
                        fp32_target)
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, (f32, q, q7, h, iname, x, xe, labels) in models(work, a.models.split(",")).items():
            shapes = {iname: list(x.shape)}
            base = {"ort_fp32": median(time_onnxruntime(f32, {iname: x}, a.threads, a.runs, 10))}
            base["edgec_fp32"], base["w_fp32"] = edgec_ms(f32, work / f"{name}_e32", fp32_target, shapes, a.threads,
                                                        a.runs)
            for tag, qm in (("", q), (" 7-bit", q7)):
                r = dict(base, model=name + tag)
                r["ort_int8"] = median(time_onnxruntime(qm, {iname: x}, a.threads, a.runs, 10))
                r["edgec_int8"], r["w_int8"] = edgec_ms(qm, work / f"{name}_e8{tag.strip()}", int8_target, shapes,
                                                        a.threads, a.runs)
                r["edgec_fp16w"], r["w_fp16"] = (edgec_ms(h, work / f"{name}_e16", fp32_target, shapes, a.threads, a.runs)
                                                  if not tag else (None, None))
                r.update(int8_accuracy(qm, work / f"{name}_acc{tag.strip()}", int8_target, iname, xe, labels))
                r["engines"], r["edgec_rounds"] = engines_int8(qm, eng, iname, x, a.threads, a.runs, a.engine_lsb,
                                                               work / f"{name}_eng{tag.strip()}", int8_target,
                                                               a.engine_rounds) if eng else ([], {})
                rows.append(r)
    print(f"threads {a.threads}, median of {a.runs} runs, ms; edgec int8 target {int8_target}\n")
    print("| model | ort fp32 | ort int8 | edgec fp32 | edgec int8 | edgec fp16-weights | int8 vs edgec fp32 | "
          "edgec int8 vs ort int8 | int8 vs ort fp32 | weight bytes fp32 / int8 / fp16 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:  # 4 decimals: the digits CNN runs in ~0.01 ms
        fp16 = f"{r['edgec_fp16w']:.4f}" if r["edgec_fp16w"] is not None else "-"
        print(f"| {r['model']} | {r['ort_fp32']:.4f} | {r['ort_int8']:.4f} | {r['edgec_fp32']:.4f} | "
              f"{r['edgec_int8']:.4f} | {fp16} | {r['edgec_fp32'] / r['edgec_int8']:.2f}x | "
              f"{r['ort_int8'] / r['edgec_int8']:.2f}x | {r['ort_fp32'] / r['edgec_int8']:.2f}x | "
              f"{r['w_fp32']} / {r['w_int8']} / {r['w_fp16'] or '-'} |")
    print("\nint8 accuracy against the exact QDQ arithmetic (onnxruntime, graph optimizations off); "
          "onnxruntime's optimized int8 run on this CPU beside it\n")
    print("| model | edgec int8: max err (LSB) | edgec int8: argmax agree | onnxruntime optimized int8: max err (LSB) | "
          "onnxruntime optimized int8: argmax agree | top-1 exact / edgec / onnxruntime optimized |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        top1 = (f"{r['top1_exact']:.4f} / {r['top1_edgec']:.4f} / {r['top1_ort']:.4f}" if "top1_exact" in r
                else "- (no labels)")
        print(f"| {r['model']} | {r['lsb_edgec']:.0f} | {r['agree_edgec']:.4f} | {r['lsb_ort']:.0f} | "
              f"{r['agree_ort']:.4f} | {top1} |")
    if eng:
        from engines import ratio_words, spread
        print(f"\nother engines' int8 on the same QDQ model, threads {a.threads}, {a.runs} runs in {a.engine_rounds} "
              f"rounds interleaved with edgec's int8 build, ms; output checked against the exact QDQ arithmetic first "
              f"(top-1 must agree, at most {a.engine_lsb:g} LSB)\n")
        print("| model | engine | convs in int8 | max err (LSB) | engine int8 median (best) | edgec int8 median (best) | "
              "edgec vs engine (medians; best runs) | per round: edgec / engine, of the medians; of the fastest runs: "
              "median (range) |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            ec = r["edgec_rounds"]
            for e in r["engines"]:
                lsb = f"{e['lsb']:.0f}" if e["lsb"] is not None else "-"
                if e["ms"] is None:
                    print(f"| {r['model']} | {e['engine']} {e['version']} | {e['int8']} | {lsb} | not timed | - | "
                          f"{e['why']} | - |")
                    continue
                print(f"| {r['model']} | {e['engine']} {e['version']} | {e['int8']} | {lsb} | "
                      f"{e['ms']:.4f} ({e['best']:.4f}) | {ec['ms']:.4f} ({ec['best']:.4f}) | "
                      f"{ratio_words(ec['ms'], e['engine'], e['ms'])}; {ratio_words(ec['best'], e['engine'], e['best'])} | "
                      f"{spread(e['paired'])}; {spread(e['paired_best'])} |")

if __name__ == "__main__":
    main()
