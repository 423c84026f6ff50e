"""Depthwise convs per layer: edgec against every other engine on the shapes real models have, same run.

    python benchmarks/bench_depthwise.py [--sets mnv2,ppocr,shufflenet,chain] [--threads 1,2] [--runs 40]
        [--engines edgec,onnxruntime,openvino,ncnn,mnn] [--only 144ch@56] [--variants] [--md]

Each case is a small ONNX model built here with onnx.helper (random weights, fixed seed): one depthwise conv +
bias + ReLU or HardSwish, or a chain depthwise -> 1x1 -> depthwise (each with bias and activation), which edgec may
run in its channel-blocked layout (codegen/layout.py). The shapes: MobileNetV2's depthwise layers (mnv2), and those
of the real ppocr cls and ShuffleNet models (read from edgec.zoo's files with their shapes inferred; duplicates
dropped). Every engine's output is first held against onnxruntime's (benchmarks/engines.py check); the engines
that match are timed in --rounds interleaved rounds (each engine in turn, the order rotating) and the median ms per
case, thread count and engine is printed with edgec's ratio to the fastest other engine (target <= 1.0) and the
kernel edgec chose for each depthwise layer (its --explain algo: dwconv-<tile>-<isa> for the NCHW plane kernels,
dwconv-c<lanes> for the channel-blocked one, nchwc-dw for the blocked layout's). A missing engine is skipped with
its reason. edgec is timed by its generated bench program (no Python in the loop); the Python engines include
their per-call overhead, which on the smallest layers (a few us) is part of what a caller pays.

--variants adds edgec forced to the NCHW layout with the plane kernels (edgec:plane), with the channel-blocked
NCHW kernel (edgec:cb), and to the blocked layout (edgec:nchwc): not engines, they are left out of the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import random_inputs  # noqa: E402

OPSET = 17


@dataclass(frozen=True)
class Case:
    set: str
    label: str
    C: int
    H: int
    W: int
    k: int
    stride: tuple[int, int]
    act: str = "relu"     # relu | hardswish
    chain: bool = False   # dw(k, stride) -> 1x1 C->C -> dw(k, 1)

    @property
    def name(self) -> str:
        s = f"s{self.stride[0]}" if self.stride[0] == self.stride[1] else f"s{self.stride[0]}x{self.stride[1]}"
        kind = "dw-1x1-dw" if self.chain else "dw"
        return f"{self.set} {kind} {self.k}x{self.k} {s} {self.C}ch@{self.H}x{self.W} {self.act}"


MNV2 = [(32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1), (192, 28, 2), (384, 14, 1),
        (576, 14, 1), (576, 14, 2), (960, 7, 1)]


def mnv2_cases() -> list[Case]:
    return [Case("mnv2", f"{c}ch@{h}", c, h, h, 3, (s, s)) for c, h, s in MNV2]


def model_cases(setname: str) -> list[Case]:
    """The depthwise convs of a real model (input shape, window, strides, activation after it), deduplicated."""
    from onnx import helper

    from edgec import zoo
    from edgec.model import load_model, tensor_shapes
    if setname == "ppocr":
        path, shapes = zoo.ppocr_cls(), {"x": [1, 3, 48, 192]}
    else:
        path, shapes = zoo.onnx_light("shufflenet"), None
    m = load_model(path, shapes)
    ts = tensor_shapes(m)
    consumers: dict[str, list] = {}
    for n in m.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    seen, out = set(), []
    for n in m.graph.node:
        if n.op_type != "Conv":
            continue
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        _, c, h, w = ts[n.input[0]].shape
        ks = list(a.get("kernel_shape", [1, 1]))
        if a.get("group", 1) != c or c == 1 or ks[0] != ks[1]:
            continue
        nxt = consumers.get(n.output[0], [])
        act = "hardswish" if nxt and nxt[0].op_type in ("HardSwish", "HardSigmoid") else "relu"
        st = tuple(a.get("strides", [1, 1]))
        key = (c, h, w, ks[0], st, act)
        if key in seen:
            continue
        seen.add(key)
        out.append(Case(setname, f"{c}ch@{h}x{w}", c, h, w, ks[0], st, act))
    return out


def chain_cases() -> list[Case]:
    """dw -> 1x1 -> dw on MobileNetV2 / ShuffleNet / ppocr sizes: what the blocked layout is for."""
    return [Case("chain", "144ch@56", 144, 56, 56, 3, (1, 1), chain=True),
            Case("chain", "576ch@14", 576, 14, 14, 3, (1, 1), chain=True),
            Case("chain", "960ch@7", 960, 7, 7, 3, (1, 1), chain=True),
            Case("chain", "88ch@3x96", 88, 3, 96, 5, (1, 1), "hardswish", chain=True)]


SETS = {"mnv2": mnv2_cases, "ppocr": lambda: model_cases("ppocr"), "shufflenet": lambda: model_cases("shufflenet"),
        "chain": chain_cases}


def build_model(case: Case, path: Path, seed: int = 0) -> Path:
    """The case as an ONNX file: input x [1, C, H, W], weights He-scaled so activations stay O(1)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    k, p = case.k, case.k // 2

    def conv(x: str, name: str, kk: int, stride, group: int) -> str:
        w = rng.standard_normal((case.C, case.C // group, kk, kk)).astype(np.float32)
        w *= np.float32(np.sqrt(2.0 / (kk * kk * case.C // group)))
        b = (0.1 * rng.standard_normal(case.C)).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, f"{name}_w"), numpy_helper.from_array(b, f"{name}_b")])
        pp = kk // 2
        nodes.append(helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_y"], name=name,
                                      kernel_shape=[kk, kk], strides=list(stride), pads=[pp, pp, pp, pp],
                                      group=group))
        op = "HardSwish" if case.act == "hardswish" else "Relu"
        nodes.append(helper.make_node(op, [f"{name}_y"], [f"{name}_a"], name=f"{name}_act"))
        return f"{name}_a"

    y = conv("x", "dw1", k, case.stride, case.C)
    if case.chain:
        y = conv(y, "pw", 1, (1, 1), 1)
        y = conv(y, "dw2", k, (1, 1), case.C)
    ho = (case.H + 2 * p - k) // case.stride[0] + 1
    wo = (case.W + 2 * p - k) // case.stride[1] + 1
    graph = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, case.C, case.H, case.W])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, case.C, ho, wo])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="bench_depthwise")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


