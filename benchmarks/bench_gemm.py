"""1x1 convs and GEMMs as a share of one core's measured FMA peak: edgec and onnxruntime, same run.

The peak is measured here, not taken from a datasheet: a C loop of independent FMA chains (8 to 16 of them, the
best count kept) at the widest vector the target's kernels use, compiled with the target's flags. Each layer is a
one-node ONNX model (Conv 1x1 + bias + ReLU, or MatMul) compiled by edgec and run by its bench program; onnxruntime
runs the same file. Rounds are interleaved (peak, edgec, onnxruntime per layer) so a busy spell on a shared machine
hits every column; the peak is re-measured each round and the best round's peak is the reference.

    python benchmarks/bench_gemm.py --md
    python benchmarks/bench_gemm.py --threads 2 --rounds 5
    python benchmarks/bench_gemm.py --split --md   # spatial-pack layers: im2col vs GEMM, thread CPU time
    python benchmarks/bench_gemm.py --cold --md    # 1x1 layers warm vs in a model's cache state (+ residual)
    python benchmarks/bench_gemm.py --cpu --md     # CPU time per inference instead of wall time (a busy host)

Read `% peak` (edgec) against the 85% target; shapes are ResNet-50 / MobileNet-style pointwise layers.
"""

from __future__ import annotations

import argparse
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import median, ort_session, random_inputs, time_edgec, time_onnxruntime  # noqa: E402

from edgec.codegen import build_project, compile_model  # noqa: E402
from edgec.codegen.options import CompileOptions  # noqa: E402
from edgec.codegen.targets import get_target  # noqa: E402

# (name, C in, K out, H = W) of 1x1 convs; (name, M, K, N) of MatMuls
CONVS = [("1x1 64->256 @56", 64, 256, 56), ("1x1 256->64 @56", 256, 64, 56), ("1x1 128->512 @28", 128, 512, 28),
         ("1x1 512->128 @28", 512, 128, 28), ("1x1 256->1024 @14", 256, 1024, 14), ("1x1 1024->256 @14", 1024, 256, 14),
         ("1x1 512->2048 @7", 512, 2048, 7), ("1x1 96->96 @24 (odd)", 96, 96, 24)]
MATMULS = [("matmul 196x768x768", 196, 768, 768), ("matmul 64x512x2048", 64, 512, 2048)]
# --split: spatial-pack layers of ResNet-50 (name, C, K, H = W, kernel, stride, pad)
SPLIT = [("stem 7x7 s2 3->64 @224", 3, 64, 224, 7, 2, 3), ("3x3 s2 128 @56", 128, 128, 56, 3, 2, 1),
         ("3x3 s2 256 @28", 256, 256, 28, 3, 2, 1), ("3x3 s2 512 @14", 512, 512, 14, 3, 2, 1),
         ("1x1 s2 256->512 @56", 256, 512, 56, 1, 2, 0), ("1x1 s2 512->1024 @28", 512, 1024, 28, 1, 2, 0),
         ("1x1 256->64 @56", 256, 64, 56, 1, 1, 0), ("1x1 64->256 @56", 64, 256, 56, 1, 1, 0)]

