"""What int8 costs and buys before deploying: per layer its own int8 error and predicted speed-up on the target,
and the whole model's predicted latency ratio for the chosen int8/float mix.

Error: each Conv/Gemm run alone with int8 input and weights (its input quantize-dequantized with the QDQ model's
scale and zero point, its dequantized weights and bias) beside the fp32 layer on the same fp32 input: SQNR in dB
(10 log10 of output energy over error energy) on up to 32 calibration samples.

Speed: no timing at optimize time. A layer's time is its MACs over the MAC rate of the kernel path it takes
(GEMM: dense and 1x1 convs, Gemm, MatMul; depthwise; grouped), fp32 or int8, from RATES; other ops cost per
output element: int8 elementwise kernels (tables, Add, Mul, pools), fp32 elementwise ops (activations right after a
fp32 conv are fused: free), and the Quantize/Dequantize a float island adds at each edge. RATES were measured on
this repository's test models (per-layer profiles of compiled ppocr cls and digits CNN, fp32 and int8 builds,
`python benchmarks/bench_accuracy.py --rates`): x86 AVX2 only. Other targets have no per-path measurement: AVX-512
VNNI uses the whole-model int8/fp32 ratio of ppocr cls from docs/benchmarks.md for every path; Arm and the rest
report no prediction.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from edgec.optimizer.graph import attr, get_init
from edgec.optimizer.runner import session, with_outputs

# GMAC/s per path, (fp32, int8), 1 thread. AMD EPYC Zen 3, x86_64-avx2, 24 Nov 2026 (benchmarks/bench_accuracy.py
# --rates; per-layer minimum of 5 profiled runs): 8-bit weights run the vpmaddwd kernels, 7-bit weights
# (reduce_range, what --target x86_64-avx2 picks) the vpmaddubsw GEMM.
RATES = {
    "x86_64-avx2": {"gemm": (25.7, 19.9), "depthwise": (10.9, 16.2), "grouped": (19.5, 13.3)},
    "x86_64-avx2/7-bit": {"gemm": (25.7, 38.8), "depthwise": (10.9, 21.5), "grouped": (19.5, 13.2)},
    # Intel Xeon Emerald Rapids running the x86_64-avx2-vnni build (AVX2 + AVX-VNNI on a Raptor Cove core, the
    # Alder / Raptor Lake P-core), 29 Nov 2026, `bench_accuracy.py --rates --target x86_64-avx2-vnni`, 8-bit
    # weights; per path the fastest of 5 runs (the host swings between fast and slow spells of minutes)
    "x86_64-avx2-vnni": {"gemm": (33.2, 81.1), "depthwise": (32.1, 33.5), "grouped": (23.5, 65.1)},
    # not measured per path here (no AVX-512 on this host): ppocr cls int8 0.428 ms vs fp32 0.708 ms
    "x86_64-avx512-vnni": {"gemm": (1.0, 1.65), "depthwise": (1.0, 1.65), "grouped": (1.0, 1.65)},
    # AMX GEMMs (Xeon Emerald Rapids, 29 Nov 2026): SqueezeNet 1.1 fp32/int8 3.4x, ResNet-50 2.7-4.0x whole-model
    # (bench_int8.py); depthwise and grouped convs run the VNNI kernels there
    "x86_64-avx512-amx": {"gemm": (1.0, 3.4), "depthwise": (1.0, 1.65), "grouped": (1.0, 1.65)},
}
SOURCES = {
    "x86_64-avx2": "measured per kernel path on AMD Zen 3 (x86_64-avx2, 8-bit weights)",
    "x86_64-avx2/7-bit": "measured per kernel path on AMD Zen 3 (x86_64-avx2, 7-bit weights)",
    "x86_64-avx2-vnni": "measured per kernel path on an Intel Xeon (Emerald Rapids) core running x86_64-avx2-vnni",
    "x86_64-avx512-vnni": "estimate: the whole-model ppocr cls int8/fp32 ratio (docs/benchmarks.md) for every path",
    "x86_64-avx512-amx": "estimate: whole-model SqueezeNet / ResNet-50 fp32/int8 ratios for the GEMM path, the VNNI "
                         "estimate for the others",
}
# ns per output element (same measurements)
NS_INT8_ELEMENTWISE = 0.166   # tables, int8 Add/Mul, GlobalAveragePool, MaxPool
NS_FP32_ELEMENTWISE = 0.054   # unfused fp32 elementwise (Mul, Add, pools)
NS_QUANTIZE, NS_DEQUANTIZE = 0.41, 0.115
FUSED = {"Relu", "Clip", "HardSwish", "HardSigmoid", "Sigmoid", "LeakyRelu", "Tanh", "BatchNormalization"}
WEIGHTED = {"Conv", "Gemm", "MatMul"}


def rates_for(target: str | None, reduce_range: bool) -> tuple[str | None, dict | None]:
    """(key, rates) for the compile target (None = native), or (name, None) when nothing is known for it."""
    from edgec.codegen.targets import get_target

    try:
        t = get_target(target or "native")
    except Exception:
        return target, None
    if t.isa == "avx2" and t.arch == "x86_64" and "avx_vnni" in t.features:
        key = "x86_64-avx2-vnni"  # vpdpbusd: 8-bit weights at full rate, 7-bit ones gain nothing there
    elif t.isa == "avx2" and t.arch == "x86_64":
        key = "x86_64-avx2/7-bit" if reduce_range else "x86_64-avx2"
    elif t.isa == "avx512" and "amx_int8" in t.features:
        key = "x86_64-avx512-amx"
    elif t.isa == "avx512" and "avx512_vnni" in t.features:
        key = "x86_64-avx512-vnni"
    else:
        return t.name, None
    return key, RATES[key]


def _kind(node, shapes) -> str:
    if node.op_type != "Conv":
        return "gemm"
    group = int(attr(node, "group", 1))
    if group == 1:
        return "gemm"
    cin = (shapes.get(node.input[0]) or [0, 0])[1]
    return "depthwise" if cin and group == cin else "grouped"


def _elems(shapes, name) -> int:
    s = shapes.get(name)
    return int(np.prod(s)) if s and all(isinstance(d, int) and d > 0 for d in s) else 0


def _shapes(model: onnx.ModelProto) -> dict:
    from edgec.model import infer_shapes

    m = infer_shapes(model)
    out = {}
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        dims = vi.type.tensor_type.shape.dim
        out[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    return out


def predicted_times(model: onnx.ModelProto, macs: dict, rates: dict, int8: set[str]) -> dict:
    """Predicted time (ns) of model (fp32 or QDQ) with the nodes in `int8` running int8; see the module doc."""
    shapes = _shapes(model)
    inits = {t.name for t in model.graph.initializer}
    prod = {o: n for n in model.graph.node for o in n.output}
    cons: dict[str, list] = {}
    for n in model.graph.node:
        for i in n.input:
            cons.setdefault(i, []).append(n)

    def is_int8(n) -> bool:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            return False
        if n.op_type in WEIGHTED or n.name in int8:
            return n.name in int8
        # a float op between Dequantize and Quantize runs as an int8 kernel or table
        ins = [i for i in n.input if i and i not in inits]
        outs = [c for o in n.output for c in cons.get(o, [])]
        return bool(ins) and all(prod.get(i) is not None and prod[i].op_type == "DequantizeLinear" for i in ins) \
            and bool(outs) and all(c.op_type == "QuantizeLinear" for c in outs)

    runs8 = {n.name for n in model.graph.node if is_int8(n)}
    total = {"conv_ns": 0.0, "other_ns": 0.0, "boundary_ns": 0.0}
    for n in model.graph.node:
        if n.op_type in WEIGHTED and macs.get(n.name):
            fp, i8 = rates[_kind(n, shapes)]
            total["conv_ns"] += macs[n.name] / (i8 if n.name in runs8 else fp)
        elif n.op_type == "QuantizeLinear":
            p = prod.get(n.input[0])
            if n.input[0] not in inits and (p is None or p.name not in runs8):
                total["boundary_ns"] += _elems(shapes, n.input[0]) * NS_QUANTIZE
        elif n.op_type == "DequantizeLinear":
            if n.input[0] not in inits and any(c.name not in runs8 and c.op_type != "QuantizeLinear"
                                               for c in cons.get(n.output[0], [])):
                total["boundary_ns"] += _elems(shapes, n.output[0]) * NS_DEQUANTIZE
        elif n.name in runs8:
            total["other_ns"] += _elems(shapes, n.output[0]) * NS_INT8_ELEMENTWISE
        elif n.op_type in FUSED and prod.get(n.input[0]) is not None and prod[n.input[0]].op_type in WEIGHTED:
            continue
        elif n.op_type not in ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Constant"):
            total["other_ns"] += _elems(shapes, n.output[0]) * NS_FP32_ELEMENTWISE
    total["total_ns"] = sum(total.values())
    return total


def layer_sqnr(fp32: onnx.ModelProto, q: onnx.ModelProto, feeds: list[dict]) -> dict[str, float]:
    """node name -> SQNR (dB) of that Conv/Gemm alone with q's int8 input and weights (see the module doc)."""
    from edgec.optimizer.equalize import dequantized_weights

    deq = dequantized_weights(q)
    prod = {o: n for n in q.graph.node for o in n.output}
    qnodes = {n.name: n for n in q.graph.node}
    m = onnx.ModelProto()
    m.CopyFrom(fp32)
    pairs = {}
    for n in list(m.graph.node):
        qn = qnodes.get(n.name)
        if n.name not in deq or qn is None:
            continue
        dq = prod.get(qn.input[0])
        if dq is None or dq.op_type != "DequantizeLinear":
            continue
        scale, zp = get_init(q, dq.input[1]), get_init(q, dq.input[2]) if len(dq.input) > 2 else None
        if scale is None:
            continue
        p = f"{n.name}.int8_alone"
        m.graph.initializer.extend([numpy_helper.from_array(scale, p + ".s"), numpy_helper.from_array(deq[n.name], p + ".w")])
        ins = [n.input[0] + "", p + ".w"]
        qargs = [n.input[0], p + ".s"]
        if zp is not None:
            m.graph.initializer.append(numpy_helper.from_array(zp, p + ".z"))
            qargs.append(p + ".z")
        m.graph.node.extend([helper.make_node("QuantizeLinear", qargs, [p + ".q"]),
                             helper.make_node("DequantizeLinear", [p + ".q"] + qargs[1:], [p + ".x"])])
        ins[0] = p + ".x"
        bias = _bias(q, qn)
        if bias is not None:
            m.graph.initializer.append(numpy_helper.from_array(bias, p + ".b"))
            ins.append(p + ".b")
        twin = helper.make_node(n.op_type, ins, [p + ".y"], name=p)
        twin.attribute.extend(n.attribute)
        m.graph.node.append(twin)
        pairs[n.name] = (n.output[0], p + ".y")
    if not pairs or not feeds:
        return {}
    sess = session(with_outputs(m, [t for pr in pairs.values() for t in pr]))
    names = [o.name for o in sess.get_outputs()]
    sig, err = dict.fromkeys(pairs, 0.0), dict.fromkeys(pairs, 0.0)
    for feed in feeds:
        outs = dict(zip(names, sess.run(None, feed)))
        for k, (a, b) in pairs.items():
            y = outs[a].astype(np.float64)
            sig[k] += float((y * y).sum())
            err[k] += float(((y - outs[b]) ** 2).sum())
    return {k: float(10 * np.log10(max(sig[k], 1e-30) / max(err[k], 1e-30))) for k in pairs}