class EdgecVariant:
    """edgec with forced compile options (layout, dw family), recording each layer's algo."""

    def __init__(self, name: str, target: str, **forced):
        self.name, self.target, self.forced = name, target, forced
        self.algos: dict[int, str] = {}

    def missing(self):
        return None

    def version(self):
        import edgec
        return edgec.__version__

    def prepare(self, model, feeds, threads, work):
        from common import time_edgec
        from engines import EngineError, Runner

        from edgec.codegen import compile_model
        from edgec.codegen.options import CompileOptions
        from edgec.codegen.targets import get_target
        from edgec.codegen.verifier import run_binary
        opts = CompileOptions.from_env(target=self.target, threads=threads, **self.forced)
        shapes = {k: list(v.shape) for k, v in feeds.items()}
        build = compile_model(model, work / "edgec", input_shapes=shapes, options=opts, build=True)
        tgt = get_target(self.target)
        if not tgt.runs_natively():
            raise EngineError(f"target {self.target} does not run on this machine")
        self.algos[threads] = ", ".join(layer["algo"] for layer in build.layers)
        bench = build.binaries["bench"]

        def outputs():
            return run_binary(build.binaries["runner"], tgt, list(feeds.values()), work / "edgec-run", threads=threads)

        return Runner(outputs=outputs, step=lambda: None,
                      timer=lambda runs, warmup: time_edgec(bench, threads, runs, warmup)["runs_ms"])


