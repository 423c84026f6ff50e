"""IR fusion passes: BatchNorm into weights, activations and residual Adds into producers' epilogues."""

from __future__ import annotations

import numpy as np

from edgec.codegen import registry
from edgec.codegen.ir import Graph, Node, Tensor

FLT_MAX = 3.4028234663852886e38


def _single_use(g: Graph, t: Tensor, users: dict) -> bool:
    return len(users.get(id(t), [])) == 1 and not any(t is o for o in g.outputs)


def _const(t: Tensor | None):
    return None if t is None or not t.is_const else t.const


def fold_batchnorm(g: Graph) -> Graph:
    """Conv/ConvTranspose/Gemm -> BatchNormalization becomes one node with rescaled weights and bias."""
    users, prod = g.consumers(), g.producers()
    drop: set[int] = set()
    for bn in g.nodes:
        if bn.op != "BatchNormalization" or any(_const(t) is None for t in bn.inputs[1:5]):
            continue
        p = prod.get(id(bn.inputs[0]))
        if p is None or p.op not in ("Conv", "ConvTranspose", "Gemm") or not _single_use(g, bn.inputs[0], users):
            continue
        if not p.epilogue.empty or _const(p.input(1)) is None or (p.input(2) is not None and _const(p.input(2)) is None):
            continue
        gamma, beta, mean, var = (t.const.astype(np.float64) for t in bn.inputs[1:5])
        s = gamma / np.sqrt(var + float(bn.attr("epsilon", 1e-5)))
        if not _fold_into(p, s, beta - mean * s):
            continue
        p.outputs[0] = bn.outputs[0]
        p.onnx_names += bn.onnx_names
        drop.add(id(bn))
    g.nodes = [n for n in g.nodes if id(n) not in drop]
    return g


