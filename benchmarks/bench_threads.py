"""Thread scaling of edgec's compiled models, with a figure that holds on a busy machine.

    python benchmarks/bench_threads.py [--models resnet50,squeezenet,shufflenet,ppocr-cls,dense3x3] [--threads 2]
                                       [--no-wall] [--jobs 1.9]

Per model: (1) wall-clock medians at 1 and N threads, edgec and onnxruntime alternating, and each one's
speedup; on a shared host these move with the load. (2) A diagnostic build (-DEC_POOL_STATS, see
docs/kernels.md) run at N threads gives the thread CPU time of every pooled chunk and the span those
chunks would take on N threads with nothing else running; with the 1-thread CPU time per inference
(the difference of two run counts, so start-up cancels) that bounds the quiet-machine speedup:

    1t CPU / (span + the 1-thread work outside the pool)

It counts partitioning, serial layers and chunks slowed by sharing caches and memory with the other
threads; not the time a thread takes to notice a job, so a quiet machine lands a little below it.

--jobs X lists every pooled job (in call order within one inference, named by its task function) whose
own chunks/span bound is below X, and the 1-thread CPU time per inference spent outside any pooled job.
--no-wall skips (1), the only part that needs a quiet host.
--probe first measures what the host charges for cache lines the other core touched (benchmarks/c/
host_shared_writes.c, CPUs 0 and 1): writing 208 KB of lines this core owns, of lines the other core has read,
of lines it has written, and reading lines it has written. Where the second is several times the first, a layer
that overwrites a buffer both threads read before (a depthwise conv's output after a 1x1 split by output
channels) runs slower on two threads than on one (docs/benchmarks.md, pass T).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_models import MODELS, engine_model  # noqa: E402
from common import median, random_inputs, time_edgec, time_onnxruntime  # noqa: E402

from edgec.codegen import build_project, compile_model  # noqa: E402

STATS = re.compile(r"chunks ([\d.]+) ms, span on \d+ threads ([\d.]+) ms")
JOB = re.compile(r"ec_pool job (\d+) fn ([+-]\d+) n (\d+) chunks ([\d.]+) ms span ([\d.]+) ms")


def _cpu_ms(cmd: list[str]) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1e3, r.stderr


def quiet_bound(bench: Path, threads: int, lo: int, hi: int) -> dict:
    """1-thread CPU per inference, pooled chunk CPU and span per inference at `threads`, and the bound. No
    warm-up runs (the bench program's default warms up for 250 ms, as many inferences as fit, which neither
    cancels between the two run counts nor lets --jobs fold the jobs of a known number of inferences)."""
    def cmd(n: int, th: int) -> list[str]:
        return [str(bench), "--runs", str(n), "--warmup", "0", "--warmup-ms", "0", "--threads", str(th)]
    one = [min(_cpu_ms(cmd(n, 1))[0] for _ in range(2)) for n in (lo, hi)]
    stats = [STATS.search(_cpu_ms(cmd(n, threads))[1]) for n in (lo, hi)]
    t1 = (one[1] - one[0]) / (hi - lo)
    chunks, span = ((float(stats[1][k]) - float(stats[0][k])) / (hi - lo) for k in (1, 2))
    return {"cpu_1t": t1, "chunks": chunks, "span": span, "bound": t1 / (span + max(0.0, t1 - chunks))}


def jobs(bench: Path, threads: int, runs: int) -> list[dict]:
    """Per pooled job of one inference: task symbol, items, chunk CPU ms, span ms (EC_POOL_STATS_RUNS)."""
    import os
    syms = {}
    for line in subprocess.run(["nm", str(bench)], capture_output=True, text=True, check=True).stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "tTwW":
            syms[int(f[0], 16)] = f[2]
    base = next(a for a, n in syms.items() if n == "ec_pool_init")
    # the bench program runs one inference (its first_ms) before the timed ones
    r = subprocess.run([str(bench), "--runs", str(runs), "--warmup", "0", "--warmup-ms", "0", "--threads", str(threads)],
                       capture_output=True, text=True, check=True,
                       env={**os.environ, "EC_POOL_STATS_RUNS": str(runs + 1)})
    return [{"job": int(m[1]), "fn": syms.get(base + int(m[2]), m[2]), "n": int(m[3]), "chunks": float(m[4]),
             "span": float(m[5])} for m in JOB.finditer(r.stderr)]


def probe() -> None:
    """Build and run benchmarks/c/host_shared_writes.c; print its figures against the own-lines write."""
    src = Path(__file__).resolve().parent / "c" / "host_shared_writes.c"
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "probe"
        try:
            subprocess.run([cc, "-O2", "-pthread", str(src), "-o", str(exe)], check=True, capture_output=True)
            r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as e:
            print(f"probe: skipped, {src.name} did not build or run with {cc} ({e.__class__.__name__})")
            return
    if r.returncode:
        print(f"probe: {r.stderr.strip() or 'failed'}")
        return
    us = {k: float(v) for k, v in (line.split() for line in r.stdout.split("\n") if line.strip())}
    own = us["write_own"]
    print("host probe (208 KB, us): " + ", ".join(f"{k} {v:.1f} ({v / own:.1f}x)" for k, v in us.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,squeezenet,shufflenet,ppocr-cls")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--no-wall", action="store_true", help="only the busy-host figures (no wall-clock medians)")
    ap.add_argument("--jobs", type=float, default=0.0, help="list pooled jobs whose own bound is below this")
    ap.add_argument("--probe", action="store_true",
                    help="first measure the host's cost of cache lines the other core touched")
    args = ap.parse_args()
    t = args.threads
    if args.probe:
        probe()
    with open("/proc/loadavg") as f:
        print(f"load average at the start: {' '.join(f.read().split()[:3])}")
    print(f"| model | edgec 1t ms | edgec {t}t ms | edgec speedup | ort 1t ms | ort {t}t ms | ort speedup | "
          f"edgec quiet bound (chunk CPU 1t -> {t}t) |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            if name in MODELS:
                fetch, shapes = MODELS[name]
                path = Path(fetch())
            else:
                path, shapes = engine_model(name, Path(tmp))
            b = compile_model(path, Path(tmp) / "p", threads=t, input_shapes=shapes, build=True)
            wall = {("e", 1): float("nan"), ("e", t): float("nan"), ("o", 1): float("nan"), ("o", t): float("nan")}
            feeds = random_inputs(path, shapes)
            for th in () if args.no_wall else (1, t):
                wall[("e", th)] = median(time_edgec(b.binaries["bench"], th, args.runs, 3)["runs_ms"])
                wall[("o", th)] = median(time_onnxruntime(path, feeds, th, args.runs, 3))
            shutil.rmtree(b.dir / "obj")  # make does not rebuild for new CFLAGS by itself
            stats_bin = build_project(b.dir, "native", cflags="-O3 -DEC_POOL_STATS", jobs=2)["bench"]
            few = 3 if name == "resnet50" else 10
            q = quiet_bound(stats_bin, t, few, 4 * few)
            listed = [j for j in jobs(stats_bin, t, few) if j["span"] > 0 and j["chunks"] / j["span"] < args.jobs]
        print(f"| {name} | {wall['e', 1]:.3f} | {wall['e', t]:.3f} | {wall['e', 1] / wall['e', t]:.2f}x | "
              f"{wall['o', 1]:.3f} | {wall['o', t]:.3f} | {wall['o', 1] / wall['o', t]:.2f}x | {q['bound']:.2f}x "
              f"({q['cpu_1t']:.2f} -> {q['chunks']:.2f} ms, span {q['span']:.2f}) |", flush=True)
        if args.jobs:
            print(f"  {name}: outside pooled jobs {max(0.0, q['cpu_1t'] - q['chunks']):.3f} ms of "
                  f"{q['cpu_1t']:.3f} (1-thread CPU per inference); jobs below {args.jobs}x:")
            for j in listed:
                print(f"    job {j['job']} {j['fn']} n={j['n']}: {j['chunks']:.3f} ms, span {j['span']:.3f} ms, "
                      f"{j['chunks'] / j['span']:.2f}x")
    with open("/proc/loadavg") as f:
        print(f"load average at the end: {' '.join(f.read().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