def run_case(case: Case, engines: list, threads_list: list[int], runs: int, rounds: int, warmup: int, tol: float,
             tmp: Path, out=print) -> list[dict]:
    from engines import compare, fastest_other, paired_ratios
    tag = case.name.replace(" ", "_").replace("@", "at")
    path = build_model(case, tmp / f"{tag}.onnx")
    feeds = random_inputs(path)
    rows = []
    for r in compare(case.name, path, feeds, engines, threads_list, runs, rounds, warmup, tol, tmp, out, pause=0.02):
        t, ms = r["threads"], r["ms"]
        ratio, verdict = fastest_other(ms)
        algo = next((e.algos.get(t, "") for e in engines if e.name == "edgec"), "")
        paired = sorted(paired_ratios(r["rounds_ms"]))
        row = {"case": case, "threads": t, "ms": ms, "status": r["status"], "ratio": ratio, "verdict": verdict,
               "paired": f"{paired[len(paired) // 2]:.2f} ({paired[0]:.2f}-{paired[-1]:.2f})" if paired else "-",
               "algo": algo, "variants": {e.name: e.algos.get(t, "") for e in engines
                                          if e.name.startswith("edgec:")}}
        out(f"{case.name}, {t} thread(s): " + ", ".join(f"{n} {ms[n]:.4f} ms" for n in ms)
            + (f" -> {verdict}" if verdict else "") + (f"; per round {row['paired']}" if paired else "")
            + (f"  [edgec: {algo}]" if algo else ""), flush=True)
        rows.append(row)
    return rows


def md_table(rows: list[dict], names: list[str]) -> list[str]:
    lines = ["| layer | thr | " + " | ".join(names) + " | edgec / fastest other | per round: median (range) | "
             "edgec's kernel |",
             "|---|---|" + "---|" * len(names) + "---|---|---|"]
    for r in rows:
        cells = [f"{r['ms'][n]:.4f}" if n in r["ms"] else r["status"].get(n, "-") for n in names]
        real = {n: v for n, v in r["ms"].items() if not n.startswith("edgec:")}
        if real:
            f = min(real, key=real.get)
            cells[names.index(f)] = f"**{cells[names.index(f)]}**"
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        lines.append(f"| {r['case'].name} | {r['threads']} | " + " | ".join(cells) + f" | {ratio} | {r['paired']} | "
                     f"{r['algo']} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--only", default="", help="comma list of substrings: run only the cases whose name has one")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--target", default="native")
    ap.add_argument("--engines", default="all", help="comma list of edgec,onnxruntime,openvino,ncnn,mnn (all: every "
                    "installed one)")
    ap.add_argument("--variants", action="store_true", help="also time edgec forced to plane / cb / nchwc")
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--md", action="store_true", help="also print a markdown table at the end")
    args = ap.parse_args()
    from engines import ENGINES
    wanted = list(ENGINES) if args.engines == "all" else [n.strip() for n in args.engines.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in ENGINES]
    bad_sets = [s for s in args.sets.split(",") if s not in SETS]
    if unknown or bad_sets:
        what = f"engine {unknown[0]!r}; known: {', '.join(ENGINES)}" if unknown else \
            f"set {bad_sets[0]!r}; known: {', '.join(SETS)}"
        print(f"unknown {what}", file=sys.stderr)
        return 2
    engines = []
    for n in wanted:
        e = EdgecVariant("edgec", args.target) if n == "edgec" else ENGINES[n]()
        why = e.missing()
        if why:
            print(f"skipped {n}: {why}")
        else:
            engines.append(e)
    if args.variants:
        engines += [EdgecVariant("edgec:plane", args.target, layout="nchw", dw="plane"),
                    EdgecVariant("edgec:cb", args.target, layout="nchw", dw="cb"),
                    EdgecVariant("edgec:nchwc", args.target, layout="nchwc")]
    if not engines:
        print("no engine to run", file=sys.stderr)
        return 2
    print("engines: " + ", ".join(f"{e.name} {e.version()}" for e in engines if not e.name.startswith("edgec:")))
    cases = [c for s in args.sets.split(",") for c in SETS[s]()]
    if args.only:
        keys = [k.strip() for k in args.only.split(",") if k.strip()]
        cases = [c for c in cases if any(k in c.name for k in keys)]
    threads = [int(t) for t in args.threads.split(",")]
    print(f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases:
            rows += run_case(c, engines, threads, args.runs, args.rounds, args.warmup, args.tol, Path(tmp))
    print(f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    met = [r for r in rows if r["ratio"] is not None and r["ratio"] <= 1.0]
    timed = [r for r in rows if r["ratio"] is not None]
    print(f"edgec <= 1.0x the fastest other engine on {len(met)} of {len(timed)} (layer, threads) pairs")
    if args.md:
        print()
        print("\n".join(md_table(rows, [e.name for e in engines])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
