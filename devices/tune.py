"""`edgec tune`: measure each distinct layer's kernel variants on the device and record the fastest.

For every distinct layer signature of a model (codegen/variants.py), biggest MACs first:
  1. the layer with its fused epilogue is extracted as a one-node ONNX model (its real weights);
  2. for the cost model's pick and every variant that applies, the layer model is compiled with that
     variant forced (a tuning record scoped to the layer), variants giving the same code are dropped,
     and the others go into one measurement program (each build under its own symbol prefix, the
     harness codegen/templates/tune.c), built for the device exactly like `deploy` (cross, native or
     on the board) - one program for consecutive layers up to PROGRAM_CANDIDATES candidates;
  3. it runs once on the device: each candidate writes its output, which is checked against onnxruntime
     on the extracted layer (a wrong candidate is rejected, its time dropped), and all are timed in
     interleaved rounds (warm-up, then timed runs; the median of every run);
  4. the fastest is recorded in the tuning database (devices/tuningdb.py) as soon as the program ran, so an
     interrupted tune keeps what it measured and the next one resumes with the signatures not yet recorded.
A candidate other than the cost model's pick is only recorded when at least MIN_GAIN faster (a cache blocking:
BLK_MIN_GAIN).
The tune ends at the budget and finishes with a whole-model check (Tuner.guard): the tuned and untuned builds
timed interleaved, and unless the tuned one is significantly faster (guard_decision), each record that changes
the model's code timed in the model with and without it; those that do not help are rejected for this model only
(layer times in isolation are a proxy: layers share caches inside a model), and a rejected record's runner-up
gets one check of its own. Then a whole-model bench, untuned vs tuned.

Transfer-tuning (--transfer-only): layers with a record of their exact signature (measured on any model)
reuse it; for the other layers one previously tuned model T is picked by argmax_T sum_c P_c^2 sqrt(|W_Tc|)
(P_c: class c's share of this model's MACs, |W_Tc|: T's records of class c), and only the recorded variants
of T's layer of the class nearest in shape (_nearest) that still apply are measured against the cost model's
pick.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from edgec.codegen.options import CompileOptions
from edgec.devices import tuningdb
from edgec.devices.tuningdb import Record, TuningDB
from edgec.errors import EdgecError

# a variant replaces the cost model's pick only at MIN_GAIN (1.03: noise), a blocking at BLK_MIN_GAIN (1.10)
MIN_GAIN, BLK_MIN_GAIN, min_gain = tuningdb.MIN_GAIN, tuningdb.BLK_MIN_GAIN, tuningdb.min_gain
ROUNDS = 3            # interleaved timing rounds over all candidates of a layer, in one program
WARMUP = 2            # untimed runs of a candidate before its timed runs, every round
TARGET_RUN_S = 0.15   # timed runs per candidate in all its rounds: about this long, 10..200 runs
EMULATED_RUNS = 6     # under an emulator: time is the emulator's, a few runs say as much
DEFAULT_BUDGET = 300.0
# full tuning puts consecutive layers' candidates into one measurement program until it holds this many (a region
# has one of its own): each program compiles its harness and, per translation unit, the runtime headers and the
# drivers they define (about 1 s of CPU a unit at -O3 on the 2-core x86 host, a candidate about 0.5 s more), so
# ResNet-50's 27 one-layer programs of 2-7 candidates paid that 27-54 times. An interrupted tune loses the
# program it was in (the records are committed per program)
PROGRAM_CANDIDATES = 12
BUILD_JOBS = 2        # make -j for a measurement program built here (its candidates' files compile side by side)
# a program's candidates are compiled in translation units of several (tune_unit<k>.c, grouped by the runtime
# headers they include: parsing those is most of a candidate file's compile), at most BUILD_JOBS of them. False:
# one object per candidate file, the build before units (benchmarks/bench_tune.py --builds)
UNITS = True
# the whole-model check after the layer search (Tuner.guard): layers timed alone are a proxy (alone, a layer's
# weights stay in the caches from run to run; inside the model its neighbours evict them: mnv2g8's F(4,3) on
# 576ch 7x7 g8, 6 MB of transformed weights, ran 0.33 ms alone and about 0.67 ms in the model)
# interleaved rounds, each build's runs back to back, the order alternating round by round. Each round is a new
# process of each build, and processes differ more than runs: one build raced against itself gave medians
# 0.934-1.049 in 7 rounds of 0.1 s, 0.989-1.018 in 15 of 0.05 s (three races each, mnv2g8, load 2.6)
GUARD_ROUNDS = 15
GUARD_RUN_S = 0.05    # timed runs per build and round: about this long, 3..50
# the decision on the rounds' ratios (guard_decision): their median's distribution-free interval (order
# statistics: how many rounds fall below the true median is Binomial(n, 1/2)) of at least this confidence. A gain
# is kept, a loss rejected only where the interval excludes 1: a fixed threshold on the median rejected every
# item of every run on the shared host, whose processes of one binary ran at about 8.5 or 12 ms
GUARD_CONFIDENCE = 0.9
# the interval holds 1 (the model cannot tell): a record stays when its layer ran at least this much faster alone
GUARD_LAYER_GAIN = 1.2
GUARD_SHARE = 0.25    # of the budget kept for the check: the layer search stops at the rest
UNCHECKED = tuningdb.UNCHECKED
# bytes the measurement program reads between a candidate's timed runs (tune.c --evict-kb; 0: none, the default):
# a diagnostic for the state a layer meets in the model. On mnv2g8 it did not move the pick that the whole model
# rejects (F(4,3) on 576ch 7x7 g8 stayed 1.3-1.4x ahead of GSPC with 24-64 MB read between runs): whether a
# layer's weights stay cached depends on the other layers' picks, which the guard times together
EVICT_BYTES = 0

Progress = Callable[..., None]


@dataclass
class Job:
    signature: str
    cls: str
    node: object
    facts: dict
    macs: int
    layers: list[str] = field(default_factory=list)
    default_algo: str = ""
    region: dict | None = None  # a channel-blocked region (codegen/layout.py assign's record of it), not a layer


def tuned_options(device, t, mode: str, options: CompileOptions, db: TuningDB | None = None,
                  model: Path | None = None, drop: frozenset = frozenset(),
                  instead: dict | None = None) -> CompileOptions:
    """options with the device's tuning records filled in (CompileOptions.tuned), unless tuning is off.
    model: the model being built; records the tune's whole-model check rejected for it (tuningdb.Rejection)
    are left out, its layers keep the cost model's pick (or take the runner-up the check kept in the record's
    place) with a note saying why. drop: signatures whose records are left out as well, instead: signature ->
    (forced fields, note) used in place of its record (the check's trial builds)."""
    if options.tuning == "off":
        return options.with_(tuned=())
    if db is None and not tuningdb.db_path().is_file():  # nothing tuned yet: nothing to probe or create
        return options.with_(tuned=())
    facts = tuningdb.device_facts(device, t, mode, options.threads)
    own = db is None
    db = db or TuningDB()
    try:
        fp = tuningdb.fingerprint(facts)
        recs = db.applicable(fp, device.emulated)
        rej = db.rejections(fp, tuningdb.model_key(model)) if model is not None and Path(model).is_file() else {}
    finally:
        if own:
            db.close()
    from edgec.codegen.targets import get_target

    recs = [r for r in recs if r.signature not in rej and r.signature not in drop]
    # fitted from the records this model's build uses (a rejected record's layer-alone times mislead here too),
    # unless the check found the learned constants themselves slowing this model
    off = tuningdb.LEARNED in rej or tuningdb.LEARNED in drop
    learned = {} if off else learned_constants(recs, get_target(device.target))
    instead = instead or {}
    return options.with_(tuned=tuple((r.signature, *instead.get(r.signature, (r.forced, r.note()))) for r in recs)
                         + tuple((sig, x.instead, x.note()) for sig, x in rej.items() if sig != tuningdb.LEARNED),
                         learned=tuple(learned.items()))


_GEOMETRY = re.compile(r"N(\d+)C(\d+)H(\d+)W(\d+)K(\d+)G(\d+)k(\d+)x(\d+)s(\d+)x(\d+)d(\d+)x(\d+)"
                       r"p(\d+)x(\d+)o(\d+)x(\d+)")


def learned_constants(recs, target) -> dict[str, float]:
    """The cost model's constants fitted to a device's records (all of one fingerprint), so the device's
    untuned layers get better picks too:
      - the Winograd/direct trade-off: fp32 3x3 stride-1 layers whose trials timed direct and an F(m,3)
        (costmodel.fit_conv3x3);
      - the sparse break-even per block format: fp32 layers whose trials timed dense and a sparse format,
        at the record's zero fraction (costmodel.fit_sparse);
      - the depthwise plane/channel-blocked switch: fp32 depthwise layers that timed both (fit_dw);
      - the GSPC family per channels-per-group count: grouped layers that timed two of tile/ow/mg (fit_gspc);
      - the int8 path: int8 depthwise / grouped layers that timed their own kernel and the packed GEMM
        (fit_q8conv);
      - the int8 sparse break-even: int8 1x1 layers whose trials timed the 4x1-block sparse kernel and a
        dense one, at the record's zero fraction (fit_q8_sparse);
      - the pool's hand-off cost: layers timed on one thread and split (fit_pool_job);
      - a cache blocking most of the layers that timed the blk-* variants preferred (costmodel.fit_blk).
    Other than there, partitioning variants (algorithm names with a '/') are not used."""
    from edgec.codegen import costmodel

    conv3, sparse, dw, gspc, q8, q8sparse, blk = [], [], [], [], [], [], []
    for r in recs:
        d = next((t["ms"] for t in r.trials if t["variant"] == "default" and "ms" in t), None)
        bs = {t["variant"][4:]: d / t["ms"] for t in r.trials if t["variant"].startswith("blk-") and t.get("ms")} \
            if d and ":f32:" in r.signature else {}
        if bs:
            blk.append(bs)
        m = _GEOMETRY.search(r.signature)
        g = dict(zip("N C H W K G KH KW SH SW DH DW PT PL Ho Wo".split(), map(int, m.groups()))) if m else None
        times = [(t["variant"], t["algo"], float(t["ms"])) for t in r.trials
                 if "ms" in t and "/" not in t.get("algo", "/")]
        if g and r.cls.startswith(("q8dwconv", "q8gconv")):
            own = [t for _, a, t in times if a.startswith(("q8-dwconv", "q8-gspc"))]
            gemm = [t for _, a, t in times if a.startswith(("q8-gemm", "q8-cgemm"))]
            ms = {k: min(v) for k, v in (("own", own), ("gemm", gemm)) if v}
            q8.append(("dw", f"{g['KH']}x{g['KW']}", ms) if r.cls.startswith("q8dwconv")
                      else ("gspc", g["K"] // g["G"], ms))
            continue
        z = re.search(r":z(\d\.\d+)$", r.signature)
        if z and r.cls.startswith("q8conv1x1s1"):
            sp = [t for _, a, t in times if a.startswith("q8-spmm")]
            dense = [t for _, a, t in times if not a.startswith("q8-spmm")]
            if sp and dense:
                q8sparse.append((float(z.group(1)), min(sp) < min(dense)))
            continue
        if ":f32:" not in r.signature or not times:
            continue

        def fastest(pred) -> float | None:
            ms = [t for v, a, t in times if pred(v, a)]
            return min(ms) if ms else None

        if g and re.match(r"g?conv3x3s1(\+|$)", r.cls):
            ms: dict[str, float] = {}
            for _, a, t in times:
                key = a[:12] if a.startswith("winograd-f") else "direct"
                ms[key] = min(ms.get(key, float("inf")), t)
            conv3.append((g, ms))
        z = re.search(r":z(\d\.\d+)$", r.signature)
        if z and (r.cls.startswith("conv") or r.cls.startswith("gemv")):
            dense = fastest(lambda v, a: not a.startswith(("spmm-", "spmv-")))
            for blk in costmodel.SPARSE_BLOCKS:
                sp = fastest(lambda v, a: a.startswith((f"spmm-{blk}", f"spmv-{blk}")))
                if dense and sp:
                    sparse.append((float(z.group(1)), blk, sp < dense))
        if g and r.cls.startswith("dwconv"):
            cb = fastest(lambda v, a: a.startswith("dwconv-c"))
            plane = fastest(lambda v, a: a.startswith("dwconv-") and not a.startswith("dwconv-c"))
            if cb and plane:
                dw.append((g["SW"], g["Ho"] * g["Wo"], g["Wo"], cb < plane))
        if g and r.cls.startswith("gconv"):
            fam = {"ow": fastest(lambda v, a: a.startswith("gspc-ow-")),
                   "mg": fastest(lambda v, a: a.startswith("gspc-g")),
                   "tile": fastest(lambda v, a: a.startswith("gspc-") and not a.startswith(("gspc-ow-", "gspc-g")))}
            if sum(1 for v in fam.values() if v) >= 2:
                gspc.append((g["K"] // g["G"], g["SW"], {k: v for k, v in fam.items() if v}))
    return {**costmodel.fit_conv3x3(target, conv3), **costmodel.fit_sparse(target, sparse), **fit_layout(recs),
            **costmodel.fit_dw(target, dw), **costmodel.fit_gspc(target, gspc), **costmodel.fit_q8conv(target, q8),
            **costmodel.fit_q8_sparse(target, q8sparse), **fit_pool_job(recs, target), **costmodel.fit_blk(blk)}


def fit_layout(recs) -> dict[str, float]:
    """The layout estimate's blocked-side scale on this device (codegen/layout.py fit_scale): region records whose
    trials timed both layouts, each with the estimate of its layout."""
    from edgec.codegen import layout

    samples = []
    for r in recs:
        if not r.cls.startswith("region[") or "dwconv" not in r.cls:  # the scale applies to the estimate of
            continue  # regions with a depthwise conv (layout.pays); the others are decided by their records alone
        ms = {t["algo"]: float(t["ms"]) for t in r.trials if "ms" in t}
        est = {t["algo"]: float(t["est_ns"]) for t in r.trials if "est_ns" in t}
        if {"layout-nchw", "layout-nchwc"} <= ms.keys() & est.keys():
            samples.append((ms["layout-nchwc"] / ms["layout-nchw"], est["layout-nchwc"] / est["layout-nchw"]))
    return layout.fit_scale(samples)


def fit_pool_job(recs, target) -> dict[str, float]:
    """The pool's hand-off cost on this device (codegen/ops/_par.py): multi-thread records whose trials timed a
    kernel on one thread (algorithm ".../serial") and split (the same kernel, ".../cols" or ".../rows")."""
    from edgec.codegen.ops import _par

    samples = []
    for r in recs:
        m = re.search(r":t(\d+)(?::|$)", r.signature)
        serial, split = {}, {}
        for t in r.trials:
            base, _, part = t.get("algo", "").partition("/")
            if "ms" in t and part in ("serial", "cols", "rows"):
                d = serial if part == "serial" else split
                d[base] = min(d.get(base, math.inf), float(t["ms"]))
        for base in serial.keys() & split.keys():
            samples.append((int(m.group(1)) if m else 1, serial[base], split[base] < serial[base]))
    return _par.fit_job_us(target, samples)


def local_tuned_options(options: CompileOptions, model: Path | None = None) -> CompileOptions:
    """`edgec compile`: the records of this machine (the `local` device) when the target runs here (model: as
    for tuned_options)."""
    import dataclasses

    from edgec.codegen.targets import get_target
    from edgec.devices.deploy import choose_mode
    from edgec.devices.inventory import device_from_profile
    from edgec.devices.transport import open_transport

    if options.tuning == "off" or not get_target(options.target).runs_natively():
        return options.with_(tuned=())
    # the built-in `local` device (what `edgec tune MODEL` measures on by default), not the inventory's entry
    dev = dataclasses.replace(device_from_profile("local", "local"), target=options.target)
    with open_transport(dev) as t:
        return tuned_options(dev, t, choose_mode(dev, "auto"), options, model=model)


# -- the layers of a model ---------------------------------------------------------------------------

def plan(model: Path, device, threads: int, input_shapes: dict | None = None, layout: str = "auto") -> list[Job]:
    """Distinct tunable layer signatures of a model (codegen only, nothing built), biggest MACs first. layout
    (EDGEC_LAYOUT): auto tunes regions and the layers outside blocked ones; nchw / nchwc the layers that
    layout leaves NCHW (no region is decided by its estimate then, so none is measured)."""
    from edgec.codegen import variants
    from edgec.codegen.project import compile_model
    from edgec.codegen.targets import get_target

    opts = CompileOptions(target=device.target, threads=threads, tuning="off", layout=layout)
    with tempfile.TemporaryDirectory(prefix="edgec-tune-") as tmp:
        b = compile_model(model, tmp, input_shapes=input_shapes, options=opts)
    target = get_target(device.target)
    jobs: dict[str, Job] = {}
    by_name = {node.name: info for info, node in zip(b.layers, b.graph.nodes)}
    regions: dict[str, Job] = {}
    for reg in getattr(b.graph, "layout_regions", []):
        # the regions holding a depthwise, Winograd or 1x1 conv, measured both ways as one extracted model each:
        # those with a depthwise or Winograd conv are decided by the estimate, the others stay NCHW unless this
        # device measured them faster blocked (on the AVX-512 host SqueezeNet's fire modules ran 0.94x blocked; on
        # Zen 3 the same rule had lost in wall time: a device's call). Pools or elementwise ops alone are not worth
        # a run.
        if layout != "auto" or not (reg["has_dw"] or reg["has_wino"] or "1x1" in reg["class"]):
            continue
        infos = [by_name[n.name] for n in reg["nodes"] if n.name in by_name]
        j = regions.setdefault(reg["signature"], Job(reg["signature"], reg["class"], None, {}, 0, region=reg,
                                                     default_algo="layout-nchwc" if reg["blocked"] else "layout-nchw"))
        j.macs += sum(int(i.get("macs") or 0) for i in infos)
        j.layers += [i["name"] for i in infos]
    for info, node in zip(b.layers, b.graph.nodes):
        sig = info.get("details", {}).get("signature")
        if sig is None:
            continue
        if info["details"].get("layout", "nchw") != "nchw":
            # in a channel-blocked region (codegen/layout.py): the variants are NCHW kernels, measured alone
            # they leave out the region they would split (a record would pin the layer, and so the region's
            # neighbours, to NCHW); the region's choice is the layout pass's
            continue
        f = variants.facts(node)
        if len(variants.candidates(node, target, f)) < 1:
            continue
        j = jobs.setdefault(sig, Job(sig, variants.layer_class(node, f), node, f, 0, default_algo=info["algo"]))
        j.macs += int(info.get("macs") or 0)
        j.layers.append(info["name"])
    # biggest first; a region before its own layers (its MACs are at least theirs): a region recorded
    # channel-blocked takes its layers out of per-layer tuning (_tune)
    return sorted([*regions.values(), *jobs.values()], key=lambda j: (-j.macs, j.region is None))


def extract_layer(node, path: Path) -> Path:
    """One IR node with its fused epilogue as a small ONNX model (constants as initializers, every other
    operand - the residual included - a graph input). Recompiled, it yields the same layer signature.
    An int8 QLinearConv with a fused activation has no ONNX form of its own: it becomes the QDQ pattern the
    int8 lowering fuses back into it (DequantizeLinear -> Conv -> Relu -> QuantizeLinear)."""
    if node.op == "QLinearConv" and node.attr("ec_act") == "relu" and _qdq_conv_ok(node):
        return _qdq_conv(node, path)
    return _extract([node], [node.outputs[0]], path)


def extract_region(region: dict, path: Path) -> Path:
    """A channel-blocked region (codegen/layout.py assign's record: its nodes as they read before blocking, its
    edge tensors) as an ONNX model: the tensors reordered into it become graph inputs, those reordered out of it
    graph outputs, constants initializers. Recompiled, the layout pass finds the same region signature."""
    return _extract(region["nodes"], region["edges"][1], path)


def _extract(members: list, outs: list, path: Path) -> Path:
    """IR nodes (each with its fused epilogue, in graph order) as an ONNX model: operands made inside are wired
    through, the rest are graph inputs (constants initializers); outs are the graph outputs."""
    import onnx
    from onnx import helper, numpy_helper

    inits, ins, names, nodes = [], [], {}, []
    k = 0

    def operand(tensor, what: str) -> str:
        if tensor is None:
            return ""
        if id(tensor) in names:
            return names[id(tensor)]
        name = f"{what}{len(names)}"
        names[id(tensor)] = name
        if tensor.is_const:
            inits.append(numpy_helper.from_array(np.asarray(tensor.const).astype(tensor.dtype), name))
        else:
            ins.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(tensor.dtype)),
                                                     list(tensor.shape)))
        return name

    def const(v, dtype=np.float32) -> str:
        nonlocal k
        k += 1
        inits.append(numpy_helper.from_array(np.asarray(v, dtype), f"k{k}"))
        return f"k{k}"

    for i, node in enumerate(members):
        cur = ""

        def step(op, inputs, **kw):
            nonlocal cur, k
            k += 1
            nodes.append(helper.make_node(op, inputs, [f"y{k}"], name=f"n{k}", **kw))
            cur = f"y{k}"

        args = [operand(t, "in") for t in node.inputs]
        while args and args[-1] == "":
            args.pop()
        if node.op == "ChannelShuffle":  # codegen/layout.py fuse_shuffles: back to Reshape, Transpose, Reshape
            n_, c, h, w = node.inputs[0].shape
            grp = int(node.attr("ec_shuffle_groups"))
            step("Reshape", [args[0], const([n_, grp, c // grp, h, w], np.int64)])
            step("Transpose", [cur], perm=[0, 2, 1, 3, 4])
            step("Reshape", [cur, const([n_, c, h, w], np.int64)])
        else:
            attrs = {a: v for a, v in node.attrs.items() if not a.startswith("ec_")}
            step(node.op, args, **attrs)
        ep = node.epilogue

        def act():
            a, p = ep.act, ep.act_params
            if a is None:
                return
            if a == "clip":
                step("Clip", [cur, const(p.get("min", -3.4e38)), const(p.get("max", 3.4e38))])
            elif a == "silu":
                x = cur
                step("Sigmoid", [x])
                step("Mul", [x, cur])
            elif a == "gelu":
                x = cur
                step("Mul", [x, const(1 / math.sqrt(2))])
                step("Erf", [cur])
                step("Add", [cur, const(1.0)])
                step("Mul", [x, cur])
                step("Mul", [cur, const(0.5)])
            else:
                op = {"relu": "Relu", "leaky_relu": "LeakyRelu", "sigmoid": "Sigmoid", "tanh": "Tanh",
                      "hard_sigmoid": "HardSigmoid", "hard_swish": "HardSwish"}[a]
                kw = {"alpha": p["alpha"]} if a == "leaky_relu" else \
                    {"alpha": p["alpha"], "beta": p["beta"]} if a == "hard_sigmoid" else {}
                step(op, [cur], **kw)

        res = operand(ep.residual, "res") if ep.residual is not None else None
        if res and ep.residual_before_act:
            step("Add", [cur, res])
        act()
        if res and not ep.residual_before_act:
            step("Add", [cur, res])
        names[id(node.outputs[0])] = cur
    dt = helper.np_dtype_to_tensor_dtype
    gouts = [helper.make_tensor_value_info(names[id(y)], dt(np.dtype(y.dtype)), list(y.shape)) for y in outs]
    g = helper.make_graph(nodes, "layer", ins, gouts, inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


def _qdq_conv_ok(node) -> bool:
    """The int8 lowering fuses DequantizeLinear -> Conv back into QLinearConv for int8 weights with zero
    points 0 and per-tensor activation parameters (codegen/ops/qdq.py)."""
    w, wz = node.inputs[3], node.inputs[5]
    consts = [node.inputs[i] for i in (1, 2, 3, 4, 5, 6, 7)]
    return all(t is not None and t.is_const for t in consts) and np.dtype(w.dtype) == np.int8 \
        and not np.any(np.asarray(wz.const)) and all(np.asarray(node.inputs[i].const).size == 1 for i in (1, 2, 6, 7))


def _qdq_conv(node, path: Path) -> Path:
    """QLinearConv + Relu as DequantizeLinear(x), DequantizeLinear(w) (per channel when its scale is),
    DequantizeLinear(int32 bias, x scale * w scale) -> Conv -> Relu -> QuantizeLinear(y)."""
    import onnx
    from onnx import helper, numpy_helper

    x, xs, xz, w, ws, wz, ys, yz = node.inputs[:8]
    b = node.inputs[8] if len(node.inputs) > 8 else None
    y = node.outputs[0]

    def arr(t, dtype=None):
        a = np.asarray(t.const)
        return a.astype(dtype) if dtype is not None else a.astype(t.dtype)

    wsa = arr(ws, np.float32).reshape(-1)
    axis = {"axis": 0} if wsa.size > 1 else {}
    inits = [numpy_helper.from_array(arr(xs, np.float32).reshape(()), "xs"),
             numpy_helper.from_array(arr(xz).reshape(()), "xz"),
             numpy_helper.from_array(arr(w), "w"),
             numpy_helper.from_array(wsa if wsa.size > 1 else wsa.reshape(()), "ws"),
             numpy_helper.from_array(np.zeros(wsa.shape if wsa.size > 1 else (), np.int8), "wz"),
             numpy_helper.from_array(arr(ys, np.float32).reshape(()), "ys"),
             numpy_helper.from_array(arr(yz).reshape(()), "yz")]
    nodes = [helper.make_node("DequantizeLinear", ["in0", "xs", "xz"], ["xf"], name="dqx"),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], name="dqw", **axis)]
    conv_in = ["xf", "wf"]
    if b is not None and b.is_const:
        bs = (np.float32(arr(xs, np.float32).reshape(-1)[0]) * wsa).astype(np.float32)
        bs = bs if bs.size > 1 else bs.reshape(())
        inits += [numpy_helper.from_array(arr(b, np.int32), "b"), numpy_helper.from_array(bs, "bs"),
                  numpy_helper.from_array(np.zeros(bs.shape, np.int32), "bz")]
        nodes.append(helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bf"], name="dqb", **axis))
        conv_in.append("bf")
    attrs = {k: v for k, v in node.attrs.items() if not k.startswith("ec_")}
    nodes += [helper.make_node("Conv", conv_in, ["c"], name="layer", **attrs),
              helper.make_node("Relu", ["c"], ["r"], name="act"),
              helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["y"], name="qy")]
    dt = helper.np_dtype_to_tensor_dtype
    g = helper.make_graph(nodes, "layer", [helper.make_tensor_value_info("in0", dt(np.dtype(x.dtype)), list(x.shape))],
                          [helper.make_tensor_value_info("y", dt(np.dtype(y.dtype)), list(y.shape))], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    return path


# -- measuring ---------------------------------------------------------------------------------------

def _keep_kernel(forced: str, trials: list[dict], forcing_of: dict[str, str]) -> str:
    """A blocking or partitioning variant's forced fields plus the kernel choice it was timed with: the trial
    that gave the default's code names it (conv=winograd-f43 on a 3x3 layer). Otherwise the constants learned
    from the records could move the cost model's pick at compile time and pair the blocking with a kernel never
    timed under it."""
    if not forced:
        return forced
    have = {kv.split("=", 1)[0] for kv in forced.split(";")}
    for t in trials:
        twin = forcing_of.get(t["variant"], "")
        key = twin.split("=", 1)[0]
        if t.get("rejected") == "same code as default" and twin and ";" not in twin and key not in have \
                and key not in ("par", "blk"):
            forced, have = f"{forced};{twin}", have | {key}
    return forced


@dataclass
class Candidate:
    name: str
    forced: str
    algo: str = ""
    ms: float | None = None
    rejected: str | None = None
    build: object = None  # codegen.project.Emitted until the program is written
    index: int = -1       # in the measurement program
    layer: int = 0        # which of the program's layer models it is a build of
    est_ns: float | None = None  # a region candidate: the layout estimate of its layout (codegen/layout.py)


@dataclass
class Batch:
    """Layers whose candidates go into one measurement program: (key, job, extracted model, every candidate,
    the live ones) each, and how many live candidates they hold."""
    preps: list = field(default_factory=list)
    candidates: int = 0


class Tuner:
    def __init__(self, model: Path, device, t, *, threads: int = 1, mode: str = "auto", budget: float = DEFAULT_BUDGET,
                 input_shapes: dict | None = None, progress: Progress | None = None, db: TuningDB | None = None,
                 after_run: Callable | None = None, runs: int | None = None, before_build: Callable | None = None,
                 layout: str = "auto"):
        from edgec.devices.deploy import choose_mode

        self.model, self.device, self.t = Path(model), device, t
        self.threads, self.budget, self.input_shapes = threads, budget, input_shapes
        self.layout = layout  # the activation layout every build of this tune uses (CompileOptions.layout)
        self.mode_req, self.mode = mode, choose_mode(device, mode)
        self.progress = progress or (lambda *a, **k: None)
        self.db = db or TuningDB()
        # (candidate name, transport, its remote output files): called between the run and the check
        self.after_run = after_run
        self.before_build = before_build  # (program's project folder): called after writing it, before make
        self.runs = runs
        self.programs = 0  # measurement programs built (full tuning: one per PROGRAM_CANDIDATES; transfer: one)
        self.program_layers: list[int] = []  # layers measured in each program
        self.t0 = time.monotonic()
        self.facts = tuningdb.device_facts(device, t, self.mode, threads)
        self.fp = tuningdb.fingerprint(self.facts)
        self._work: Path | None = None
        self.kernels: dict[str, dict] = {}  # transfer: per layer signature, variant -> the source's kernels
        self.evict = EVICT_BYTES
        # wall seconds of the layer search by phase (report["phases"]): where a search's time goes
        self.phases: dict[str, float] = defaultdict(float)

    @contextmanager
    def phase(self, name: str):
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] += time.monotonic() - t0

    @property
    def work(self) -> Path:
        """Where the extracted layer models go (made on first use, removed by tune())."""
        if self._work is None:
            self._work = Path(tempfile.mkdtemp(prefix="edgec-tune-"))
        return self._work

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def over_budget(self) -> bool:
        return self.elapsed() > self.budget * self.share

    share = 1.0  # of the budget the current phase may use (the layer search leaves GUARD_SHARE to the check)

    # one layer: candidates -> measured record (or None when nothing could be measured)
    def measure(self, job: Job, names: list[str] | None = None, source: str = "measured") -> tuple[Record | None, str]:
        return self.measure_many([(job, names)], source)[0]

    def measure_many(self, todo: list[tuple[Job, list[str] | None]], source: str = "measured") \
            -> list[tuple[Record | None, str]]:
        """Several layers' candidates in ONE measurement program (one build, one upload, one run): each
        layer's record as measure() would make it. Layers with fewer than two candidates left, or reached
        after the budget ran out, get (None, why)."""
        out: list[tuple[Record | None, str]] = [(None, "budget")] * len(todo)
        batch = Batch()
        for k, (job, names) in enumerate(todo):
            why = self.add(batch, job, names, k)
            if why:
                out[k] = (None, why)
                if why == "budget":
                    break
        for k, res in self.run_batch(batch, source).items():
            out[k] = res
        return out

    def add(self, batch: Batch, job: Job, names: list[str] | None = None, key=None) -> str:
        """Code generation for one layer's candidates into a program still to be built: "" when they joined it,
        else why the layer is not measured ("budget": stop)."""
        r = self._prepare(job, names, batch.candidates, len(batch.preps))
        if isinstance(r, str):
            return r
        batch.preps.append((job.signature if key is None else key, job, *r))
        batch.candidates += len(r[2])
        return ""

    def run_batch(self, batch: Batch, source: str = "measured") -> dict:
        """Build, upload and run the batch's one program: key -> (record, "") for each of its layers, or
        (None, why). Nothing is built once the budget ran out (every layer: (None, "budget"))."""
        from edgec.files import cache_lock

        preps, batch.preps, batch.candidates = batch.preps, [], 0
        if not preps:
            return {}
        if self.over_budget():
            return {k: (None, "budget") for k, *_ in preps}
        with self.phase("reference"):
            refs = [self._reference(path) for _, _, path, _, _ in preps]
        live = [c for p in preps for c in p[4]]
        self.progress("program", candidates=len(live))
        ws = self._workspace()
        with cache_lock(ws):  # another tune of the same target writes and builds there too
            with self.phase("write"):
                project = self._program(ws, live)
            if self.before_build is not None:
                self.before_build(project)
            dep = self._deploy(project, preps[0][2])
        err = self._run(dep, live, [x for inputs, _ in refs for x in inputs], [want for _, want in refs])
        return {k: (None, err) if err else self._record(job, cands, lv, source) for k, job, _, cands, lv in preps}

    def _prepare(self, job: Job, names: list[str] | None, base: int, layer: int):
        """Code generation for one layer's candidates (their symbol prefixes from cand<base> on): (extracted
        layer model, every candidate, the live ones) or why nothing is to be measured."""
        from edgec.codegen import variants
        from edgec.codegen.layout import WINO_TILES
        from edgec.codegen.project import emit_model
        from edgec.codegen.targets import get_target

        target = get_target(self.device.target)
        path = self.work / f"{re.sub(r'[^A-Za-z0-9]+', '_', job.signature)[:80]}.onnx"
        if job.region is not None:  # a region: the estimate's pick against each layout forced by a record
            try:
                extract_region(job.region, path)
            except Exception as e:  # a node with no ONNX form of its own: the region keeps the estimate's pick
                return f"the region has no ONNX form ({type(e).__name__}: {str(e)[:80]})"
            forcings = [("layout-nchw", "layout=nchw"), ("layout-nchwc", "layout=nchwc")]
            # blocked, with the other Winograd tile on one shape of conv at a time: the estimate's pick between
            # F(2,3) and F(4,3) missed by up to 1.25x at 14x14 (256-576 channels, Zen 5, 1 thread)
            for shape, algo in dict(job.region.get("wino", [])).items():
                for tile in WINO_TILES:
                    if algo != f"winograd-{tile}":
                        forcings.append((f"layout-nchwc-{shape}:{tile}", f"layout=nchwc;wino={shape}:{tile}"))
            # blocked, with its 1x1 GEMMs (dense 1x1, strided via im2col, Winograd's) in passes half as long: the
            # pass size is a cache rule (nchwc.pass_channels) fitted on one core; where passes pay, this says so
            if job.region.get("has_wino") or "1x1" in job.region.get("class", ""):
                forcings.append(("layout-nchwc/kc-half", "layout=nchwc;blk=kc-half"))
        else:
            extract_layer(job.node, path)
            vs = variants.candidates(job.node, target, job.facts)
            forcings = variants.forcings(vs, job.facts, self.threads)
        if names is not None:  # a kernel+partitioning record transfers its kernel alone to a 1-thread layer
            want = set(names) | ({n.split("+")[0] for n in names} if self.threads == 1 else set())
            forcings = [(n, fs) for n, fs in forcings if n in want]
        cands = [Candidate("default", "", layer=layer)] + [Candidate(n, fs, layer=layer) for n, fs in forcings]
        by_algo: dict[object, Candidate] = {}
        for c in cands:  # codegen only: variants that emit the same kernel as another are left out of the program
            if self.over_budget():
                return "budget"
            self.progress("candidate", name=c.name)
            try:
                with self.phase("codegen"):
                    build = emit_model(path, self._options(job, c), f"cand{base + len(by_algo)}")
            except EdgecError as e:
                if job.region is None:
                    raise
                return f"the extracted region does not compile ({e})"
            if job.region is not None:
                mine = [{"algo": "layout-nchwc" + (f"/{r['blk']}" if r.get("blk") else "") if r["blocked"]
                         else "layout-nchw", "est": r["estimate"],
                         "wino": r["wino"] if r["blocked"] else [], "forced": r["wino_forced"],
                         "blocked": r["blocked"],
                         # the passes its blocked 1x1 GEMMs run (a kc-half candidate differs by them alone)
                         "kc": tuple(l.get("details", {}).get("kc", 0) for l in build.table) if r["blocked"] else ()}
                        for r in getattr(build.graph, "layout_regions", []) if r["signature"] == job.signature]
                if not mine:
                    return "the extracted region compiles to another signature"
                est = mine[0]["est"]
                c.est_ns = est[1] if mine[0]["algo"].startswith("layout-nchwc") else est[0]
                if mine[0]["forced"] and mine[0]["algo"] == "layout-nchwc":  # the tiles named by the candidate
                    mine[0]["algo"] += "-" + ",".join(f"{k}:{v.removeprefix('winograd-')}"
                                                      for k, v in sorted(mine[0]["forced"].items()))
            else:
                mine = [l for l in build.table if l.get("details", {}).get("signature") == job.signature]
            if not mine:
                return "the extracted layer compiles to another signature"
            c.algo = mine[0]["algo"]
            # a region's code: its layout and its blocked Winograd convs' algorithms, whatever forced them
            code = (mine[0]["blocked"], mine[0]["kc"], *mine[0]["wino"]) if job.region is not None else c.algo
            allowed = self.kernels.get(job.signature, {}).get(c.name) if names is not None else None
            if allowed is not None and c.name != "default" and c.algo.split("/")[0] not in allowed:
                # a transferred variant that gives another kernel at this layer's shapes (gspc-tile: T_O=8 there,
                # 4 here) is not the source model's finding: not built, not measured
                c.rejected = "another kernel than on the source model"
                continue
            if code in by_algo:
                c.rejected = f"same code as {by_algo[code].name}"
                continue
            c.build, c.index = build, base + len(by_algo)
            by_algo[code] = c
        live = [c for c in cands if c.rejected is None]
        if len(live) < 2:
            return "one variant only"
        return path, cands, live

    def _record(self, job: Job, cands: list[Candidate], live: list[Candidate], source: str) \
            -> tuple[Record | None, str]:
        """The layer's record from its measured candidates, committed at once."""
        ok = [c for c in live if c.rejected is None]
        if not ok or ok[0].name != "default":  # a bug to report, not a reason to stop tuning the other layers
            return None, f"the cost model's pick {live[0].algo} fails its check ({live[0].rejected})"
        default = ok[0]
        best = min((c for c in ok if c is default or default.ms / c.ms >= min_gain(c.name)), key=lambda c: c.ms)
        trials = [{"variant": c.name, "algo": c.algo, **({"ms": round(c.ms, 5)} if c.ms is not None else {}),
                   **({"est_ns": round(c.est_ns, 1)} if c.est_ns is not None else {}),
                   **({"rejected": c.rejected} if c.rejected else {})} for c in cands]
        variant, forced = best.name, _keep_kernel(best.forced, trials, {c.name: c.forced for c in cands})
        if job.region is not None:  # a region's record always names its layout: a later learned scale may move
            lay, _, wino = best.algo.removeprefix("layout-").partition("-")  # the estimate's pick
            variant, forced = best.algo, f"layout={lay}" + (f";wino={wino}" if wino else "")
        rec = Record(self.fp, job.signature, job.cls, variant, forced, best.algo, best.ms, default.algo,
                     default.ms, source, self.model.name, self.device.name, tuningdb.today(), self.device.emulated,
                     self.facts, trials)
        self.db.put(rec)
        return rec, ""

    def _options(self, job: Job, c: Candidate) -> CompileOptions:
        tuned = ((job.signature, c.forced, f"candidate {c.name}"),) if c.forced else ()
        return CompileOptions(target=self.device.target, threads=self.threads, tuned=tuned, layout=self.layout)

    def _workspace(self) -> Path:
        """The folder every layer's measurement program is written to, for this target and code generator:
        its runtime kernels are copied once and, built in the same place each time (deploy's build folders
        follow the project's path), compiled once; each layer rewrites and recompiles only its candidates."""
        from edgec import __version__
        from edgec.codegen.targets import get_target
        from edgec.devices.deploy import _codegen_fingerprint, _key, cache_dir

        tgt = get_target(self.device.target)
        key = _key(tgt.name, tgt.l1d_bytes, tgt.l2_bytes, __version__, _codegen_fingerprint())
        return cache_dir() / "builds" / f"tune-{tgt.name}-{key}"

    def _program(self, ws: Path, live: list[Candidate]) -> Path:
        """The measurement program: one C project holding every live candidate of its layers (in the workspace)."""
        from edgec.codegen.project import write_candidates

        units = _units(live, BUILD_JOBS) if UNITS else None
        keep = {f"cand{c.index}" for c in live} | {f"tune_unit{k}" for k in range(len(units or []))}
        for f in [*ws.glob("cand*"), *ws.glob("tune_unit*")]:  # an earlier program's beyond this one's count
            m = re.fullmatch(r"(cand\d+|tune_unit\d+)(\.c|\.h|_weights\.bin)", f.name)
            if m and m.group(1) not in keep:
                f.unlink()
        write_candidates(ws, [c.build for c in live], [c.name for c in live], [c.algo for c in live],
                         [c.layer for c in live], units)
        for c in live:
            c.build = None  # the weights are written; do not hold them for the rest of the tune
        self.programs += 1
        self.program_layers.append(len({c.layer for c in live}))
        return ws

    def _deploy(self, project: Path, path: Path):
        """Build the program for the device and put it there, the way deploy does (devices/deploy.py): make
        here (cross or native) and upload the binary, or upload the project and make on the board."""
        from edgec.devices.deploy import Deployment, _project_files, build_local, build_remote
        from edgec.devices.upload import Manifest, upload

        manifest = Manifest()
        if self.mode in ("cross", "native"):
            # the project's make builds `tune` only; a program's candidate files are independent: compiled side by
            # side on up to BUILD_JOBS cores
            with self.phase("make"):
                built = build_local(project, self.device, False, jobs=min(BUILD_JOBS, os.cpu_count() or 1))
            manifest.add("tune", next(iter(built.values())).parent / "tune", 0o755)
        else:
            for p in _project_files(project):
                manifest.add(str(p.relative_to(project)), p)
        with self.phase("upload"):
            res = upload(self.t, manifest)
        dep = Deployment(self.device, self.t, res.dir, self.mode, path, project, sent_bytes=res.sent_bytes)
        if self.mode == "on-device":
            with self.phase("make"):
                build_remote(dep, False)
        return dep

    def _reference(self, path: Path):
        import onnxruntime as ort

        from edgec.devices.bench import random_inputs

        inputs = random_inputs(path, None, seed=7)
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return inputs, sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), inputs)})

    def _run(self, dep, live: list[Candidate], inputs, want) -> str | None:
        """Run the program once on the device: every candidate writes its outputs, which must match
        onnxruntime's (a wrong candidate is rejected and its time dropped), then all are timed in interleaved
        rounds. A candidate that crashes the program is rejected and the program runs again without it.
        inputs: every layer's, layer after layer; want[l]: onnxruntime's outputs of layer l.
        Returns why nothing could be measured, or None."""
        import uuid

        from edgec.devices.transport import last_line, signal_name

        t = self.t
        remote = f"{t.workdir()}/runs/{uuid.uuid4().hex[:12]}"
        t.mkdir(remote)
        try:
            files = []
            with tempfile.TemporaryDirectory() as tmp:
                for i, a in enumerate(inputs):
                    local = Path(tmp) / f"input_{i}.npy"
                    np.save(local, np.ascontiguousarray(a))
                    t.put(local, f"{remote}/input_{i}.npy")
                    files.append(f"{remote}/input_{i}.npy")
            runs = self.runs if self.runs is not None else EMULATED_RUNS if self.device.emulated else None
            args = ["--out", remote, "--threads", self.threads, "--rounds", ROUNDS, "--warmup", WARMUP,
                    *(["--runs", runs] if runs is not None else ["--target-ms", round(TARGET_RUN_S * 1e3)]),
                    *(["--evict-kb", -(-int(self.evict) // 1024)] if self.evict else [])]
            todo, timed = [c for c in live], {}
            while todo:
                only = ",".join(str(c.index) for c in todo)
                with self.phase("run"):
                    res = t.run(dep.command("tune", *files, *args, "--only", only), timeout=1800)
                lines = []
                for ln in res.out.splitlines():
                    try:
                        lines.append(json.loads(ln))
                    except json.JSONDecodeError:
                        continue
                done = {d["cand"] for d in lines if "written" in d or "error" in d}
                timed.update({d["cand"]: d["median_ms"] for d in lines if "median_ms" in d})
                for c in todo:
                    if any(d["cand"] == c.index and "error" in d for d in lines):
                        c.rejected = f"runner failed ({next(d['error'] for d in lines if d['cand'] == c.index)})"
                if res.ok:
                    break
                pending = [c for c in todo if c.index not in done]
                if res.signal is None or not pending:  # its own exit (inputs, memory, files), or while timing
                    return (f"the measurement program failed on {self.device.name} ("
                            f"{f'signal {signal_name(res.signal)}' if res.signal is not None else f'exit {res.rc}'}"
                            f"): {last_line(res.err) or 'no message'}")
                pending[0].rejected = f"crashed with {signal_name(res.signal)}"  # it was running then
                todo = [c for c in todo if c.rejected is None]
            for c in live:
                if c.rejected is None:
                    with self.phase("check"):
                        c.rejected = self._check(c, remote, want[c.layer])
                if c.rejected is None:
                    if c.index not in timed:
                        c.rejected = "not timed"
                    else:
                        c.ms = float(timed[c.index])
            return None
        finally:
            t.run(["rm", "-rf", remote], timeout=60)

    def _check(self, c: Candidate, remote: str, want) -> str | None:
        """The candidate's outputs, as the program wrote them on the device, against onnxruntime's."""
        import io

        t = self.t
        outs = [f"{remote}/cand{c.index}_output_{i}.npy" for i in range(len(want))]
        if self.after_run is not None:
            self.after_run(c.name, t, outs)
        worst = 0.0
        for i, w in enumerate(want):
            try:
                g = np.load(io.BytesIO(t.read(outs[i])), allow_pickle=False)
            except Exception as e:  # a damaged output file is a wrong result like any other
                return f"output {i} unreadable ({type(e).__name__})"
            if g.shape != w.shape:
                return f"output shape {g.shape} != {w.shape}"
            if not g.size:
                continue
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
            if w.dtype.kind in "iu":  # quantized: requantization may round one step apart from float
                if float(diff.max()) > 1:
                    return f"wrong output: {float(diff.max()):.0f} quantization steps off"
                continue
            err = float(np.max(diff / (1.0 + np.abs(w))))
            worst = max(worst, err if np.isfinite(err) else np.inf)
        return None if worst <= 1e-3 else f"wrong output: max rel err {worst:.2e}"

    def _time(self, dep, runs: int | None = None, clock: str = "wall") -> float:
        """The median of a build's timed runs: wall clock, or ("cpu") the process's CPU time per run."""
        from edgec.devices.bench import _run_bench

        if runs is None:
            runs = self.runs
        if runs is None:
            probe = _run_bench(dep, 3, 1, self.threads, 600)
            est = float(np.median(probe["runs_ms"])) / 1e3
            runs = 5 if self.device.emulated else int(min(200, max(10, TARGET_RUN_S / max(est, 1e-6))))
        raw = _run_bench(dep, runs, max(2, runs // 10), self.threads, 1800)
        return float(np.median((clock == "cpu" and raw.get("runs_cpu_ms")) or raw["runs_ms"]))

    def whole_model(self, tuned: bool, runs: int | None = None, clock: str = "wall") -> dict:
        """Whole-model latency, untuned or with this device's records (clock: as _time)."""
        dep = self.deploy_whole(tuned)
        return {"median_ms": self._time(dep, runs, clock), "tuned_layers": _tuned_layers(dep)}

    def deploy_whole(self, tuned: bool, drop: frozenset = frozenset(), instead: dict | None = None):
        """The whole model built for the device: untuned, or with the records it uses (not those rejected for
        it, nor those of the signatures in drop; instead: as tuned_options)."""
        from edgec.devices.deploy import deploy

        opts = CompileOptions(target=self.device.target, threads=self.threads, layout=self.layout)
        if tuned:
            opts = tuned_options(self.device, self.t, self.mode, opts, self.db, model=self.model, drop=drop,
                                 instead=instead)
        return deploy(self.model, self.device, self.t, mode=self.mode_req, threads=self.threads, profile=False,
                      input_shapes=self.input_shapes, options=opts)

    def race(self, a, b, rounds: int | None = None) -> tuple[float, list[float]]:
        """Two whole-model builds timed in interleaved rounds (each round runs both back to back, which one
        first alternating, so a change of load falls on both): the median over rounds of a's time / b's, and
        every round's ratio. At one thread a run's time is the process's CPU time (bench.c runs_cpu_ms): the
        memory stalls are in it, the time other processes held the core is not (on the 2-core host shared at
        load 5, wall-clock rounds of the same two builds ranged 0.53-2.1)."""
        from edgec.devices.bench import _run_bench

        def per_run(raw) -> float:
            cpu = raw.get("runs_cpu_ms") if self.threads == 1 else None
            return float(np.median(cpu if cpu else raw["runs_ms"]))

        sized = []
        for dep in (a, b):
            ms = float(np.median(_run_bench(dep, 3, 1, self.threads, 600)["runs_ms"]))
            sized.append(3 if self.device.emulated else int(min(50, max(3, GUARD_RUN_S * 1e3 / max(ms, 1e-3)))))
        runs = self.runs or max(sized)  # both builds the same number of runs
        ratios = []
        for r in range(rounds or GUARD_ROUNDS):
            pair = (a, b) if r % 2 == 0 else (b, a)
            t = [per_run(_run_bench(dep, runs, 2, self.threads, 1800)) for dep in pair]
            ratios.append(t[0] / t[1] if r % 2 == 0 else t[1] / t[0])
        return float(np.median(ratios)), [round(x, 3) for x in ratios]

    def guard(self, jobs: list[Job]) -> dict:
        """The whole-model check: the model built with the records it uses against the untuned build, timed in
        interleaved rounds on the device (guard_decision). Unless the tuned build is significantly faster, the
        constants learned from the records (they move the picks of layers without a forcing record) and then each
        record that changes the model's code (biggest layer first) are timed in the model with and without them
        and decided the same way; a rejected record's runner-up (the next-fastest variant its layer timed alone
        that is not the cost model's pick) gets one such check of its own and, kept, replaces the record for this
        model. A rejection is per model (tuningdb.Rejection: the record stays for other models). Stops at the
        budget: items not reached yet are named as unchecked, and kept unless the tuned build was significantly
        slower than untuned: then they are left out of this model's builds until a later tune checks them."""
        key = tuningdb.model_key(self.model)
        rejected = self.db.rejections(self.fp, key)
        # left out unchecked by an earlier check that ran out of budget: records again, checked like the others
        pending = [r for r in rejected.values() if r.reason.startswith(UNCHECKED)]
        for r in pending:
            self.db.unreject(self.fp, key, r.signature)
        try:
            return self._guard(jobs, key, {s: r for s, r in rejected.items() if not r.reason.startswith(UNCHECKED)})
        except BaseException:  # interrupted: what was left out stays out
            for r in pending:
                self.db.reject(r)
            raise

    def _guard(self, jobs: list[Job], key: str, rejected: dict) -> dict:
        t0 = time.monotonic()
        recs = {r.signature: r for r in self.db.applicable(self.fp, self.device.emulated)}
        by_sig = {j.signature: j for j in jobs}
        items = [j.signature for j in jobs if j.signature in recs and j.signature not in rejected
                 and recs[j.signature].forced and recs[j.signature].algo != recs[j.signature].default_algo]
        opts = tuned_options(self.device, self.t, self.mode, CompileOptions(target=self.device.target,
                             threads=self.threads, layout=self.layout), self.db, model=self.model)
        learned = ", ".join(f"{k} {v:g}" for k, v in opts.learned)
        if learned:
            items.insert(0, tuningdb.LEARNED)
        g: dict = {"records": [], "dropped": [], "replaced": {}, "unchecked": [], "rounds": GUARD_ROUNDS,
                   "confidence": GUARD_CONFIDENCE, "layer_gain": GUARD_LAYER_GAIN,
                   "rejected_before": sorted(rejected), "learned": learned}
        if not items:
            g.update(verdict="no record changes this model's code", s=round(time.monotonic() - t0, 2))
            return g
        self.progress("guard", records=len(items))
        t_item = time.monotonic()
        u, tuned = self.deploy_whole(False), self.deploy_whole(True)
        if _algos(tuned) == _algos(u):
            g.update(verdict="the tuned build has the untuned build's kernels", s=round(time.monotonic() - t0, 2))
            return g
        first = self.race(tuned, u)
        # what one more check costs (two builds and a race): an item is begun only when it fits in the budget left,
        # else the check overran it by one item (ResNet-50 at load 4: 335 s for a 300 s budget, 20-40 s an item)
        item_s = time.monotonic() - t_item
        d = guard_decision(first[1])
        g.update(tuned_over_untuned=round(first[0], 3), tuned_rounds=first[1], tuned_interval=d["interval"],
                 tuned_decision=d["decision"])
        if d["decision"] == "gain":
            g.update(verdict=f"tuned build {1 / first[0]:.2f}x faster than untuned (interval "
                             f"{_iv(d['interval'])}): every record kept",
                     s=round(time.monotonic() - t0, 2))
            return g
        dropped: list[str] = []
        instead: dict[str, tuple[str, str]] = {}  # signature -> the runner-up's (forced fields, note)
        for k, sig in enumerate(items):
            if self.elapsed() + item_s > self.budget * self.share:
                g["unchecked"] = items[k:]
                g["unchecked_kept"] = g["tuned_decision"] != "loss"
                break
            t_item = time.monotonic()
            with_it = self.deploy_whole(True, frozenset(dropped), instead)
            without = self.deploy_whole(True, frozenset(dropped + [sig]), instead)
            if sig == tuningdb.LEARNED and _algos(with_it) == _algos(without):
                continue  # the learned constants move no pick of this model: nothing to time
            ratio, rounds = self.race(with_it, without)
            item_s = time.monotonic() - t_item
            if sig == tuningdb.LEARNED:
                x = {"signature": sig, "algo": f"learned constants ({learned})", "default_algo": "hand-set constants",
                     "alone_speedup": None}
            else:
                r = recs[sig]
                x = {"signature": sig, "algo": r.algo, "default_algo": r.default_algo,
                     "alone_speedup": round(r.speedup, 3)}
            d = guard_decision(rounds, x["alone_speedup"])
            x.update(with_over_without=round(ratio, 3), rounds=rounds, interval=d["interval"],
                     decision=d["decision"], kept=d["keep"])
            g["records"].append(x)
            self.progress("guard-record", signature=sig, kept=x["kept"], ratio=ratio)
            if x["kept"]:
                continue
            ru = self._runner_up(recs.get(sig), by_sig.get(sig))
            if ru is not None and self.elapsed() + item_s > self.budget * self.share:
                x["runner_up"] = {**ru, "checked": False, "why": "budget"}
            elif ru is not None:
                note = f"candidate {ru['variant']} (runner-up)"
                alt = self.deploy_whole(True, frozenset(dropped), {**instead, sig: (ru["forced"], note)})
                if _algos(alt) == _algos(without):  # another layer's pick hid it: the same code as without
                    x["runner_up"] = {**ru, "checked": False, "why": "the same code as the cost model's pick here"}
                else:
                    ratio2, rounds2 = self.race(alt, without)
                    d2 = guard_decision(rounds2, ru["alone_speedup"])
                    x["runner_up"] = {**ru, "checked": True, "with_over_without": round(ratio2, 3),
                                      "rounds": rounds2, "interval": d2["interval"], "decision": d2["decision"],
                                      "kept": d2["keep"]}
                    self.progress("guard-record", signature=sig, kept=d2["keep"], ratio=ratio2,
                                  runner_up=ru["variant"])
                    if d2["keep"]:
                        instead[sig] = (ru["forced"], note)
                        continue
            dropped.append(sig)
        if g["unchecked"] and not g["unchecked_kept"]:
            # the tuned build was significantly slower and these were not timed in the model: keeping them
            # unchecked could keep what made it slower
            why = (f"{UNCHECKED}: the tuned build took {first[0]:.2f}x the untuned time (interval "
                   f"{_iv(g['tuned_interval'])}) and the budget ran out before this record was timed in the model")
            for sig in g["unchecked"]:
                r = recs.get(sig)
                self.db.reject(tuningdb.Rejection(self.fp, key, sig, self.model.name, r.variant if r else "learned",
                                                  r.algo if r else "learned constants", why, self.device.name,
                                                  tuningdb.today()))
            dropped += [s for s in g["unchecked"] if s not in dropped]
        kept = [x["signature"] for x in g["records"] if x["kept"]] + (g["unchecked"] if g.get("unchecked_kept") else [])
        if (kept or instead) and not g["unchecked"] and self.elapsed() + item_s <= self.budget * self.share:
            # each kept item helps against the set without it; together they must not be significantly slower
            # than untuned (with nothing left out, that is the first race again)
            if dropped or instead:
                ratio, rounds = self.race(self.deploy_whole(True, frozenset(dropped), instead), u)
            else:
                ratio, rounds = first
            d = guard_decision(rounds)
            g.update(kept_over_untuned=round(ratio, 3), kept_rounds=rounds, kept_interval=d["interval"],
                     kept_decision=d["decision"])
            if d["decision"] == "loss":
                why = (f"the records kept in the check together took {ratio:.2f}x the untuned time (interval "
                       f"{_iv(d['interval'])})")
                for x in g["records"]:
                    ru = x.get("runner_up", {})
                    if x["kept"] or ru.get("kept"):
                        x["kept"] = False
                        x["why"] = why
                        if ru.get("kept"):
                            ru["kept"], ru["why"] = False, why
                        if x["signature"] not in dropped:
                            dropped.append(x["signature"])
                instead = {}
        for x in g["records"]:
            if x["kept"]:
                continue
            alone = f"; {x['alone_speedup']:.2f}x faster alone" if x["alone_speedup"] else ""
            x["why"] = x.get("why") or (f"with it the model took {x['with_over_without']:.2f}x its time without it, "
                                        f"median of {len(x['rounds'])} interleaved rounds, interval "
                                        f"{_iv(x['interval'])}: {_DECISION[x['decision']]}{alone}")
            r = recs.get(x["signature"])
            ru = x.get("runner_up", {})
            alt = ("", "", "")
            if ru.get("kept"):
                alt = (ru["forced"], ru["variant"], ru["algo"])
                g["replaced"][x["signature"]] = ru["variant"]
            self.db.reject(tuningdb.Rejection(self.fp, key, x["signature"], self.model.name,
                                              r.variant if r else "learned", x["algo"], x["why"],
                                              self.device.name, tuningdb.today(), *alt))
        g["dropped"] = dropped
        n = sum(1 for x in g["records"] if not x["kept"])
        if n:
            g["verdict"] = f"{n} of {len(g['records'])} checked rejected for this model"
            if g["replaced"]:
                g["verdict"] += f", {len(g['replaced'])} of them replaced by their runner-up"
        elif g["records"]:
            g["verdict"] = "every record checked kept in the model"
        else:
            g["verdict"] = "the tuned build is not faster than untuned"
        if g["unchecked"]:
            g["verdict"] += (f"; {len(g['unchecked'])} not checked (budget), kept" if g["unchecked_kept"] else
                             f"; {len(g['unchecked'])} not checked (budget), left out of this model's builds until "
                             "a later tune checks them (the tuned build was slower)")
        g["s"] = round(time.monotonic() - t0, 2)
        return g

    def _runner_up(self, rec: Record | None, job: Job | None) -> dict | None:
        """A rejected record's runner-up: the fastest other variant its layer timed alone (checked against
        onnxruntime then) whose kernel is neither the record's nor the cost model's pick and that was at least
        min_gain faster than the pick alone. None for the learned constants and regions (two layouts: the other
        one is the estimate's pick)."""
        from edgec.codegen import variants
        from edgec.codegen.targets import get_target

        if rec is None or job is None or job.region is not None:
            return None
        timed = [t for t in rec.trials if "ms" in t and t["variant"] not in ("default", rec.variant)
                 and t.get("algo") not in (rec.algo, rec.default_algo)
                 and t["ms"] * min_gain(t["variant"]) <= rec.default_ms]
        if not timed:
            return None
        best = min(timed, key=lambda t: t["ms"])
        vs = variants.candidates(job.node, get_target(self.device.target), job.facts)
        forcing_of = dict(variants.forcings(vs, job.facts, self.threads))
        forced = forcing_of.get(best["variant"])
        if not forced:  # a variant of a registry since changed
            return None
        forced = _keep_kernel(forced, rec.trials, forcing_of)
        return {"variant": best["variant"], "algo": best["algo"], "forced": forced,
                "alone_speedup": round(rec.default_ms / best["ms"], 3)}

    def compare_whole(self, untuned, tuned) -> float:
        """The tuned build against the untuned one, on the device, same inputs (every kernel of the tuned
        build was checked against onnxruntime alone; this catches what goes wrong between layers). Both are
        edgec builds, so an int8 model compares exactly too (int8 kernel paths requantize alike)."""
        from edgec.devices.bench import random_inputs, run_model

        inputs = random_inputs(self.model, self.input_shapes, seed=3)
        worst = 0.0
        for a, b in zip(run_model(untuned, inputs), run_model(tuned, inputs)):
            if a.shape != b.shape:
                raise EdgecError(f"the tuned build of {self.model.name} writes shape {b.shape}, the untuned {a.shape}")
            if a.size:
                d = np.abs(b.astype(np.float64) - a) / (1.0 + np.abs(a.astype(np.float64)))
                worst = max(worst, float(np.max(d)) if np.all(np.isfinite(d)) else np.inf)
        if worst > 1e-3:
            raise EdgecError(f"the tuned build of {self.model.name} differs from the untuned one on "
                             f"{self.device.name}: max relative error {worst:.2e}; rerun with --no-tuning builds")
        return worst


_DECISION = {"loss": "a significant loss", "inconclusive": "neither a significant gain nor loss, and its layer "
             f"less than {GUARD_LAYER_GAIN}x faster alone", "gain": "a significant gain"}


def _iv(interval) -> str:
    lo, hi = interval
    return f"{lo:.3f}-{hi:.3f}" if hi is not None else "unbounded (too few rounds)"


def median_interval(ratios: list[float], confidence: float = GUARD_CONFIDENCE) -> tuple[float, float, float]:
    """The median of the rounds' ratios and a distribution-free interval holding the true median with at least
    `confidence`: the k-th smallest and k-th largest round, k the largest with P(Binomial(n, 1/2) < k) <=
    (1 - confidence) / 2 (15 rounds, 0.9: the 4th of each end, 96.5%). Too few rounds for that: (median, 0, inf)."""
    x = sorted(float(r) for r in ratios)
    n = len(x)
    if not n:
        return 1.0, 0.0, math.inf
    tail, k, cdf = (1 - confidence) / 2, 0, 0.0
    while k < n and cdf + math.comb(n, k) / 2 ** n <= tail:
        cdf += math.comb(n, k) / 2 ** n
        k += 1
    med = float(np.median(x))
    return (med, 0.0, math.inf) if k == 0 else (med, x[k - 1], x[n - k])


def guard_decision(ratios: list[float], alone: float | None = None) -> dict:
    """The whole-model check's rule on one race's rounds (ratio: with the item / without it, or tuned / untuned):
    "gain" when the interval of the median (median_interval) lies below 1 (kept), "loss" when above (rejected),
    else "inconclusive": kept only when the layer ran at least GUARD_LAYER_GAIN faster alone (alone: the record's
    speedup over the cost model's pick; None for the learned constants and whole builds: not kept)."""
    med, lo, hi = median_interval(ratios)
    decision = "gain" if hi < 1 else "loss" if lo > 1 else "inconclusive"
    keep = decision == "gain" or (decision == "inconclusive" and alone is not None and alone >= GUARD_LAYER_GAIN)
    return {"median": round(med, 4), "interval": [round(lo, 4), round(hi, 4) if math.isfinite(hi) else None],
            "decision": decision, "keep": keep}


def _units(live: list[Candidate], jobs: int) -> list[list[str]]:
    """A program's candidates (their prefixes) in translation units: one per set of runtime headers they include
    (a unit parses its headers once: 0.2-1.2 s of CPU a candidate file at -O3 on the 2-core x86 host, most of its
    compile), the two smallest merged while there are more units than make jobs. In candidate order, so the same
    candidates give the same units (and cached objects) in a later search."""
    groups: dict[tuple, list[Candidate]] = {}
    for c in live:
        groups.setdefault(tuple(sorted(r for r in c.build.ctx.required if r.endswith(".h"))), []).append(c)
    units = list(groups.values())
    while len(units) > max(1, jobs):
        units.sort(key=len)  # stable: ties keep candidate order
        units.append(units.pop(0) + units.pop(0))
    units = [sorted(u, key=lambda c: c.index) for u in units]
    return [[c.build.prefix for c in u] for u in sorted(units, key=lambda u: u[0].index)]


def _algos(dep) -> list[str]:
    return [l.get("algo", "") for l in dep.build_info.get("layers", [])]


def _tuned_layers(dep) -> int:
    return sum(1 for l in dep.build_info.get("layers", []) if l.get("details", {}).get("tuned"))


def _shape(signature: str) -> tuple[float, ...] | None:
    m = _GEOMETRY.search(signature)
    if m is None:
        return None
    g = dict(zip("N C H W K G KH KW SH SW DH DW PT PL Ho Wo".split(), map(int, m.groups())))
    return (math.log(g["C"]), math.log(g["K"]), math.log(g["Ho"] * g["Wo"]), math.log(g["K"] / g["G"]))


def _nearest(signature: str, recs: list[Record]) -> list[Record]:
    """The source model's records of a layer's class that a transfer takes its variants from: the one nearest in
    shape (sum of |log ratio| of input and output channels, output pixels and channels per group; ties all), or
    every one where a signature has no geometry (regions, records made elsewhere). Taking every record of the
    class measured about what full tuning measures: mnv2g8's four grouped records between them named every
    Winograd variant and the GSPC paths, so a transfer to mnv2g16 built 5 candidates a layer, as its full tune."""
    me = _shape(signature)
    shapes = [_shape(r.signature) for r in recs]
    if me is None or not recs or any(s is None for s in shapes):
        return recs
    dist = [sum(abs(a - b) for a, b in zip(me, s)) for s in shapes]
    return [r for r, d in zip(recs, dist) if d <= min(dist) + 1e-9]


def _choose_source_model(jobs: list[Job], pool: list[Record]) -> str | None:
    """The one tuned model to transfer from: argmax_T sum_c P_c^2 sqrt(|W_Tc|)."""
    total = sum(j.macs for j in jobs) or 1
    share = defaultdict(float)
    for j in jobs:
        share[j.cls] += j.macs / total
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in pool:
        counts[r.model][r.cls] += 1
    scores = {m: sum(share[c] ** 2 * math.sqrt(n) for c, n in cs.items() if c in share) for m, cs in counts.items()}
    scores = {m: s for m, s in scores.items() if s > 0}
    return max(sorted(scores), key=lambda m: scores[m]) if scores else None


def tune(model: Path, device, t, *, threads: int = 1, budget: float = DEFAULT_BUDGET, transfer_only: bool = False,
         mode: str = "auto", input_shapes: dict | None = None, progress: Progress | None = None,
         db: TuningDB | None = None, after_run: Callable | None = None, runs: int | None = None,
         before_build: Callable | None = None, layout: str | None = None,
         final_bench: bool = True, guard: bool | None = None) -> dict:
    """Tune (or transfer-tune) a model's layers on a device; returns the report (see docs/tuning.md).
    layout: the activation layout the builds use (CompileOptions.layout; None: EDGEC_LAYOUT, as compile).
    guard: after the layer search, check the records in the whole model (Tuner.guard) and reject for this
    model those that do not make it faster; the layer search then stops at 1 - GUARD_SHARE of the budget (None:
    as final_bench)."""
    model = Path(model)
    if not model.is_file():
        raise EdgecError(f"{model} does not exist")
    if budget <= 0:
        raise EdgecError(f"--budget must be positive, got {budget}")
    tu = Tuner(model, device, t, threads=threads, mode=mode, budget=budget, input_shapes=input_shapes,
               progress=progress, db=db, after_run=after_run, runs=runs, before_build=before_build,
               layout=layout or CompileOptions.from_env().layout)
    try:
        return _tune(tu, model, device, threads, budget, transfer_only, input_shapes, final_bench,
                     final_bench if guard is None else guard)
    finally:  # the extracted layer models; records and builds stay
        import shutil
        if tu._work is not None:
            shutil.rmtree(tu._work, ignore_errors=True)
        if db is None:
            tu.db.close()


def _tune(tu: Tuner, model: Path, device, threads: int, budget: float, transfer_only: bool,
          input_shapes: dict | None, final_bench: bool, guard: bool = True) -> dict:
    prog = tu.progress
    with tu.phase("plan"):
        jobs = plan(model, device, threads, input_shapes, tu.layout)
    tu.share = 1.0 - GUARD_SHARE if guard else 1.0
    rejected = tu.db.rejections(tu.fp, tuningdb.model_key(model))
    prog("start", total=len(jobs), fingerprint=tu.fp)
    rows, measured, resumed, stopped = [], 0, 0, False
    pool = [r for r in tu.db.records(tu.fp) if r.model != model.name and (device.emulated or not r.emulated)]
    source_model = _choose_source_model(jobs, pool) if transfer_only else None
    best = 1.0
    deferred: list[tuple[dict, Job, list[str]]] = []  # transfer: measured together, in one program
    in_blocked: set[str] = set()  # layers of regions a record blocks: the region's choice, not tuned one by one
    batch, waiting = Batch(), {}  # full tuning: layers whose candidates share the next program; their rows, jobs

    def flush() -> None:
        """Build and run the program of the layers waiting, and record them."""
        nonlocal stopped, measured, best
        for sig, (rec, why) in tu.run_batch(batch).items():
            row, job = waiting.pop(sig)
            if rec is None:
                stopped = stopped or why == "budget"
                row["source"] = f"not measured: {why}"
            else:
                measured += 1
                row.update(source="measured", record=_rec_json(rec))
                best = max(best, row["record"]["speedup"])
                if job.region is not None and row["record"]["algo"].startswith("layout-nchwc"):
                    in_blocked.update(row["layers"])
            prog("done-layer", row=row, best=best)

    for j in jobs:
        row = {"signature": j.signature, "class": j.cls, "layers": j.layers, "macs": j.macs,
               "default_algo": j.default_algo}
        prog("layer", signature=j.signature, cls=j.cls, layers=len(j.layers))
        have = tu.db.get(tu.fp, j.signature)
        if j.region is None and j.layers and set(j.layers) <= in_blocked:
            row["source"] = "in a region tuned channel-blocked: not tuned alone"
        elif have is not None and (device.emulated or not have.emulated):
            where = "this model" if have.model == model.name else f"model {have.model}"
            row.update(source=f"exact record ({have.source} on {where}, {have.date})", record=_rec_json(have))
            if j.signature in rejected:
                row["rejected"] = rejected[j.signature].reason
            resumed += have.model == model.name
        elif stopped:
            row["source"] = "not measured: budget"
        elif transfer_only:
            kernels: dict[str, set | None] = {}  # variant -> the kernels it produced on the source model
            for r in _nearest(j.signature, [r for r in pool if r.model == source_model and r.cls == j.cls]):
                for v in r.transferable():
                    # a record with trials says which kernel its variant gave there (a record without does not)
                    if r.trials and kernels.get(v, set()) is not None:
                        kernels.setdefault(v, set()).add(r.kernel_of(v))
                    else:
                        kernels[v] = None
            names = sorted(kernels)
            tu.kernels[j.signature] = kernels
            if not names:
                row["source"] = f"no record of class {j.cls} to transfer: cost model's pick kept"
            else:
                deferred.append((row, j, names))
                rows.append(row)
                continue
        else:
            if j.region is not None:  # its record decides whether its layers are tuned: measured before them
                flush()
            why = "budget" if stopped else tu.add(batch, j)
            if not why:
                waiting[j.signature] = (row, j)
                rows.append(row)
                if j.region is not None or batch.candidates >= PROGRAM_CANDIDATES:
                    flush()
                continue
            stopped = why == "budget"
            row["source"] = f"not measured: {why}"
        if "record" in row:
            best = max(best, row["record"]["speedup"])
            if j.region is not None and row["record"]["algo"].startswith("layout-nchwc"):
                in_blocked.update(j.layers)
        rows.append(row)
        prog("done-layer", row=row, best=best)
    flush()
    if deferred:
        results = tu.measure_many([(j, names) for _, j, names in deferred], source=f"transferred from {source_model}")
        for (row, j, names), (rec, why) in zip(deferred, results):
            if rec is None:
                stopped = stopped or why == "budget"
                row["source"] = f"not measured: {why}"
            else:
                measured += 1
                row.update(source=f"transferred from {source_model} ({', '.join(names)})", record=_rec_json(rec))
                best = max(best, row["record"]["speedup"])
            prog("done-layer", row=row, best=best)
    report = {"model": str(model), "device": device.name, "emulated": device.emulated, "fingerprint": tu.fp,
              "facts": tu.facts, "threads": threads, "mode": tu.mode, "transfer_only": transfer_only,
              "source_model": source_model, "layers": rows, "measured": measured, "resumed": resumed,
              "stopped_at_budget": stopped, "budget_s": budget}
    report["search_s"] = round(tu.elapsed(), 2)
    report["programs"] = tu.programs  # measurement programs built: full tuning one per batch, transfer one
    report["program_layers"] = tu.program_layers
    report["phases"] = {k: round(v, 3) for k, v in tu.phases.items()}
    if guard:
        tu.share = 1.0
        if tu.over_budget():
            report["guard"] = {"verdict": "not run: the budget ran out in the layer search", "dropped": []}
        else:
            report["guard"] = tu.guard(jobs)
        for row in rows:
            for x in report["guard"].get("records", []):
                if x["signature"] == row["signature"] and not x["kept"]:
                    row["rejected"] = x["why"]
                    if x.get("runner_up", {}).get("kept"):
                        row["replaced_by"] = x["runner_up"]["variant"]
    if final_bench:
        prog("final")
        u_dep, t_dep = tu.deploy_whole(False), tu.deploy_whole(True)
        err = tu.compare_whole(u_dep, t_dep)
        clock = "cpu" if threads == 1 else "wall"  # as the check: at one thread, what others' processes add is left out
        u_ms, t_ms = tu._time(u_dep, clock=clock), tu._time(t_dep, clock=clock)
        report["whole_model"] = {"untuned_ms": u_ms, "tuned_ms": t_ms, "speedup": u_ms / t_ms, "clock": clock,
                                 "tuned_layers": _tuned_layers(t_dep), "max_rel_err_vs_untuned": err}
    return report


def _rec_json(r: Record) -> dict:
    return {"variant": r.variant, "algo": r.algo, "time_ms": r.time_ms, "default_algo": r.default_algo,
            "default_ms": r.default_ms, "speedup": round(r.speedup, 3), "source": r.source, "model": r.model,
            "date": r.date, "emulated": r.emulated, "trials": r.trials}