# Independent FMA chains: enough in flight to cover latency x units; the count that runs fastest is kept.
_PEAK_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <pthread.h>
#if defined(__AVX512F__) && defined(EC_PEAK_512)
#include <immintrin.h>
typedef __m512 v; enum { VL = 16 };
#define SET(x) _mm512_set1_ps(x)
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define SUM(x) _mm512_reduce_add_ps(x)
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 v; enum { VL = 8 };
#define SET(x) _mm256_set1_ps(x)
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
static float SUM(__m256 x) { float t[8]; _mm256_storeu_ps(t, x); return t[0] + t[7]; }
#elif defined(__ARM_NEON)
#include <arm_neon.h>
typedef float32x4_t v; enum { VL = 4 };
#define SET(x) vdupq_n_f32(x)
#define FMA(a, b, c) vfmaq_f32(c, a, b)
#define SUM(x) vaddvq_f32(x)
#else
typedef float v; enum { VL = 1 };
#define SET(x) (x)
#define FMA(a, b, c) ((a) * (b) + (c))
#define SUM(x) (x)
#endif
#ifndef CHAINS
#define CHAINS 12
#endif
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static long iters;
static volatile float sink;
static void *run(void *arg) {
  (void)arg;
  v acc[CHAINS];
  const v a = SET(0.999999f), b = SET(1e-7f);
  for (int i = 0; i < CHAINS; i++) acc[i] = SET((float)i);
  for (long n = 0; n < iters; n++) {
    /* fully unrolled, so every chain stays in a register */
#pragma GCC unroll 16
    for (int i = 0; i < CHAINS; i++) acc[i] = FMA(acc[i], a, b);
  }
  float s = 0;
  for (int i = 0; i < CHAINS; i++) s += SUM(acc[i]);
  sink = s;
  return NULL;
}
int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  iters = argc > 2 ? atol(argv[2]) : 20000000L;
  pthread_t t[64];
  double best = 0;
  for (int rep = 0; rep < 25; rep++) { /* short repeats, the best kept: a preempted one is discarded */
    double t0 = now();
    for (int i = 1; i < threads; i++) pthread_create(&t[i], NULL, run, NULL);
    run(NULL);
    for (int i = 1; i < threads; i++) pthread_join(t[i], NULL);
    double g = 2.0 * VL * CHAINS * (double)iters * threads / (now() - t0) / 1e9;
    if (g > best) best = g;
  }
  printf("%.3f\n", best);
  return 0;
}
"""


def build_peak(tmp: Path, target) -> dict[int, Path]:
    """One peak binary per chain count, with the target's compiler and flags."""
    src = tmp / "peak.c"
    src.write_text(_PEAK_C)
    wide = ["-DEC_PEAK_512"] if target.isa == "avx512" else []
    out = {}
    for chains in (8, 10, 12, 16):
        exe = tmp / f"peak{chains}"
        subprocess.run([target.cc, "-O3", "-std=c99", "-D_POSIX_C_SOURCE=200809L", *target.cflags, *wide,
                        f"-DCHAINS={chains}", str(src), "-o", str(exe), "-lpthread"], check=True)
        out[chains] = exe
    return out


def fma_peak(bins: dict[int, Path], threads: int, target) -> float:
    """GFLOP/s of the best chain count (short runs: the best of 25 short repeats inside the program)."""
    run = list(target.qemu or [])
    return max(float(subprocess.run([*run, str(exe), str(threads), "1000000"], capture_output=True, text=True,
                                    check=True).stdout) for exe in bins.values())


def conv1x1_model(path: Path, c: int, k: int, hw: int) -> tuple[Path, int]:
    return conv_model(path, c, k, hw, 1, 1, 0)


def conv_model(path: Path, c: int, k: int, hw: int, ks: int, stride: int, pad: int) -> tuple[Path, int]:
    """Conv(ks x ks, stride, pad) + bias + ReLU on a [1, c, hw, hw] input; returns (path, FLOPs)."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((k, c, ks, ks)) / np.sqrt(c * ks * ks)).astype(np.float32)
    b = (0.1 * rng.standard_normal(k)).astype(np.float32)
    ho = (hw + 2 * pad - ks) // stride + 1
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", strides=[stride, stride],
                              pads=[pad] * 4),
             helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, k, ho, ho])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path, 2 * c * k * ks * ks * ho * ho


def split_run(tmp: Path, target, peak: float, md: bool) -> None:
    """Spatial-pack layers: im2col packing and GEMM timed apart (thread CPU time, best of 9), with the
    blocking edgec's emitter chose for the layer, and the layer as its driver runs (each panel's
    pack overlapping the previous panel's GEMM)."""
    from edgec.codegen import kernels
    from edgec.runtime_c import root as runtime_root

    rt = runtime_root()
    src = Path(__file__).resolve().parent / "c" / "f32_conv_split.c"
    head = ["layer", "KC x NC", "pack ms", "GEMM ms", "GEMM % peak", "pack + GEMM % peak", "pack share", "as run ms",
            "as run % peak"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head) if md else "  ".join(head))
    for i, (name, c, k, hw, ks, st, pad) in enumerate(SPLIT):
        path, flops = conv_model(tmp / f"s{i}.onnx", c, k, hw, ks, st, pad)
        b = compile_model(path, tmp / f"sp{i}", options=CompileOptions())
        d = b.layers[0]
        if not d["algo"].startswith("gemm-") or "-1x1-" in d["algo"] or "-s1-" in d["algo"] or "gemm-t-" in d["algo"]:
            print(f"# {name}: edgec runs {d['algo']}, not the spatial-pack GEMM")
            continue
        kern = next(kk for kk in kernels.KERNELS if kk.name == d["details"]["kernel"])
        ho = (hw + 2 * pad - ks) // st + 1
        defs = dict(XC=c, XH=hw, XW=hw, XK=k, XHO=ho, XWO=ho, XKH=ks, XKW=ks, XSH=st, XSW=st, XPT=pad, XPL=pad,
                    XMR=kern.params["mr"], XNR=kern.params["nr"], XKC=d["details"]["kc"], XNC=d["details"]["nc"],
                    XMC=d["details"].get("mc", 0), XUK=kern.name)
        exe = tmp / f"split{i}"
        subprocess.run([target.cc, "-O2", "-std=c11", *target.cflags, f"-I{rt}", *(f"-D{a}={v}" for a, v in defs.items()),
                        str(src), str(rt / kern.file), "-o", str(exe), "-lm"], check=True)
        pack, gemm, run = map(float, subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split())
        row = [name, f"{defs['XKC']} x {defs['XNC']}", f"{pack:.3f}", f"{gemm:.3f}",
               f"{100 * flops / gemm / 1e6 / peak:.0f}%", f"{100 * flops / (pack + gemm) / 1e6 / peak:.0f}%",
               f"{100 * pack / (pack + gemm):.0f}%", f"{run:.3f}", f"{100 * flops / run / 1e6 / peak:.0f}%"]
        print(("| " + " | ".join(row) + " |") if md else "  ".join(row))


