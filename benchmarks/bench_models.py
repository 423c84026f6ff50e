"""edgec's compiled models vs onnxruntime on this machine, same run, 1 and 2 threads.

    python benchmarks/bench_models.py [--runs 50] [--models ppocr-cls,digits-cnn,squeezenet,shufflenet,resnet50]

Prints median wall-clock ms per inference per model and thread count, and the ratio edgec / onnxruntime (lower is
better; the goal for single-thread latency is <= 1.5). Each side is warmed up for at least --warmup runs and 250 ms
first (edgec in a fresh bench process, onnxruntime in a fresh session).

    python benchmarks/bench_models.py --engines [edgec,onnxruntime,openvino,ncnn,mnn] --threads 1,2 --runs 30 --md

With --engines (no list: every engine installed here; the others come from `pip install -e .[bench]`), each model
runs on every named engine: each engine's output is first held against onnxruntime's (max abs error, top-1), one
that does not match is reported as "wrong output" and not timed; the rest are timed in --rounds interleaved rounds
(each engine in turn, the order rotating, so drift on a shared host hits all alike, --warmup runs before each
share, and at least 20 ms of them), and the median wall-clock ms per inference per engine and edgec against the fastest
other engine are printed, with that ratio taken round by round as well (each round's medians; the median and range
over the rounds, of the rounds' medians and of their fastest runs): on a shared host a slow spell slows every engine
in a round, so the per-round ratio is the steadier figure when the engines' times swing from round to round; a spell
shorter than a round can still cover one engine's share, which that share's fastest run shows least. Where the
cores run at different speeds (a virtual machine whose vCPUs share physical cores with others), edgec's bench
process and the engines in this process may sit on different cores: pin one-thread comparisons to one core,
`taskset -c 0 python benchmarks/bench_models.py --threads 1 ...` (every thread and child process inherits it). Every engine keeps one warm process across the rounds: edgec's generated bench program runs as one
`bench --serve` child, the others inside this Python process. The onnx light models get random weights there (their
ConstantOfShape weights make every output identical, so a wrong conversion could not show). --models also takes
dense3x3 (bench_gspc.py's 4 x conv3x3+ReLU stack, 128 ch, 28x28, g=1).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (WARMUP_MS, median, random_inputs, time_edgec, time_onnxruntime,  # noqa: E402
                    without_initializer_inputs)

from edgec import zoo  # noqa: E402
from edgec.codegen import compile_model  # noqa: E402

MODELS = {
    "ppocr-cls": (zoo.ppocr_cls, {"x": [1, 3, 48, 192]}),
    "digits-cnn": (lambda: zoo.digits_cnn().model, None),
    "squeezenet": (lambda: zoo.onnx_light("squeezenet"), None),
    "shufflenet": (lambda: zoo.onnx_light("shufflenet"), None),
    "resnet50": (lambda: zoo.onnx_light("resnet50"), None),
}


def bench_one(name: str, runs: int, warmup: int, threads_list: list[int], target: str) -> list[dict]:
    fetch, shapes = MODELS[name]
    path = Path(fetch())
    feeds = random_inputs(path, shapes)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for threads in threads_list:
            build = compile_model(path, Path(tmp) / f"t{threads}", target=target, threads=threads,
                                  input_shapes=shapes, build=True)
            ours = time_edgec(build.binaries["bench"], threads, runs, warmup)
            theirs = time_onnxruntime(path, feeds, threads, runs, warmup)
            e, o = median(ours["runs_ms"]), median(theirs)
            rows.append({"model": name, "threads": threads, "edgec_ms": e, "ort_ms": o, "ratio": e / o,
                         "arena_kb": build.arena_bytes / 1024, "naive_kb": build.naive_bytes / 1024})
    return rows


# only in --engines runs: not part of the default model list
EXTRA_MODELS = {"dense3x3": "4 x conv3x3+ReLU, 128 ch, 28x28, g=1"}


def engine_model(name: str, tmp: Path) -> tuple[Path, dict | None]:
    """The model file every engine gets for `name`, and its input shapes."""
    if name == "dense3x3":
        from bench_gspc import stack_model
        return stack_model(tmp / "dense3x3.onnx", 128, 28, 1, 1, 4), None
    fetch, shapes = MODELS[name]
    path = Path(fetch())
    if name in ("squeezenet", "shufflenet", "resnet50"):
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "codegen"))
        from test_e2e import randomized
        path = randomized(path, tmp / f"{name}-random.onnx")
    return without_initializer_inputs(path, tmp / f"{name}.onnx"), shapes


def bench_engines(name: str, engines: list, threads_list: list[int], runs: int, rounds: int, warmup: int,
                  tol: float, tmp: Path, out=print) -> list[dict]:
    """Per thread count: check every engine against onnxruntime, then time the good ones in interleaved rounds."""
    from engines import compare, fastest_other, paired_ratios, spread
    path, shapes = engine_model(name, tmp)
    feeds = random_inputs(path, shapes)
    rows = []
    for r in compare(name, path, feeds, engines, threads_list, runs, rounds, warmup, tol, tmp, out, announce=True):
        ms = r["ms"]
        row = {"model": name, "threads": r["threads"], "ms": ms, "status": r["status"], "verdict": fastest_other(ms)[1],
               "paired": spread(paired_ratios(r["rounds_ms"])), "paired_best": spread(paired_ratios(r["rounds_best"]))}
        out(f"{name}, {r['threads']} thread(s): " + ", ".join(f"{n} {ms[n]:.3f} ms" for n in ms)
            + (f" -> {row['verdict']}" if row["verdict"] else "")
            + (f"; per round edgec / fastest other {row['paired']}, of the fastest runs {row['paired_best']}"
               if row["paired"] else ""), flush=True)
        rows.append(row)
    return rows


def md_table(rows: list[dict], names: list[str]) -> list[str]:
    lines = ["| model | threads | " + " | ".join(f"{n} ms" for n in names)
             + " | edgec vs the fastest other | per round: edgec / fastest other, median (range) "
             "| the same of the rounds' fastest runs |",
             "|---|---|" + "---|" * len(names) + "---|---|---|"]
    for r in rows:
        cells = [f"{r['ms'][n]:.3f}" if n in r["ms"] else r["status"].get(n, "-") for n in names]
        best = {n: v for n, v in r["ms"].items()}
        if best:
            fastest = min(best, key=best.get)
            cells[names.index(fastest)] = f"**{cells[names.index(fastest)]}**"
        label = EXTRA_MODELS.get(r["model"], r["model"])
        lines.append(f"| {label} | {r['threads']} | " + " | ".join(cells) + f" | {r['verdict'] or '-'} | "
                     f"{r.get('paired') or '-'} | {r.get('paired_best') or '-'} |")
    return lines


def engines_main(args, threads: list[int]) -> int:
    from engines import ENGINES, WARM_MS
    wanted = list(ENGINES) if args.engines == "all" else [n.strip() for n in args.engines.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in ENGINES]
    if unknown:
        print(f"unknown engine {unknown[0]!r}; known: {', '.join(ENGINES)}", file=sys.stderr)
        return 2
    models = [m for m in args.models.split(",") if m]
    bad = [m for m in models if m not in MODELS and m not in EXTRA_MODELS]
    if bad:
        print(f"unknown model {bad[0]!r}; known: {', '.join([*MODELS, *EXTRA_MODELS])}", file=sys.stderr)
        return 2
    engines = []
    for n in wanted:
        e = ENGINES[n](target=args.target) if n == "edgec" else ENGINES[n]()
        why = e.missing()
        if why:
            print(f"skipped {n}: {why}")
        else:
            engines.append(e)
    if not engines:
        print("no engine to run", file=sys.stderr)
        return 2
    print("engines: " + ", ".join(f"{e.name} {e.version()}" for e in engines))
    warmup = 3 if args.warmup is None else args.warmup
    print(f"times: median wall-clock ms per inference over {args.runs} runs in {args.rounds} interleaved rounds, "
          f"at least {warmup} warm-up runs and {WARM_MS:g} ms before each engine's share; each engine in one warm "
          "process (edgec: bench --serve)")
    with open("/proc/loadavg") as f:
        print(f"load average at the start: {' '.join(f.read().split()[:3])}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in models:
            rows += bench_engines(name, engines, threads, args.runs, args.rounds, warmup, args.tol, Path(tmp))
    if args.md:
        print()
        print("\n".join(md_table(rows, [e.name for e in engines])))
    with open("/proc/loadavg") as f:
        print(f"load average at the end: {' '.join(f.read().split()[:3])}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=None,
                    help="warm-up runs (default 5, and at least 250 ms; with --engines 3, before each engine's "
                         "share of every round)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--target", default="native")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--engines", nargs="?", const="all", default=None,
                    help="compare engines (comma list of edgec,onnxruntime,openvino,ncnn,mnn; alone: all installed)")
    ap.add_argument("--rounds", type=int, default=5, help="with --engines: interleaved rounds (runs split among them)")
    ap.add_argument("--tol", type=float, default=1e-3,
                    help="with --engines: max abs error allowed vs onnxruntime, times max(1, |output|max)")
    ap.add_argument("--md", action="store_true", help="with --engines: also print a markdown table at the end")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    if args.engines is not None:
        return engines_main(args, threads)
    warmup = 5 if args.warmup is None else args.warmup
    print(f"median wall-clock ms per inference over {args.runs} runs, each after at least {warmup} warm-up runs and "
          f"{WARMUP_MS:g} ms (edgec: a fresh bench process; onnxruntime: a fresh session)")
    print("| model | threads | edgec ms | onnxruntime ms | edgec/ort | arena KB (naive KB) |")
    print("|---|---|---|---|---|---|")
    speedups = []
    for name in args.models.split(","):
        rows = bench_one(name, args.runs, warmup, threads, args.target)
        for r in rows:
            print(f"| {r['model']} | {r['threads']} | {r['edgec_ms']:.3f} | {r['ort_ms']:.3f} | {r['ratio']:.2f} | "
                  f"{r['arena_kb']:.0f} ({r['naive_kb']:.0f}) |", flush=True)
        one = next((r for r in rows if r["threads"] == 1), None)
        speedups += [(name, r["threads"], one["edgec_ms"] / r["edgec_ms"], one["ort_ms"] / r["ort_ms"])
                     for r in rows if one is not None and r["threads"] > 1]
    for name, t, e, o in speedups:  # thread scaling: time at 1 thread / time at t threads
        print(f"{name}: 1 -> {t} threads speedup edgec {e:.2f}x, onnxruntime {o:.2f}x")
    with open("/proc/loadavg") as f:
        print(f"load average at the end: {' '.join(f.read().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
