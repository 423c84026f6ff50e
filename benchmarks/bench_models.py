"""edgec's compiled models vs onnxruntime on this machine, same run, 1 and 2 threads.

    python benchmarks/bench_models.py [--runs 50] [--models ppocr-cls,digits-cnn,squeezenet,shufflenet,resnet50]

Prints median ms per model and thread count, and the ratio edgec / onnxruntime (lower is better; the goal for
single-thread latency is <= 1.5).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import median, random_inputs, time_edgec, time_onnxruntime  # noqa: E402

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--target", default="native")
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    print("| model | threads | edgec ms | onnxruntime ms | edgec/ort | arena KB (naive KB) |")
    print("|---|---|---|---|---|---|")
    for name in args.models.split(","):
        for r in bench_one(name, args.runs, args.warmup, threads, args.target):
            print(f"| {r['model']} | {r['threads']} | {r['edgec_ms']:.3f} | {r['ort_ms']:.3f} | {r['ratio']:.2f} | "
                  f"{r['arena_kb']:.0f} ({r['naive_kb']:.0f}) |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