def llc_bytes() -> int:
    """This machine's largest cache (sysfs), 32 MB where it does not say."""
    best = 0
    for d in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            t = (d / "size").read_text().strip().upper()
            mult = {"K": 1 << 10, "M": 1 << 20}.get(t[-1:], 1)
            best = max(best, int(t.rstrip("KM")) * mult)
        except (OSError, ValueError):
            continue
    return best or 32 << 20


def cold_run(tmp: Path, target, peak: float, md: bool, only: str | None) -> None:
    """1x1 stride-1 layers warm (one-node model in a loop) and as inside a model (last-level cache flushed, the
    input and the residual just written), without and with a residual, in thread CPU time (best of 15 each,
    interleaved), with the blocking edgec's emitter chose for the layer."""
    from edgec.codegen import kernels
    from edgec.runtime_c import root as runtime_root

    rt = runtime_root()
    src = Path(__file__).resolve().parent / "c" / "f32_conv_cold.c"
    flush = 2 * llc_bytes()
    head = ["layer", "KC x NC", "warm ms", "warm % peak", "cold ms", "cold % peak", "+res warm ms", "+res cold ms",
            "+res cold % peak"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head) if md else "  ".join(head))
    for i, (name, c, k, hw) in enumerate(CONVS):
        if only and only not in name:
            continue
        path, flops = conv1x1_model(tmp / f"k{i}.onnx", c, k, hw)
        d = compile_model(path, tmp / f"kp{i}", options=CompileOptions()).layers[0]
        if not d["algo"].startswith("gemm-") or "-1x1-" in d["algo"] or "gemm-t-" in d["algo"]:
            print(f"# {name}: edgec runs {d['algo']}, not the packed 1x1 driver")
            continue
        kern = next(kk for kk in kernels.KERNELS if kk.name == d["details"]["kernel"])
        defs = dict(XC=c, XH=hw, XW=hw, XK=k, XMR=kern.params["mr"], XNR=kern.params["nr"], XKC=d["details"]["kc"],
                    XNC=d["details"]["nc"], XMC=d["details"].get("mc", 0), XUK=kern.name,
                    XUKP=kern.params["packb"] if d["details"].get("packb") else "NULL")
        ms = []
        for r in (0, 1):
            exe = tmp / f"cold{i}-{r}"
            subprocess.run([target.cc, "-O2", "-std=c11", *target.cflags, f"-I{rt}", f"-DXRES={r}",
                            *(f"-D{a}={v}" for a, v in defs.items()), str(src), str(rt / kern.file), "-o", str(exe),
                            "-lm"], check=True)
            ms += map(float, subprocess.run([str(exe), str(flush)], capture_output=True, text=True,
                                            check=True).stdout.split())
        pct = [f"{100 * flops / t / 1e6 / peak:.0f}%" for t in ms]
        row = [name, f"{defs['XKC']} x {defs['XNC']}", f"{ms[0]:.3f}", pct[0], f"{ms[1]:.3f}", pct[1], f"{ms[2]:.3f}",
               f"{ms[3]:.3f}", pct[3]]
        print(("| " + " | ".join(row) + " |") if md else "  ".join(row))


