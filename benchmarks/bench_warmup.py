"""A young bench process against a warm one: per-run curves of fresh processes, and the engine harness's two ways
of timing edgec (a fresh process per round, as it did before, against one `bench --serve` process) next to
onnxruntime in this process.

    python benchmarks/bench_warmup.py [--models squeezenet,resnet50] [--threads 1,2] [--procs 8] [--runs 60]
                                      [--rounds 15] [--per-round 4] [--warmup 3]

Curves: --procs fresh processes of the generated bench, each `--runs N --warmup 0 --warmup-ms 0`: the median over
processes of each process's median wall-clock and CPU time (bench's runs_ms / runs_cpu_ms, the process's CPU
time) for runs 1-4, 5-8, ... (run 0, `first_ms`, apart), and the page faults (`timed_minflt`) in the timed runs.
Harness: --rounds interleaved rounds, the order rotating, --warmup runs then --per-round timed runs each: a fresh
`bench --warmup W --warmup-ms 0` per round, the same requests to one `bench --serve`, and onnxruntime's session
(wall clock, and the calling thread's CPU time: at 1 thread onnxruntime runs there). Models as bench_models.py
--engines builds them (random weights). Prints the load average with every table.
"""

from __future__ import annotations

import argparse
import json
import statistics as st
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_models import engine_model  # noqa: E402
from common import BenchServer, random_inputs  # noqa: E402

from edgec.codegen import compile_model  # noqa: E402


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def curves(bench: Path, threads: int, procs: int, runs: int) -> None:
    docs = []
    for _ in range(procs):
        out = subprocess.run([str(bench), "--runs", str(runs), "--warmup", "0", "--warmup-ms", "0", "--threads",
                              str(threads)], capture_output=True, text=True, check=True).stdout
        docs.append(json.loads(out))
    steady = [st.median(d["runs_cpu_ms"][-16:]) for d in docs]
    print(f"  run 0 (first_ms): wall {st.median(d['first_ms'] for d in docs):.3f} ms; page faults in runs 1-{runs}: "
          f"{sum(d['timed_minflt'] for d in docs)} over {procs} processes")
    print("  runs     wall ms   CPU ms   CPU / the process's last 16 runs")
    for a in [1, 5, 9, 13, 21, 29, 41, 53, 73, 93]:
        if a + 3 > runs:
            break
        w = st.median(st.median(d["runs_ms"][a - 1:a + 3]) for d in docs)
        c = st.median(st.median(d["runs_cpu_ms"][a - 1:a + 3]) for d in docs)
        r = st.median(st.median(d["runs_cpu_ms"][a - 1:a + 3]) / s for d, s in zip(docs, steady))
        print(f"  {a:2d}-{a + 3:<3d} {w:9.3f} {c:8.3f}   {r:.3f}")


def harness(bench: Path, model: Path, feeds: dict, threads: int, rounds: int, per: int, warmup: int) -> None:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads, so.log_severity_level = threads, 1, 3
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    sess.run(None, feeds)
    srv = BenchServer(bench, threads)

    def fresh():
        d = json.loads(subprocess.run([str(bench), "--runs", str(per), "--warmup", str(warmup), "--warmup-ms", "0",
                                       "--threads", str(threads)], capture_output=True, text=True, check=True).stdout)
        return d["runs_ms"], d["runs_cpu_ms"]

    def served():
        d = srv.time(per, warmup)
        return d["runs_ms"], d["runs_cpu_ms"]

    def onnxruntime():
        for _ in range(warmup):
            sess.run(None, feeds)
        w, c = [], []
        for _ in range(per):
            t0, c0 = time.perf_counter(), time.thread_time()
            sess.run(None, feeds)
            w.append((time.perf_counter() - t0) * 1e3)
            c.append((time.thread_time() - c0) * 1e3)
        return w, c

    ways = {"edgec, a fresh process a round": fresh, "edgec, one bench --serve": served, "onnxruntime": onnxruntime}
    res = {n: ([], []) for n in ways}
    order = list(ways)
    try:
        for k in range(rounds):
            for n in order[k % 3:] + order[:k % 3]:
                w, c = ways[n]()
                res[n][0].extend(w)
                res[n][1].extend(c)
                time.sleep(0.05)
    finally:
        srv.close()
    ow, oc = st.median(res["onnxruntime"][0]), st.median(res["onnxruntime"][1])
    note = "" if threads == 1 else ": its caller thread only"
    print(f"  {'':32s} wall ms (/ onnxruntime)   CPU ms (/ onnxruntime{note})")
    for n in order:
        w, c = st.median(res[n][0]), st.median(res[n][1])
        print(f"  {n:32s} {w:8.3f} ({w / ow:.3f})     {c:8.3f} ({c / oc:.3f})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="squeezenet,resnet50")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--per-round", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--skip", default="", help="curves or harness: leave that part out")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            path, shapes = engine_model(name, Path(tmp))
            feeds = random_inputs(path, shapes)
            for t in [int(x) for x in a.threads.split(",")]:
                b = compile_model(path, Path(tmp) / f"{name}-t{t}", threads=t, build=True,
                                  input_shapes={k: list(v.shape) for k, v in feeds.items()})
                bench = b.binaries["bench"]
                if a.skip != "curves":
                    print(f"{name}, {t} thread(s), {a.procs} fresh processes x {a.runs} runs (load {load()}):")
                    curves(bench, t, a.procs, a.runs)
                if a.skip != "harness":
                    print(f"{name}, {t} thread(s), harness: {a.rounds} rounds x ({a.warmup} warm-up + {a.per_round}) "
                          f"runs (load {load()}):")
                    harness(bench, path, feeds, t, a.rounds, a.per_round, a.warmup)
                    print(f"  load at the end {load()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
