"""NCHW vs channel-blocked (NCHWc) layout, same model, same run: CPU time per inference and where it goes.

    python benchmarks/bench_layout.py [--models ppocr-cls,shufflenet] [--layouts nchw,auto,nchwc] [--runs 200]

Each layout's build (EDGEC_LAYOUT, CompileOptions.layout) runs single-threaded in --rounds interleaved rounds;
its time per inference is the process CPU time (user + sys, getrusage of the child) of --runs runs minus that
of one run, over --runs - 1: on a shared host this counts only the cycles the model got, not the waits. The
per-op split (reorders, depthwise, GEMM-path and blocked 1x1 convs, channel shuffles as Transpose or
ChannelShuffle layers, the rest) comes from a PROFILE=1 build's per-layer medians (wall)."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_models import MODELS  # noqa: E402

from edgec.codegen import compile_model  # noqa: E402
from edgec.codegen.options import CompileOptions  # noqa: E402


def cpu_ms(binary: Path, runs: int) -> float:
    """Child CPU time of one bench process running `runs` inferences (after its warmup)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([str(binary), "--runs", str(runs), "--warmup", "3", "--threads", "1"], check=True,
                   capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return 1e3 * (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def split(binary: Path) -> dict:
    out = json.loads(subprocess.run([str(binary), "--runs", "30", "--warmup", "3", "--threads", "1"], check=True,
                                    capture_output=True, text=True).stdout)
    parts = {"reorder": 0.0, "dwconv": 0.0, "gemm/1x1": 0.0, "shuffle": 0.0, "other": 0.0}
    for layer in out["layers"]:
        a = layer["algo"]
        key = ("reorder" if a.startswith("reorder") else "dwconv" if a.startswith("dwconv")
               else "gemm/1x1" if "1x1" in a or a.startswith("gemm")
               else "shuffle" if a.startswith(("shuffle", "transpose")) else "other")
        parts[key] += layer["ms"]
    return parts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="ppocr-cls,shufflenet")
    ap.add_argument("--layouts", default="nchw,auto,nchwc")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--target", default="native")
    args = ap.parse_args()
    layouts = args.layouts.split(",")
    print(f"load {os.getloadavg()[0]:.2f} (1 min)")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            fetch, shapes = MODELS[name]
            path = Path(fetch())
            bins, profs = {}, {}
            for lay in layouts:
                opts = CompileOptions.from_env(target=args.target, layout=lay)
                b = compile_model(path, Path(tmp) / f"{name}-{lay}", input_shapes=shapes, options=opts, build=True)
                bins[lay] = b.binaries["bench"]
                p = compile_model(path, Path(tmp) / f"{name}-{lay}-prof", input_shapes=shapes, options=opts,
                                  build=True, profile=True)
                profs[lay] = p.binaries["bench"]
            per: dict[str, list[float]] = {lay: [] for lay in layouts}
            for r in range(args.rounds):
                order = layouts[r % len(layouts):] + layouts[:r % len(layouts)]
                for lay in order:
                    per[lay].append((cpu_ms(bins[lay], args.runs) - cpu_ms(bins[lay], 1)) / (args.runs - 1))
            base = sorted(per[layouts[0]])[len(per[layouts[0]]) // 2]
            for lay in layouts:
                med = sorted(per[lay])[len(per[lay]) // 2]
                parts = split(profs[lay])
                detail = ", ".join(f"{k} {v:.3f}" for k, v in parts.items())
                print(f"{name:12s} {lay:6s} {med:.3f} ms CPU/inference ({med / base:.2f}x {layouts[0]}); "
                      f"profiled ms: {detail}")
    print(f"load {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
