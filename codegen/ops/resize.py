"""Resize / Upsample: nearest and (multi-)linear, the common coordinate transformation modes.

Source coordinates depend only on shapes, so per-dimension index and weight tables are
computed here and stored with the weights; the generated loop is a table lookup.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node
from edgec.codegen.ops._util import block, full_loops, strides
from edgec.codegen.registry import register
from edgec.errors import EdgecError

COORD = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nearest",
         "half_pixel_symmetric")


def source_coord(mode: str, x: np.ndarray, scale: float, in_len: int, out_len: int) -> np.ndarray:
    """Output coordinate -> input coordinate (ONNX Resize spec; the output length is scale * in_len)."""
    out_f = scale * in_len
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if out_f != 1 else np.full_like(x, -0.5)
    if mode == "align_corners":
        return np.zeros_like(x) if out_f == 1 else x * (in_len - 1) / (out_f - 1)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_half_pixel_for_nearest":
        return (x + 0.5) / scale
    if mode == "half_pixel_symmetric":
        adj = out_len / (scale * in_len)
        offset = in_len / 2 * (1 - adj)
        return offset + (x + 0.5) / scale - 0.5
    raise KeyError(mode)


def nearest(mode: str, c: np.ndarray, scale: float) -> np.ndarray:
    if mode == "round_prefer_floor":
        i = np.where(c == np.floor(c) + 0.5, np.floor(c), np.round(c))
    elif mode == "round_prefer_ceil":
        i = np.floor(c + 0.5)
    elif mode == "floor":
        i = np.floor(c)
    else:
        i = np.ceil(c)
    return i


def _scales(node: Node, x, y) -> list[float]:
    r = len(x.shape)
    if node.op == "Upsample":
        t = node.input(1)
        sc = node.attr("scales") if t is None else [float(v) for v in t.const.reshape(-1)]
        return list(sc)
    t = node.input(2)
    axes = node.attr("axes")
    if t is not None and t.size:
        vals = [float(v) for v in t.const.reshape(-1)]
        if axes:
            full = [1.0] * r
            for a, v in zip(axes, vals):
                full[a % r] = v
            return full
        return vals
    return [o / i for o, i in zip(y.shape, x.shape)]


def _check(node: Node):
    mode = node.attr("mode", "nearest")
    ctm = node.attr("coordinate_transformation_mode", "half_pixel" if node.op == "Resize" else "asymmetric")
    if node.op == "Upsample":
        ctm = "asymmetric"
        mode = "linear" if mode in ("linear", "bilinear") else mode
    why = None
    if mode not in ("nearest", "linear"):
        why = f"mode {mode}"
    elif ctm not in COORD:
        why = f"coordinate_transformation_mode {ctm}"
    elif node.attr("antialias", 0):
        why = "antialias"
    elif node.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        why = "keep_aspect_ratio_policy"
    for i in (2, 3) if node.op == "Resize" else (1,):
        t = node.input(i)
        if t is not None and not t.is_const:
            why = "scales/sizes computed at run time"
    if why:
        raise EdgecError(f"node {node.name} ({node.op}): {why} is not supported")
    return mode, ctm


@register("Resize", "Upsample")
def emit_resize(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    mode, ctm = _check(node)
    scales = _scales(node, x, y)
    xs = strides(x.shape)
    r = len(x.shape)
    terms: list[list[tuple[str, str | None]]] = []  # per dim: [(index expr, weight expr or None)]
    for k in range(r):
        n_in, n_out = x.shape[k], y.shape[k]
        if n_in == 1:
            terms.append([("0", None)])
            continue
        oc = np.arange(n_out, dtype=np.float64)
        c = source_coord(ctm, oc, scales[k], n_in, n_out)
        if mode == "nearest":
            nmode = "floor" if node.op == "Upsample" else node.attr("nearest_mode", "round_prefer_floor")
            idx = np.clip(nearest(nmode, c, scales[k]), 0, n_in - 1)
            if n_in == n_out and np.array_equal(idx, oc):
                terms.append([(f"i{k} * {xs[k]}", None)])
            else:
                t = ctx.weight(f"rs:{node.name}:{k}", (idx * xs[k]).astype(np.int32))
                terms.append([(f"{t}[i{k}]", None)])
            continue
        lo = np.floor(c)
        w = (c - lo).astype(np.float32)
        lo_i, hi_i = np.clip(lo, 0, n_in - 1), np.clip(lo + 1, 0, n_in - 1)
        if n_in == n_out and np.array_equal(lo_i, oc) and not w.any():
            terms.append([(f"i{k} * {xs[k]}", None)])
            continue
        tl = ctx.weight(f"rs:{node.name}:{k}:lo", (lo_i * xs[k]).astype(np.int32))
        th = ctx.weight(f"rs:{node.name}:{k}:hi", (hi_i * xs[k]).astype(np.int32))
        tw = ctx.weight(f"rs:{node.name}:{k}:w", w)
        terms.append([(f"{tl}[i{k}]", f"(1.0f - {tw}[i{k}])"), (f"{th}[i{k}]", f"{tw}[i{k}]")])
    if sum(len(t) > 1 for t in terms) > 3:
        raise EdgecError(f"node {node.name} ({node.op}): linear resize over more than 3 dimensions is not supported")
    xp, yp = ctx.ptr(x), ctx.ptr(y)
    parts = []
    for combo in itertools.product(*terms):
        idx = " + ".join(c[0] for c in combo)
        ws = [c[1] for c in combo if c[1] is not None]
        parts.append(" * ".join(ws + [f"{xp}[{idx}]"]))
    dst = " + ".join(f"i{k} * {s}" for k, s in enumerate(strides(y.shape))) or "0"
    ctx.note(algo=f"resize-{mode}", macs=y.size * len(parts))
    return block(full_loops(y.shape, [f"{yp}[{dst}] = {' + '.join(parts)};"]))