def matmul_model(path: Path, m: int, k: int, n: int) -> tuple[Path, int]:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                          [numpy_helper.from_array(w, "w")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path, 2 * m * k * n


def edgec_cpu_ms(bench: Path, threads: int, runs: int, warmup: int) -> float:
    """CPU time per inference: user + sys of the bench child over `runs` runs minus that of one run (start-up
    and weight loading cancel out; time spent waiting for a core on a shared host does not count)."""
    def child_cpu(n: int) -> float:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        time_edgec(bench, threads, n, warmup)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1e3
    return (child_cpu(runs + 1) - child_cpu(1)) / runs


def ort_cpu_ms(path: Path, feeds: dict, threads: int, runs: int, warmup: int) -> float:
    """onnxruntime's CPU time per inference (this process's, so 1 thread only: no pool threads spin)."""
    sess = ort_session(path, threads)
    for _ in range(warmup):
        sess.run(None, feeds)
    t0 = time.process_time()
    for _ in range(runs):
        sess.run(None, feeds)
    return (time.process_time() - t0) * 1e3 / runs


def host() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--md", action="store_true")
    ap.add_argument("--only", help="substring of the layer names to run")
    ap.add_argument("--cpu", action="store_true",
                    help="CPU time per inference (edgec: the bench child's user+sys; onnxruntime: this process's), "
                         "1 thread: for a shared, loaded host")
    ap.add_argument("--split", action="store_true",
                    help="spatial-pack layers: packing and GEMM timed apart in thread CPU time (1 thread)")
    ap.add_argument("--cold", action="store_true",
                    help="1x1 layers warm and as inside a model (cache flushed, input and residual just written), "
                         "thread CPU time (1 thread)")
    a = ap.parse_args()
    if a.cpu and a.threads != 1:
        ap.error("--cpu measures 1 thread")
    target = get_target("native")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        peak_bins = build_peak(tmp, target)
        if a.split:
            peak = fma_peak(peak_bins, 1, target)
            print(f"# host: {host()}, {target.name} ({target.isa}), 1 thread; measured FMA peak {peak:.1f} GFLOP/s")
            split_run(tmp, target, peak, a.md)
            return 0
        if a.cold:
            peak = fma_peak(peak_bins, 1, target)
            print(f"# host: {host()}, {target.name} ({target.isa}), 1 thread; load {open('/proc/loadavg').read().split()[0]}; "
                  f"measured FMA peak {peak:.1f} GFLOP/s")
            cold_run(tmp, target, peak, a.md, a.only)
            return 0
        layers = [(n, *conv1x1_model(tmp / f"c{i}.onnx", c, k, hw)) for i, (n, c, k, hw) in enumerate(CONVS)]
        layers += [(n, *matmul_model(tmp / f"m{i}.onnx", m, k, nn)) for i, (n, m, k, nn) in enumerate(MATMULS)]
        if a.only:
            layers = [l for l in layers if a.only in l[0]]
        built = []
        for i, (name, path, flops) in enumerate(layers):
            b = compile_model(path, tmp / f"p{i}", options=CompileOptions(threads=a.threads))
            algo = ", ".join(sorted({l["algo"] for l in b.layers if l["op"] in ("Conv", "MatMul", "Gemm")}))
            built.append((name, path, flops, algo, build_project(b.dir, b.target, jobs=2)["bench"]))
        peaks, rows = [], {name: {"edgec": [], "ort": []} for name, *_ in built}
        for _ in range(a.rounds):
            peaks.append(fma_peak(peak_bins, a.threads, target))
            for name, path, flops, algo, bench in built:
                feeds = random_inputs(path)
                if a.cpu:
                    rows[name]["edgec"].append(edgec_cpu_ms(bench, 1, a.runs, a.warmup))
                    rows[name]["ort"].append(ort_cpu_ms(path, feeds, 1, a.runs, a.warmup))
                    continue
                rows[name]["edgec"].append(median(time_edgec(bench, a.threads, a.runs, a.warmup)["runs_ms"]))
                rows[name]["ort"].append(median(time_onnxruntime(path, feeds, a.threads, a.runs, a.warmup)))
        peak = max(peaks)
        print(f"# host: {host()}, {target.name} ({target.isa}), {a.threads} thread(s); load {open('/proc/loadavg').read().split()[0]}; "
              f"{'CPU time per inference' if a.cpu else 'wall time, median of runs'}")
        print(f"# measured FMA peak: {peak:.1f} GFLOP/s (rounds: {', '.join(f'{p:.1f}' for p in peaks)})")
        head = ["layer", "edgec algo", "edgec ms", "edgec GFLOP/s", "% peak", "ort ms", "ort % peak", "ort/edgec"]
        if a.md:
            print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        else:
            print("  ".join(head))
        for name, path, flops, algo, _ in built:
            e, o = min(rows[name]["edgec"]), min(rows[name]["ort"])  # best round: least disturbed
            ge, go = flops / e / 1e6, flops / o / 1e6
            row = [name, algo, f"{e:.3f}", f"{ge:.1f}", f"{100 * ge / peak:.0f}%", f"{o:.3f}", f"{100 * go / peak:.0f}%",
                   f"{o / e:.2f}"]
            print(("| " + " | ".join(row) + " |") if a.md else "  ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