def _fold_into(p: Node, s: np.ndarray, shift: np.ndarray) -> bool:
    w = p.input(1).const.astype(np.float64)
    m = s.shape[0]
    if p.op == "Conv":
        if w.shape[0] != m:
            return False
        w = w * s.reshape(-1, *([1] * (w.ndim - 1)))
        b = _const(p.input(2))
        b = np.zeros(m) if b is None else b.astype(np.float64)
    elif p.op == "ConvTranspose":
        grp = int(p.attr("group", 1))
        if w.shape[1] * grp != m:
            return False
        cin, opg = w.shape[0], w.shape[1]
        w = (w.reshape(grp, cin // grp, opg, -1) * s.reshape(grp, 1, opg, 1)).reshape(w.shape)
        b = _const(p.input(2))
        b = np.zeros(m) if b is None else b.astype(np.float64)
    else:  # Gemm: Y = alpha * A @ B' + beta * C, features on axis 1
        if p.attr("transB", 0):
            w = w * s[:, None]
        else:
            w = w * s[None, :]
        c = _const(p.input(2))
        if c is not None and c.size not in (1, m) or (c is not None and c.size == m and c.ndim > 1 and c.shape[-1] != m):
            return False
        c = np.zeros(m) if c is None else np.broadcast_to(c.astype(np.float64).reshape(-1), (m,))
        b = c * float(p.attr("beta", 1.0))
        p.attrs["beta"] = 1.0
    b = b * s + shift
    dt = p.input(1).dtype
    p.inputs[1] = Tensor(p.input(1).name + "__bn", w.shape, dt, w.astype(dt))
    bias = Tensor(p.outputs[0].name + "__bias", (m,), dt, b.astype(dt))
    if len(p.inputs) < 3:
        p.inputs.append(bias)
    else:
        p.inputs[2] = bias
    return True


def activation_of(n: Node) -> tuple[str, dict] | None:
    """(act, params) when node n is a plain activation the epilogue can express."""
    op = n.op
    if op == "Relu":
        return "relu", {}
    if op == "LeakyRelu":
        return "leaky_relu", {"alpha": float(n.attr("alpha", 0.01))}
    if op == "Sigmoid":
        return "sigmoid", {}
    if op == "Tanh":
        return "tanh", {}
    if op == "HardSigmoid":
        return "hard_sigmoid", {"alpha": float(n.attr("alpha", 0.2)), "beta": float(n.attr("beta", 0.5))}
    if op == "HardSwish":
        return "hard_swish", {}
    if op == "Gelu" and n.attr("approximate", "none") == "none":
        return "gelu", {}
    if op == "Clip":
        lo, hi = n.attr("min", -FLT_MAX), n.attr("max", FLT_MAX)
        for idx in (1, 2):
            t = n.input(idx)
            if t is not None:
                if not t.is_const:
                    return None
                if idx == 1:
                    lo = float(t.const.reshape(-1)[0])
                else:
                    hi = float(t.const.reshape(-1)[0])
        return "clip", {"min": float(lo), "max": float(hi)}
    return None


def _silu_partner(g: Graph, n: Node, users: dict, prod: dict) -> Node | None:
    """n = Sigmoid(x) used only by Mul(x, n): returns that Mul."""
    if n.op != "Sigmoid" or not _single_use(g, n.outputs[0], users):
        return None
    mul = users[id(n.outputs[0])][0]
    if mul.op != "Mul" or len(mul.inputs) != 2:
        return None
    x = n.inputs[0]
    other = mul.inputs[1] if mul.inputs[0] is n.outputs[0] else mul.inputs[0]
    return mul if other is x else None


def fuse_q8_luts(g: Graph) -> Graph:
    """A u8 -> u8 table (EcQLut: HardSwish, HardSigmoid, a Concat input's requantization ... as 256 entries)
    whose only input is a QLinearConv's output, used by it alone, moves into the conv (attr ec_lut): the
    depthwise driver applies it to each chunk of output channels while they are in L1 (q8_dwconv_run_lut),
    q8_conv's tasks to the part of the output each has just stored (q8_conv_params.lut), other routes in a
    pooled pass right after the conv; either way no layer of its own, no buffer between them."""
    users, prod = g.consumers(), g.producers()
    for c in list(g.nodes):
        lut = c.input(1) if c.op == "EcQLut" else None
        if lut is None or not lut.is_const or lut.size != 256:
            continue
        x, y = c.inputs[0], c.outputs[0]
        p = prod.get(id(x))
        if p is None or p.op != "QLinearConv" or p.attr("ec_lut") is not None or not _single_use(g, x, users):
            continue
        if len(x.shape) != 4 or x.dtype != y.dtype or x.shape != y.shape or x.block or y.block:
            continue
        p.attrs["ec_lut"] = lut.const.reshape(256)
        _replace(g, p, c)
    return g


def fuse_q8_adds(g: Graph) -> Graph:
    """An int8 residual Add (EcQAdd) one of whose operands is a 1x1 stride-1 ungrouped QLinearConv's output,
    used by it alone, the other computed before the conv, moves into the conv (attr ec_qadd = the Add, the
    other operand as epilogue.residual so it stays live): the GEMM applies it while storing (codegen/ops/
    quant.py; kernels without that run q8_add_f32 on the conv's output right after)."""
    users, prod = g.consumers(), g.producers()
    order = {id(n): i for i, n in enumerate(g.nodes)}
    for c in list(g.nodes):
        if c.op != "EcQAdd" or c.attr("ec_qadd") is not None:
            continue
        a, b, y = c.inputs[0], c.inputs[3], c.outputs[0]
        if a is None or b is None or a is b or a.shape != b.shape or y.shape != a.shape or len(a.shape) != 4:
            continue
        for t, other in sorted(((a, b), (b, a)), key=lambda tb: -order.get(id(prod.get(id(tb[0]))), -1)):
            p = prod.get(id(t))
            if p is None or p.op != "QLinearConv" or p.attr("ec_lut") is not None or not p.epilogue.empty or \
                    not _single_use(g, t, users) or t.block or other.block or y.block:
                continue
            w = p.input(3)
            k = list(p.attr("kernel_shape", [] if w is None else list(w.shape[2:])))
            if w is None or int(p.attr("group", 1)) != 1 or k != [1, 1] or \
                    any(v != 1 for v in p.attr("strides", [1, 1])) or any(v != 0 for v in p.attr("pads", [0] * 4)) or \
                    p.inputs[0].shape[2:] != t.shape[2:] or t.shape[2] * t.shape[3] == 1:
                continue
            src = prod.get(id(other))
            if src is not None and order[id(src)] > order[id(p)]:
                continue  # the residual must exist before the conv runs
            p.attrs["ec_qadd"] = c
            p.epilogue.residual = other
            _replace(g, p, c)
            break
    return g


def fuse_epilogues(g: Graph) -> Graph:
    """Move activations, SiLU (x*sigmoid(x)) and same-shape residual Adds into epilogue-capable producers;
    int8 tables into depthwise convs (fuse_q8_luts), int8 residual Adds into 1x1 convs (fuse_q8_adds)."""
    g = fuse_q8_adds(fuse_q8_luts(g))
    changed = True
    while changed:
        changed = False
        users, prod = g.consumers(), g.producers()
        order = {id(n): i for i, n in enumerate(g.nodes)}
        for p in g.nodes:
            spec = registry.get(p.op)
            if spec is None or not spec.epilogue or p.outputs[0].dtype != np.float32:
                continue
            y = p.outputs[0]
            if not _single_use(g, y, users) and not _silu_candidate(g, p, users):
                continue
            c = users[id(y)][0] if len(users.get(id(y), [])) == 1 else None
            if _try_act(g, p, c) or _try_silu(g, p, users, prod) or _try_residual(g, p, c, prod, order):
                changed = True
                break
    return g


def _silu_candidate(g: Graph, p: Node, users: dict) -> bool:
    y = p.outputs[0]
    us = users.get(id(y), [])
    return len(us) == 2 and not any(y is o for o in g.outputs) and {u.op for u in us} == {"Sigmoid", "Mul"}


def _replace(g: Graph, p: Node, c: Node) -> None:
    p.outputs[0] = c.outputs[0]
    p.onnx_names += c.onnx_names
    g.nodes.remove(c)


def _try_act(g: Graph, p: Node, c: Node | None) -> bool:
    if c is None or p.epilogue.act is not None or c.inputs[0] is not p.outputs[0]:
        return False
    act = activation_of(c)
    if act is None:
        return False
    p.epilogue.act, p.epilogue.act_params = act
    _replace(g, p, c)
    return True


def _try_silu(g: Graph, p: Node, users: dict, prod: dict) -> bool:
    if p.epilogue.act is not None or not _silu_candidate(g, p, users):
        return False
    sig = next(u for u in users[id(p.outputs[0])] if u.op == "Sigmoid")
    mul = _silu_partner(g, sig, users, prod)
    if mul is None or sig.inputs[0] is not p.outputs[0]:
        return False
    p.epilogue.act, p.epilogue.act_params = "silu", {}
    g.nodes.remove(sig)
    p.onnx_names += sig.onnx_names
    _replace(g, p, mul)
    return True


def _try_residual(g: Graph, p: Node, c: Node | None, prod: dict, order: dict) -> bool:
    if c is None or c.op not in ("Add", "Sum") or p.epilogue.residual is not None or len(c.inputs) != 2:
        return False
    y = p.outputs[0]
    other = c.inputs[1] if c.inputs[0] is y else c.inputs[0]
    if other is y or other.shape != y.shape or other.dtype != y.dtype or c.outputs[0].shape != y.shape:
        return False
    src = prod.get(id(other))
    if src is not None and order[id(src)] > order[id(p)]:
        return False  # the residual must exist before the producer runs
    p.epilogue.residual = other
    p.epilogue.residual_before_act = p.epilogue.act is None
    _replace(g, p, c)
    return True
