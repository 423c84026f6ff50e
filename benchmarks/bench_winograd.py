"""Winograd vs direct 3x3 convs: time (edgec direct, edgec F(m,3), onnxruntime; 1 thread, same run) and
error (each F against onnxruntime and against edgec's direct kernels) on the dense 3x3 stack of
bench_gspc.py (4 x conv3x3 + ReLU, 128 ch, 28x28, g=1) and ResNet-50 (the onnx wheel's light model,
random variance-preserving weights as in tests/codegen/test_e2e.py), plus the trained PP-OCR classifier.

    python benchmarks/bench_winograd.py --runs 60 --rounds 5 --md
    python benchmarks/bench_winograd.py --errors-only
    python benchmarks/bench_winograd.py --split --md   # one layer's phases in thread CPU time vs ideals
    python benchmarks/bench_winograd.py --split --against OLD/runtime_c --rounds 5 --md   # phases, A/B

Times are medians over rounds of medians (the host may be shared); ratios are what to read.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "codegen"))

from bench_gspc import stack_model  # noqa: E402
from common import median, random_inputs, time_edgec, time_onnxruntime  # noqa: E402

from edgec import zoo  # noqa: E402
from edgec.codegen import build_project, compile_model  # noqa: E402
from edgec.codegen.options import CompileOptions  # noqa: E402
from edgec.codegen.verifier import onnxruntime_outputs, run_binary  # noqa: E402

MODES = ("direct", "winograd-f23", "winograd-f43", "winograd-f63", "auto")


def models(tmp: Path) -> dict:
    from test_e2e import randomized

    out = {"stack 4x conv3x3 128ch 28x28": (stack_model(tmp / "stack.onnx", 128, 28, 1, 1, 4), None),
           "ResNet-50 (random weights)": (randomized(zoo.onnx_light("resnet50"), tmp / "r50.onnx"), None)}
    try:
        out["PP-OCR cls (trained)"] = (zoo.ppocr_cls(), {"x": [1, 3, 48, 192]})
    except Exception as e:  # noqa: BLE001 - the registry may be unreachable: time the others
        print(f"# ppocr-cls skipped: {e}", file=sys.stderr)
    return out


# --split: (name, C = K, H = W) of 3x3 pad-1 layers
SPLIT = [("dense3x3 layer 128ch 28x28", 128, 28), ("ResNet-50 64ch 56x56", 64, 56), ("ResNet-50 256ch 14x14", 256, 14),
         ("ResNet-50 512ch 7x7", 512, 7)]


def split_run(tmp: Path, md: bool, modes=("winograd-f43", "winograd-f63", "winograd-f23"), against: Path | None = None,
              rounds: int = 5) -> None:
    """Each F(m,3) on one layer with the emitter's blocking (one thread), its phases timed apart in thread CPU
    time (best of 15): against their ideals, the GEMMs' useful FLOPs (the unpadded alpha^2 x K x C x tiles
    multiply-adds) at the FMA peak measured in the same run, the transforms at the speed of a memcpy of the
    bytes they write (V: alpha^2 x C x tiles floats; the output map), also measured in the run.
    With `against` (another runtime_c directory, e.g. `git archive REV runtime_c | tar -x -C DIR`): both
    builds of each layer in alternating rounds, the median of `rounds` per phase, A (against) then B (this tree)."""
    from bench_gemm import build_peak, fma_peak, host

    from edgec.codegen import kernels
    from edgec.codegen.ops import winograd
    from edgec.codegen.targets import get_target
    from edgec.runtime_c import root as runtime_root

    target = get_target("native")
    peak = fma_peak(build_peak(tmp, target), 1, target)
    print(f"# host: {host()}, {target.name}, L1d {target.l1d_bytes >> 10} KB, L2 {target.l2_bytes >> 10} KB, 1 thread; "
          f"load {open('/proc/loadavg').read().split()[0]}; measured FMA peak {peak:.1f} GFLOP/s")
    roots = {"B": runtime_root()} if against is None else {"A": Path(against).resolve(), "B": runtime_root()}
    gk = kernels.gemm_kernel(target)
    mr, nr = gk.params["mr"], gk.params["nr"]
    cases, exes = [], {}
    for name, c, hw in SPLIT:
        g = dict(N=1, C=c, H=hw, W=hw, K=c, Ho=hw, Wo=hw, G=1)
        for mode in modes:
            m = int(mode[len("winograd-f")])
            wk = kernels.winograd_kernel(target, m)
            b = winograd.blocking(target, g, m, mr, nr, 1)
            defs = dict(XC=c, XK=c, XH=hw, XW=hw, XM=m, XTB=b["TB"], XKB=b["KB"], XKC=b["KC"], XMR=mr, XNR=nr,
                        XTA=winograd.tile_unit(mr, nr), XNRV=gk.params["vl"], XNRH=gk.params.get("hv", 0), XUK=gk.name, XIN=wk.params["in"],
                        XOUT=wk.params["out"])
            cases.append((name, c, hw, m, b))
            for key, rt in roots.items():
                exe = tmp / f"wsplit-{c}-{hw}-{m}-{key}"
                srcs = [Path(__file__).resolve().parent / "c" / "f32_winograd_split.c", rt / gk.file, rt / wk.file,
                        rt / "ec_threadpool.c"]
                subprocess.run([target.cc, "-O3", "-std=c11", *target.cflags, f"-I{rt}",
                                f"-I{Path(__file__).resolve().parent / 'c'}", *(f"-D{k}={v}" for k, v in defs.items()),
                                *map(str, srcs), "-o", str(exe), "-lm", "-lpthread"], check=True)
                exes[(c, hw, m, key)] = exe
    res: dict = {}
    for _ in range(rounds if against is not None else 1):
        for c, hw, m, key in exes:  # alternating: a busy spell hits both builds
            out = subprocess.run([str(exes[(c, hw, m, key)])], capture_output=True, text=True, check=True).stdout
            res.setdefault((c, hw, m, key), []).append(list(map(float, out.split())))
    if against is not None:
        head = ["layer", "F", "pack A -> B ms", "in A -> B", "GEMM A -> B", "out A -> B", "total A -> B", "B / A"]
        print(f"# A: {roots['A']}, B: {roots['B']}; median of {rounds} alternating rounds; load now "
              f"{open('/proc/loadavg').read().split()[0]}")
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head) if md else "  ".join(head))
        for name, c, hw, m, b in cases:
            ph = {k: [median([r[i] for r in res[(c, hw, m, k)]]) for i in range(4)] for k in "AB"}
            row = [name, f"F({m},3)", *(f"{ph['A'][i]:.3f} -> {ph['B'][i]:.3f}" for i in range(4)),
                   f"{sum(ph['A']):.3f} -> {sum(ph['B']):.3f}", f"{sum(ph['B']) / sum(ph['A']):.3f}"]
            print(("| " + " | ".join(row) + " |") if md else "  ".join(row))
        return
    head = ["layer", "F", "TB x KB", "pack ms", "in ms", "GEMM ms", "out ms", "total ms", "GEMM % peak (useful)",
            "in / memcpy", "out / memcpy", "GEMM share"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head) if md else "  ".join(head))
    for name, c, hw, m, b in cases:
        pack, tin, gemm, tout, cin, cout = res[(c, hw, m, "B")][0]
        tiles = (-(-hw // m)) ** 2
        flops = 2 * (m + 2) ** 2 * c * c * tiles
        total = pack + tin + gemm + tout
        row = [name, f"F({m},3)", f"{b['TB']} x {b['KB']}", f"{pack:.3f}", f"{tin:.3f}", f"{gemm:.3f}",
               f"{tout:.3f}", f"{total:.3f}", f"{100 * flops / gemm / 1e6 / peak:.0f}%", f"{tin / cin:.1f}x",
               f"{tout / cout:.1f}x", f"{100 * gemm / total:.0f}%"]
        print(("| " + " | ".join(row) + " |") if md else "  ".join(row))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median of their medians")
    ap.add_argument("--errors-only", action="store_true")
    ap.add_argument("--md", action="store_true")
    ap.add_argument("--split", action="store_true", help="one layer per shape: phases in thread CPU time vs ideals")
    ap.add_argument("--against", type=Path, help="--split: A/B against another runtime_c directory (alternating rounds)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if a.split:
            split_run(tmp, a.md, against=a.against, rounds=a.rounds)
            return 0
        for name, (path, shapes) in models(tmp).items():
            feeds = random_inputs(path, shapes, seed=1)
            _, want = onnxruntime_outputs(path, feeds)
            want = want[0].astype(np.float64)
            scale = float(np.max(np.abs(want)))
            bins, outs, algos = {}, {}, {}
            for mode in MODES:
                b = compile_model(path, tmp / f"{name[:6]}-{mode}", input_shapes=shapes,
                                  options=CompileOptions(conv=mode))
                algos[mode] = sorted({l["algo"].rsplit("-", 2)[0] for l in b.layers if l["op"] == "Conv"})
                bins[mode] = build_project(b.dir, b.target, jobs=2)
                outs[mode] = run_binary(bins[mode]["runner"], b.target, list(feeds.values()),
                                        tmp / f"run-{name[:6]}-{mode}")[0].astype(np.float64)
            print(f"# {name}: max |ort output| {scale:.3g}")
            head = ["mode", "conv algos", "max abs err vs ort", "/ max |out|", "max abs vs edgec direct"]
            if a.md:
                print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
            for mode in MODES:
                e = float(np.max(np.abs(outs[mode] - want)))
                ed = float(np.max(np.abs(outs[mode] - outs["direct"])))
                row = [mode, " ".join(algos[mode]), f"{e:.2e}", f"{e / scale:.2e}", f"{ed:.2e}"]
                print(("| " + " | ".join(row) + " |") if a.md else "  ".join(row))
            if a.errors_only:
                continue
            times = {m: [] for m in (*MODES, "onnxruntime")}
            for _ in range(a.rounds):  # interleaved, so a busy spell hits every column
                for mode in MODES:
                    times[mode].append(median(time_edgec(bins[mode]["bench"], 1, a.runs, a.warmup)["runs_ms"]))
                times["onnxruntime"].append(median(time_onnxruntime(path, feeds, 1, a.runs, a.warmup)))
            med = {m: median(v) for m, v in times.items()}
            head = ["", *med]
            if a.md:
                print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
            print(("| ms (1 thread) | " if a.md else "ms  ") + " | ".join(f"{v:.2f}" for v in med.values())
                  + (" |" if a.md else ""))
            print(("| vs direct | " if a.md else "x   ") + " | ".join(f"{med['direct'] / v:.2f}" for v in med.values())
                  + (" |" if a.md else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
