"""Weight pruning: unstructured (L1 magnitude), block RxC and N:M, on Conv/Gemm/MatMul weights.

Specs: `unstructured:S`, `block:RxC:S`, `nm:N:M` (N weights kept of every M along the input axis), `channel:R`
(see channel.py). Weights are viewed as 2-D [out, in*kh*kw] (Gemm with transB=0 and MatMul are transposed to
that view) so blocks run along the axis block-sparse kernels read. The first conv and last classifier are
skipped unless asked for: they are small and hurt accuracy most.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import onnx

from edgec.errors import EdgecError
from edgec.optimizer.graph import attr, get_init, set_init, topo_sort


@dataclass(frozen=True)
class PruneSpec:
    kind: str            # unstructured | block | nm | channel
    amount: float = 0.0  # sparsity S or channel ratio R
    block: tuple = (1, 1)
    n: int = 0
    m: int = 0

    def __str__(self) -> str:
        if self.kind == "block":
            return f"block:{self.block[0]}x{self.block[1]}:{self.amount:g}"
        if self.kind == "nm":
            return f"nm:{self.n}:{self.m}"
        return f"{self.kind}:{self.amount:g}"


def _fraction(text: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise EdgecError(f"prune spec {spec!r}: {text!r} is not a number") from None
    if not 0.0 <= value < 1.0:
        raise EdgecError(f"prune spec {spec!r}: sparsity must be in [0, 1), got {value:g}")
    return value


def parse_spec(spec: str) -> PruneSpec:
    """Parse one --prune value; a bad spec is one clear line."""
    parts = spec.strip().split(":")
    kind = parts[0].lower()
    hint = "expected unstructured:S, block:RxC:S, nm:N:M or channel:R (e.g. channel:0.3)"
    if kind in ("unstructured", "channel") and len(parts) == 2:
        return PruneSpec(kind, _fraction(parts[1], spec))
    if kind == "block" and len(parts) == 3:
        mt = re.fullmatch(r"(\d+)x(\d+)", parts[1].lower())
        if not mt or int(mt.group(1)) < 1 or int(mt.group(2)) < 1:
            raise EdgecError(f"prune spec {spec!r}: block size must look like 4x4 or 1x4")
        return PruneSpec("block", _fraction(parts[2], spec), (int(mt.group(1)), int(mt.group(2))))
    if kind == "nm" and len(parts) == 3:
        try:
            n, m = int(parts[1]), int(parts[2])
        except ValueError:
            raise EdgecError(f"prune spec {spec!r}: N and M must be whole numbers") from None
        if not 0 < n < m:
            raise EdgecError(f"prune spec {spec!r}: need 0 < N < M (N weights kept of every M)")
        return PruneSpec("nm", 1.0 - n / m, n=n, m=m)
    raise EdgecError(f"unknown prune spec {spec!r}: {hint}")


def weight_layers(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    inits = {t.name for t in model.graph.initializer}
    return [n for n in model.graph.node if n.op_type in ("Conv", "Gemm", "MatMul") and len(n.input) > 1
            and n.input[1] in inits and not (n.op_type == "Gemm" and attr(n, "transA", 0))]


def select_layers(model: onnx.ModelProto, skip: list[str], first_last: bool) -> tuple[list, list[str]]:
    """Layers to prune, and a note for each one skipped."""
    layers = weight_layers(topo_sort(model))
    graph_in = {v.name for v in model.graph.input}
    notes, chosen = [], []
    for i, n in enumerate(layers):
        if n.name in skip:
            notes.append(f"{n.name}: skipped (skip list)")
        elif not first_last and n.op_type == "Conv" and n.input[0] in graph_in:
            notes.append(f"{n.name}: skipped (first conv; set prune_first_last to include it)")
        elif not first_last and i == len(layers) - 1 and n.op_type in ("Gemm", "MatMul"):
            notes.append(f"{n.name}: skipped (last classifier; set prune_first_last to include it)")
        else:
            chosen.append(n)
    return chosen, notes


def as_rows(node: onnx.NodeProto, w: np.ndarray) -> np.ndarray:
    """The [out, in...] view of a weight (a copy for Gemm transB=0 / MatMul)."""
    if node.op_type == "Conv":
        return w.reshape(w.shape[0], -1)
    if node.op_type == "Gemm" and attr(node, "transB", 0):
        return w
    return w.T


def from_rows(node: onnx.NodeProto, rows: np.ndarray, shape) -> np.ndarray:
    if node.op_type == "Conv":
        return rows.reshape(shape)
    if node.op_type == "Gemm" and attr(node, "transB", 0):
        return rows
    return rows.T


def _magnitude(rows: np.ndarray, s: float, threshold: float | None = None) -> np.ndarray:
    if threshold is None:
        k = int(round(s * rows.size))
        if k == 0:
            return rows
        order = np.argsort(np.abs(rows), axis=None, kind="stable")[:k]
        out = rows.copy().reshape(-1)
        out[order] = 0
        return out.reshape(rows.shape)
    return np.where(np.abs(rows) <= threshold, 0, rows).astype(rows.dtype)


def _block(rows: np.ndarray, s: float, r: int, c: int) -> np.ndarray:
    """Zero the lowest-L1 RxC blocks; edge blocks are smaller but still zeroed whole."""
    h, w = rows.shape
    nbr, nbc = -(-h // r), -(-w // c)
    padded = np.zeros((nbr * r, nbc * c), rows.dtype)
    padded[:h, :w] = rows
    norms = np.abs(padded).reshape(nbr, r, nbc, c).sum(axis=(1, 3))
    k = int(round(s * norms.size))
    if k == 0:
        return rows
    mask = np.ones(norms.size, bool)
    mask[np.argsort(norms, axis=None, kind="stable")[:k]] = False
    full = np.repeat(np.repeat(mask.reshape(nbr, nbc), r, axis=0), c, axis=1)[:h, :w]
    return (rows * full).astype(rows.dtype)


def _nm(rows: np.ndarray, n: int, m: int) -> np.ndarray:
    """Keep the n largest of every m consecutive weights along the input axis (a short tail keeps all)."""
    h, w = rows.shape
    full = (w // m) * m
    out = rows.copy()
    groups = out[:, :full].reshape(h, -1, m)
    drop = np.argsort(np.abs(groups), axis=2, kind="stable")[:, :, : m - n]
    np.put_along_axis(groups, drop, 0, axis=2)
    out[:, :full] = groups.reshape(h, full)
    return out


def prune_weights(model: onnx.ModelProto, spec: PruneSpec, *, skip=(), first_last=False, overrides=None,
                  scope: str = "layer", notes: list | None = None) -> onnx.ModelProto:
    """Return a copy with the chosen layers' weights sparsified per spec (shapes unchanged)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    layers, skipped = select_layers(m, list(skip), first_last)
    overrides = overrides or {}
    threshold = None
    if spec.kind == "unstructured" and scope == "global":
        allw = np.concatenate([np.abs(get_init(m, n.input[1])).ravel() for n in layers if n.name not in overrides] or [np.zeros(0)])
        k = int(round(spec.amount * allw.size))
        threshold = float(np.partition(allw, k - 1)[k - 1]) if k > 0 else None
    for n in layers:
        w = get_init(m, n.input[1])
        s = float(overrides.get(n.name, spec.amount))
        rows = as_rows(n, w)
        if spec.kind == "unstructured":
            new = _magnitude(rows, s, None if n.name in overrides else threshold)
            if threshold is None and s == 0:
                continue
        elif spec.kind == "block":
            new = _block(rows, s, *spec.block)
        else:
            new = _nm(rows, spec.n, spec.m)
        set_init(m, n.input[1], from_rows(n, new, w.shape))
        if notes is not None:
            notes.append(f"{n.name}: {float(np.mean(new == 0)):.1%} zero")
    if notes is not None:
        notes.extend(skipped)
        if not layers:
            notes.append("no layer to prune (Conv/Gemm/MatMul with constant weights)")
    return m


def layer_sparsity(model: onnx.ModelProto, names) -> float:
    """Fraction of zero weights over the named layers."""
    zeros = total = 0
    for n in weight_layers(model):
        if n.name in names:
            w = get_init(model, n.input[1])
            zeros, total = zeros + int(np.count_nonzero(w == 0)), total + w.size
    return zeros / total if total else 0.0
