"""Resize / Upsample: nearest, (multi-)linear and cubic, the common coordinate transformation modes.

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


def cubic_taps(c: np.ndarray, n_in: int, a: float, exclude_outside: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """Four (clamped index, weight) tables per output position (Keys cubic, ONNX reference conventions)."""
    whole = c == np.floor(c)
    base = np.where(whole, c - 2, np.floor(c) - 1)
    t = np.where(whole, 1.0, c - np.floor(c))
    u = 1 - t
    w = [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a, ((a + 2) * t - (a + 3)) * t * t + 1,
         ((a + 2) * u - (a + 3)) * u * u + 1, ((a * (u + 1) - 5 * a) * (u + 1) + 8 * a) * (u + 1) - 4 * a]
    idx = [base + j for j in range(4)]
    if exclude_outside:
        w = [np.where((i < 0) | (i >= n_in), 0.0, wj) for i, wj in zip(idx, w)]
        total = sum(w)
        w = [wj / total for wj in w]
    return [(np.clip(i, 0, n_in - 1), wj) for i, wj in zip(idx, w)]


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
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    sizes = node.input(3)
    if policy != "stretch" and sizes is not None and sizes.size:
        # one scale for the listed axes: the largest that fits (not_larger) or the smallest that covers
        ax = [a % r for a in (axes or range(r))]
        ratios = [float(v) / x.shape[a] for a, v in zip(ax, sizes.const.reshape(-1))]
        k = min(ratios) if policy == "not_larger" else max(ratios)
        return [k if d in ax else 1.0 for d in range(r)]
    return [o / i for o, i in zip(y.shape, x.shape)]


def _check(node: Node):
    mode = node.attr("mode", "nearest")
    ctm = node.attr("coordinate_transformation_mode", "half_pixel" if node.op == "Resize" else "asymmetric")
    if node.op == "Upsample":
        ctm = "asymmetric"
        mode = "linear" if mode in ("linear", "bilinear") else mode
    why = None
    if mode not in ("nearest", "linear", "cubic"):
        why = f"mode {mode}"
    elif ctm not in COORD:
        why = f"coordinate_transformation_mode {ctm}"
    elif node.attr("antialias", 0):
        why = "antialias"
    for i in (2, 3) if node.op == "Resize" else (1,):
        t = node.input(i)
        if t is not None and not t.is_const:
            why = "scales/sizes computed at run time"
    if why:
        raise EdgecError(f"node {node.name} ({node.op}): {why} is not supported")
    return mode, ctm


def _taps(node: Node, mode: str, c: np.ndarray, oc: np.ndarray, n_in: int) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """(source index table, weight table or None) per tap along one dimension."""
    if mode == "nearest":
        nmode = "floor" if node.op == "Upsample" else node.attr("nearest_mode", "round_prefer_floor")
        return [(np.clip(nearest(nmode, c, 1.0), 0, n_in - 1), None)]
    if mode == "cubic":
        return cubic_taps(c, n_in, float(node.attr("cubic_coeff_a", -0.75)), bool(node.attr("exclude_outside", 0)))
    lo = np.floor(c)
    w = c - lo
    if not w.any():
        return [(np.clip(lo, 0, n_in - 1), None)]
    return [(np.clip(lo, 0, n_in - 1), 1 - w), (np.clip(lo + 1, 0, n_in - 1), w)]


def _dim_terms(node: Node, ctx: EmitContext, k: int, taps, stride: int, oc: np.ndarray) -> list[tuple[str, str | None]]:
    """C expressions per tap: an identity mapping needs no table."""
    if len(taps) == 1 and taps[0][1] is None and len(taps[0][0]) == len(oc) and np.array_equal(taps[0][0], oc):
        return [(f"i{k} * {stride}", None)]
    out = []
    for j, (idx, wt) in enumerate(taps):
        ti = ctx.weight(f"rs:{node.name}:{k}:i{j}", (idx * stride).astype(np.int32))
        tw = None if wt is None else f"{ctx.weight(f'rs:{node.name}:{k}:w{j}', wt.astype(np.float32))}[i{k}]"
        out.append((f"{ti}[i{k}]", tw))
    return out


@register("Resize", "Upsample")
def emit_resize(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    mode, ctm = _check(node)
    scales = _scales(node, x, y)
    xs = strides(x.shape)
    terms: list[list[tuple[str, str | None]]] = []  # per dim: [(index expr, weight expr or None)]
    for k in range(len(x.shape)):
        n_in, n_out = x.shape[k], y.shape[k]
        if n_in == 1:
            terms.append([("0", None)])
            continue
        oc = np.arange(n_out, dtype=np.float64)
        c = source_coord(ctm, oc, scales[k], n_in, n_out)
        terms.append(_dim_terms(node, ctx, k, _taps(node, mode, c, oc, n_in), xs[k], oc))
    if int(np.prod([len(t) for t in terms])) > 64:
        raise EdgecError(f"node {node.name} ({node.op}): {mode} resize over this many dimensions is not supported")
    xp, yp = ctx.ptr(x), ctx.ptr(y)
    parts = []
    for combo in itertools.product(*terms):
        idx = " + ".join(c[0] for c in combo)
        ws = [c[1] for c in combo if c[1] is not None]
        parts.append(" * ".join(ws + [f"{xp}[{idx}]"]))
    dst = " + ".join(f"i{k} * {s}" for k, s in enumerate(strides(y.shape))) or "0"
    ctx.note(algo=f"resize-{mode}", macs=y.size * len(parts))
    return block(full_loops(y.shape, [f"{yp}[{dst}] = {' + '.join(parts)};"], ctx=ctx, work=2 * y.size))