def _bias(q, node) -> np.ndarray | None:
    if len(node.input) < 3 or not node.input[2]:
        return None
    b = get_init(q, node.input[2])
    if b is not None:
        return b.astype(np.float32)
    prod = {o: n for n in q.graph.node for o in n.output}
    dq = prod.get(node.input[2])
    if dq is None or dq.op_type != "DequantizeLinear":
        return None
    v, s = get_init(q, dq.input[0]), get_init(q, dq.input[1])
    if v is None or s is None:
        return None
    return (v.astype(np.float64) * s.astype(np.float64)).astype(np.float32)


def report(fp32: onnx.ModelProto, q: onnx.ModelProto, int8_names: list[str], macs: dict, feeds: list[dict],
           target: str | None, reduce_range: bool) -> dict:
    """The report's `int8_cost`: per layer (name, op, path, MACs, int8 or float, SQNR, predicted speed-up) and
    the whole model's predicted latency ratio fp32 / chosen mix, with where the numbers come from."""
    key, rates = rates_for(target, reduce_range)
    int8 = set(int8_names)
    sqnr = layer_sqnr(fp32, q, feeds[:32])
    shapes = _shapes(fp32)
    rows = []
    for n in fp32.graph.node:
        if n.op_type not in WEIGHTED or not macs.get(n.name):
            continue
        kind = _kind(n, shapes)
        row = {"name": n.name, "op": n.op_type, "path": kind, "macs": macs[n.name], "int8": n.name in int8,
               "sqnr_db": sqnr.get(n.name)}
        if rates is not None:
            fp, i8 = rates[kind]
            row["predicted_speedup"] = i8 / fp
        rows.append(row)
    out = {"target": key, "layers": rows, "sqnr": "each layer alone: int8 input and weights vs fp32, "
                                                   f"{min(len(feeds), 32)} calibration samples"}
    if rates is None:
        out["source"] = "no int8/fp32 rates measured for this target: no speed prediction"
        return out
    out["source"] = SOURCES[key] + "; other ops per output element; Quantize/Dequantize at float-island edges"
    t_fp32 = predicted_times(fp32, macs, rates, set())
    t_mix = predicted_times(q, macs, rates, int8)
    float_macs = sum(r["macs"] for r in rows if not r["int8"])
    out["model"] = {"fp32_us": t_fp32["total_ns"] / 1e3, "mix_us": t_mix["total_ns"] / 1e3,
                    "predicted_speedup": t_fp32["total_ns"] / max(t_mix["total_ns"], 1e-9),
                    "boundary_us": t_mix["boundary_ns"] / 1e3,
                    "float_mac_share": float_macs / max(sum(r["macs"] for r in rows), 1)}
    return out
