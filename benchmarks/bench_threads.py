"""Thread scaling of edgec's compiled models, with a figure that holds on a busy machine.

    python benchmarks/bench_threads.py [--models resnet50,squeezenet,shufflenet,ppocr-cls] [--threads 2]

Per model: (1) wall-clock medians at 1 and N threads, edgec and onnxruntime alternating, and each one's
speedup; on a shared host these move with the load. (2) A diagnostic build (-DEC_POOL_STATS, see
docs/kernels.md) run at N threads gives the thread CPU time of every pooled chunk and the span those
chunks would take on N threads with nothing else running; with the 1-thread CPU time per inference
(the difference of two run counts, so start-up cancels) that bounds the quiet-machine speedup:

    1t CPU / (span + the 1-thread work outside the pool)

It counts partitioning, serial layers and chunks slowed by sharing caches and memory with the other
threads; not the time a thread takes to notice a job, so a quiet machine lands a little below it.
"""

from __future__ import annotations

import argparse
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_models import MODELS  # noqa: E402
from common import median, random_inputs, time_edgec, time_onnxruntime  # noqa: E402

from edgec.codegen import build_project, compile_model  # noqa: E402

STATS = re.compile(r"chunks ([\d.]+) ms, span on \d+ threads ([\d.]+) ms")


def _cpu_ms(cmd: list[str]) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1e3, r.stderr


def quiet_bound(bench: Path, threads: int, lo: int, hi: int) -> dict:
    """1-thread CPU per inference, pooled chunk CPU and span per inference at `threads`, and the bound."""
    one = [min(_cpu_ms([str(bench), "--runs", str(n), "--warmup", "0", "--threads", "1"])[0] for _ in range(2))
           for n in (lo, hi)]
    stats = [STATS.search(_cpu_ms([str(bench), "--runs", str(n), "--warmup", "0", "--threads", str(threads)])[1])
             for n in (lo, hi)]
    t1 = (one[1] - one[0]) / (hi - lo)
    chunks, span = ((float(stats[1][k]) - float(stats[0][k])) / (hi - lo) for k in (1, 2))
    return {"cpu_1t": t1, "chunks": chunks, "span": span, "bound": t1 / (span + max(0.0, t1 - chunks))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,squeezenet,shufflenet,ppocr-cls")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    t = args.threads
    with open("/proc/loadavg") as f:
        print(f"load average at the start: {' '.join(f.read().split()[:3])}")
    print(f"| model | edgec 1t ms | edgec {t}t ms | edgec speedup | ort 1t ms | ort {t}t ms | ort speedup | "
          f"edgec quiet bound (chunk CPU 1t -> {t}t) |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        fetch, shapes = MODELS[name]
        path = Path(fetch())
        feeds = random_inputs(path, shapes)
        with tempfile.TemporaryDirectory() as tmp:
            b = compile_model(path, Path(tmp) / "p", threads=t, input_shapes=shapes, build=True)
            wall = {}
            for th in (1, t):
                wall[("e", th)] = median(time_edgec(b.binaries["bench"], th, args.runs, 3)["runs_ms"])
                wall[("o", th)] = median(time_onnxruntime(path, feeds, th, args.runs, 3))
            shutil.rmtree(b.dir / "obj")  # make does not rebuild for new CFLAGS by itself
            stats_bin = build_project(b.dir, "native", cflags="-O3 -DEC_POOL_STATS", jobs=2)["bench"]
            few = 3 if name == "resnet50" else 10
            q = quiet_bound(stats_bin, t, few, 4 * few)
        print(f"| {name} | {wall['e', 1]:.3f} | {wall['e', t]:.3f} | {wall['e', 1] / wall['e', t]:.2f}x | "
              f"{wall['o', 1]:.3f} | {wall['o', t]:.3f} | {wall['o', 1] / wall['o', t]:.2f}x | {q['bound']:.2f}x "
              f"({q['cpu_1t']:.2f} -> {q['chunks']:.2f} ms, span {q['span']:.2f}) |", flush=True)
    with open("/proc/loadavg") as f:
        print(f"load average at the end: {' '.join(f.read().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
