"""Channel pruning: remove whole conv filters and every input channel that read them, so the model gets
physically smaller (fewer MACs and parameters), not just sparser.

Analysis walks the graph once and gives every 4-D/2-D tensor a channel layout: a list of segments
(group, channels, elements per channel). A group is a set of channels that must be pruned together:
tensors joined by an Add/Mul share one group, BatchNorm, activations, pools and depthwise convs pass it on,
Concat stacks segments, Flatten/Reshape widen them, Conv/Gemm/MatMul consume them. A grouped conv with g
groups forces an equal count per partition. Any op we do not understand freezes the channels it touches:
those filters are kept and the report says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import onnx

from edgec.model import tensor_shapes, with_static_shapes
from edgec.optimizer.graph import attr, get_init, reshape_infer, set_init, topo_sort, unique_name

PASS_THROUGH = {"Relu", "Clip", "HardSwish", "HardSigmoid", "Sigmoid", "Tanh", "LeakyRelu", "Elu", "Selu", "Softplus",
                "Identity", "Dropout", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Neg", "Abs",
                "Erf", "Gelu", "Mish", "Celu", "Softsign", "ThresholdedRelu", "LpPool", "Cast"}
ELEMENTWISE = {"Add", "Mul", "Sub", "Div", "Max", "Min", "Sum", "PRelu"}


@dataclass
class Groups:
    parent: list = field(default_factory=list)
    size: list = field(default_factory=list)
    parts: list = field(default_factory=list)    # equal-count partitions required (grouped convs)
    frozen: dict = field(default_factory=dict)   # root -> reason
    producers: dict = field(default_factory=dict)  # root -> [conv nodes whose filters make these channels]

    def new(self, n: int, parts: int = 1, frozen: str | None = None) -> int:
        gid = len(self.parent)
        self.parent.append(gid)
        self.size.append(n)
        self.parts.append(parts)
        if frozen:
            self.frozen[gid] = frozen
        return gid

    def find(self, g: int) -> int:
        while self.parent[g] != g:
            self.parent[g] = self.parent[self.parent[g]]
            g = self.parent[g]
        return g

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        self.parent[rb] = ra
        self.parts[ra] = math.lcm(self.parts[ra], self.parts[rb])
        if rb in self.frozen and ra not in self.frozen:
            self.frozen[ra] = self.frozen[rb]
        self.producers.setdefault(ra, []).extend(self.producers.pop(rb, []))

    def freeze(self, g: int, reason: str) -> None:
        self.frozen.setdefault(self.find(g), reason)

    def constrain(self, g: int, parts: int) -> None:
        r = self.find(g)
        self.parts[r] = math.lcm(self.parts[r], parts)


class Analysis:
    """Channel layout of every tensor and the groups they form."""

    def __init__(self, model: onnx.ModelProto, input_shapes: dict[str, list[int]] | None = None):
        self.model = model
        self.g = Groups()
        self.seg: dict[str, list] = {}
        # layouts need static shapes; a model with symbolic input dims is read at the given input shapes
        view = with_static_shapes(model, input_shapes) if input_shapes else model
        self.shapes = {k: v.shape for k, v in tensor_shapes(view).items()}
        self.inits = {t.name for t in model.graph.initializer}
        for v in model.graph.input:
            if v.name not in self.inits:
                self._fresh(v.name, "graph input")
        for node in model.graph.node:
            self._visit(node)
        for o in model.graph.output:
            self._freeze_tensor(o.name, "graph output")

    def _rank(self, name):
        s = self.shapes.get(name)
        return len(s) if s is not None else 0

    def _fresh(self, name: str, frozen: str | None = None, parts: int = 1, producer=None) -> None:
        s = self.shapes.get(name)
        if s is None or len(s) < 2 or not isinstance(s[1], int):
            return
        gid = self.g.new(s[1], parts, frozen)
        if producer is not None:
            self.g.producers[gid] = [producer]
        self.seg[name] = [(gid, s[1], 1)]

    def _freeze_tensor(self, name: str, reason: str) -> None:
        for gid, _, _ in self.seg.get(name, []):
            self.g.freeze(gid, reason)

    def _unknown(self, node, why=None) -> None:
        reason = why or f"{node.op_type} node {node.name} is not understood by channel pruning"
        for i in node.input:
            self._freeze_tensor(i, reason)
        for o in node.output:
            self._fresh(o, reason)

    def _visit(self, node) -> None:
        op, x = node.op_type, node.input[0] if node.input else ""
        xs = self.seg.get(x)
        if op == "Conv":
            self._conv(node, xs)
        elif op in PASS_THROUGH and xs is not None and all(i == x or i in self.inits or not i for i in node.input):
            self.seg[node.output[0]] = xs
        elif op == "BatchNormalization" and xs is not None and all(i in self.inits for i in node.input[1:5]):
            self.seg[node.output[0]] = xs
        elif op in ELEMENTWISE:
            self._elementwise(node)
        elif op == "Concat" and all(i in self.seg for i in node.input) and attr(node, "axis") in (1, 1 - self._rank(x)):
            self.seg[node.output[0]] = [s for i in node.input for s in self.seg[i]]
        elif op in ("Flatten", "Reshape") and xs is not None and self._flattens(node):
            spatial = math.prod(self.shapes[x][2:])
            self.seg[node.output[0]] = [(gid, n, rep * spatial) for gid, n, rep in xs]
        elif op in ("Gemm", "MatMul") and xs is not None and node.input[1] in self.inits and not attr(node, "transA", 0) \
                and self._rank(x) == 2:
            self._fresh(node.output[0], f"{op} {node.name} output (fully connected layers are not channel-pruned)")
        else:
            self._unknown(node)

    def _flattens(self, node) -> bool:
        xs, ys = self.shapes.get(node.input[0]), self.shapes.get(node.output[0])
        ok = xs is not None and ys is not None and len(ys) == 2 and all(isinstance(d, int) for d in (*xs, *ys))
        return ok and ys[0] == xs[0] and ys[1] == math.prod(xs[1:]) and (node.op_type == "Flatten" or node.input[1] in self.inits)

    def _conv(self, node, xs) -> None:
        w = get_init(self.model, node.input[1])
        if w is None or xs is None or any(i and i not in self.inits for i in node.input[1:]):
            return self._unknown(node, f"Conv {node.name} has non-constant weights")
        g, cout = int(attr(node, "group", 1)), w.shape[0]
        cin = w.shape[1] * g
        if g > 1 and g == cin == cout:  # depthwise: same channels in and out
            self.seg[node.output[0]] = xs
            return
        if g > 1:
            if len(xs) != 1:
                return self._unknown(node, f"grouped Conv {node.name} reads a concatenation")
            self.g.constrain(xs[0][0], g)
        self._fresh(node.output[0], parts=g, producer=node)

    def _elementwise(self, node) -> None:
        chan = [i for i in node.input if i in self.seg]
        out_rank = self._rank(node.output[0])
        for i in node.input:
            if i in self.seg or not i:
                continue
            shp = self.shapes.get(i)
            if i not in self.inits or shp is None:
                return self._unknown(node)
            axis = 1 - (out_rank - len(shp))
            if 0 <= axis < len(shp) and shp[axis] != 1 and len(chan) and any(d != 1 for j, d in enumerate(shp) if j != axis):
                return self._unknown(node)
        if not chan:
            return self._unknown(node)
        first = self.seg[chan[0]]
        for other in chan[1:]:
            segs = self.seg[other]
            if [n for _, n, _ in segs] != [n for _, n, _ in first] or any(r != 1 for _, _, r in segs + first):
                return self._unknown(node, f"{node.op_type} {node.name} joins tensors with different channel layouts")
            for (a, _, _), (b, _, _) in zip(first, segs):
                self.g.union(a, b)
        self.seg[node.output[0]] = first


def _scores(model, g: Groups, root: int) -> np.ndarray:
    """Filter importance: L1 norm per output channel, each producer normalised so none dominates."""
    total = np.zeros(g.size[root])
    for conv in g.producers.get(root, []):
        w = np.abs(get_init(model, conv.input[1]).astype(np.float64)).reshape(g.size[root], -1).sum(axis=1)
        total += w / (w.mean() + 1e-12)
    return total


def choose(model, a: Analysis, ratio: float, skip=(), overrides=None, first_last=False) -> tuple[dict, list[str]]:
    """Kept channel indices per group root, plus one note per group pruned or kept."""
    g, notes, keep = a.g, [], {}
    graph_in = {v.name for v in model.graph.input}
    overrides = overrides or {}
    roots = sorted({g.find(i) for i in range(len(g.parent))})
    for r in roots:
        convs = g.producers.get(r, [])
        if not convs:
            continue
        names = "+".join(c.name for c in convs)
        reason = g.frozen.get(r)
        if reason is None and not first_last and any(c.input[0] in graph_in for c in convs):
            reason = "first conv (set prune_first_last to include it)"
        if reason is None and any(c.name in skip for c in convs):
            reason = "skip list"
        if reason is not None:
            notes.append(f"{names}: kept {g.size[r]} channels ({reason})")
            continue
        rr = next((overrides[c.name] for c in convs if c.name in overrides), ratio)
        parts, n = g.parts[r], g.size[r]
        if n % parts:
            notes.append(f"{names}: kept {n} channels ({n} not divisible into {parts} equal groups)")
            continue
        per = n // parts
        kept_per = max(1, per - int(round(rr * per)))
        scores = _scores(model, g, r)
        idx = []
        for p in range(parts):
            local = np.argsort(-scores[p * per:(p + 1) * per], kind="stable")[:kept_per]
            idx.extend(sorted(int(i) + p * per for i in local))
        keep[r] = np.array(idx, dtype=np.int64)
        notes.append(f"{names}: {n} -> {len(idx)} channels")
    return keep, notes


def _flat_keep(a: Analysis, keep: dict, name: str):
    """Indices kept along a tensor's channel (or flattened feature) axis; None if nothing changes."""
    segs = a.seg.get(name)
    if not segs:
        return None
    out, off, changed = [], 0, False
    for gid, n, rep in segs:
        k = keep.get(a.g.find(gid))
        k = np.arange(n) if k is None else k
        changed |= len(k) != n
        out.append(((off + k)[:, None] * rep + np.arange(rep)[None, :]).reshape(-1) if rep > 1 else off + k)
        off += n * rep
    return np.concatenate(out) if changed else None


def apply(model: onnx.ModelProto, a: Analysis, keep: dict) -> onnx.ModelProto:
    """Slice every weight that touches a pruned channel."""
    m = onnx.ModelProto()
    m.CopyFrom(model)

    def slice_init(node, pos, idx, axis, name_hint):
        w = get_init(m, node.input[pos])
        new = unique_name(m, f"{node.input[pos]}_{name_hint}")
        set_init(m, new, np.take(w, idx, axis=axis))
        node.input[pos] = new

    for node in m.graph.node:
        op = node.op_type
        kin = _flat_keep(a, keep, node.input[0]) if node.input else None
        kout = _flat_keep(a, keep, node.output[0])
        if op == "Conv":
            _conv(m, a, keep, node, kin, kout, slice_init)
        elif op == "BatchNormalization" and kout is not None:
            for pos in range(1, 5):
                slice_init(node, pos, kout, 0, "pruned")
        elif op in ELEMENTWISE and kout is not None:
            _elementwise_consts(m, a, node, kout, slice_init)
        elif op == "Gemm" and kin is not None:
            slice_init(node, 1, kin, 1 if attr(node, "transB", 0) else 0, "pruned")
        elif op == "MatMul" and kin is not None:
            slice_init(node, 1, kin, 0, "pruned")
        elif op == "Reshape" and kout is not None:
            shape = get_init(m, node.input[1]).copy()
            if shape[-1] > 0:
                shape[-1] = len(kout)
                new = unique_name(m, node.input[1] + "_pruned")
                set_init(m, new, shape)
                node.input[1] = new
    from edgec.optimizer.graph import remove_unused_initializers
    return reshape_infer(remove_unused_initializers(m))


def _conv(m, a, keep, node, kin, kout, slice_init) -> None:
    w = get_init(m, node.input[1])
    g = int(attr(node, "group", 1))
    if g > 1 and g == w.shape[0] == w.shape[1] * g:  # depthwise
        if kout is not None:
            slice_init(node, 1, kout, 0, "pruned")
            if len(node.input) > 2 and node.input[2]:
                slice_init(node, 2, kout, 0, "pruned")
            from edgec.optimizer.graph import set_attr
            set_attr(node, "group", int(len(kout)))
        return
    cout, cin_g = w.shape[0], w.shape[1]
    ko = kout if kout is not None else np.arange(cout)
    ki = kin if kin is not None else np.arange(cin_g * g)
    if kout is None and kin is None:
        return
    out_per = cout // g
    rows = []
    for o in ko:
        grp = int(o) // out_per
        local = ki[(ki >= grp * cin_g) & (ki < (grp + 1) * cin_g)] - grp * cin_g
        rows.append(w[o][local])
    new = unique_name(m, node.input[1] + "_pruned")
    set_init(m, new, np.stack(rows).astype(w.dtype))
    node.input[1] = new
    if kout is not None and len(node.input) > 2 and node.input[2]:
        slice_init(node, 2, kout, 0, "pruned")


def _elementwise_consts(m, a, node, kout, slice_init) -> None:
    out_rank = len(a.shapes.get(node.output[0]) or ())
    for pos, i in enumerate(node.input):
        if i in a.seg or not i:
            continue
        w = get_init(m, i)
        axis = 1 - (out_rank - w.ndim)
        if 0 <= axis < w.ndim and w.shape[axis] != 1:
            slice_init(node, pos, kout, axis, "pruned")


def prune_channels(model: onnx.ModelProto, ratio: float, *, skip=(), overrides=None, first_last=False,
                   notes: list | None = None, feeds=None, shapes=None) -> onnx.ModelProto:
    """Remove about `ratio` of the filters of every prunable channel group; with `feeds` (calibration
    samples) the removed channels' mean contributions are folded into the next layers' biases. `shapes`: input
    shapes to analyse a model with symbolic input dims at."""
    model = topo_sort(model)
    a = Analysis(model, shapes)
    keep, group_notes = choose(model, a, ratio, skip, overrides, first_last)
    if notes is not None:
        notes.extend(group_notes)
    if not keep:
        if notes is not None:
            notes.append("no channel group could be pruned")
        return model
    pruned = apply(model, a, keep)
    if feeds:
        from edgec.optimizer.compensate import compensate

        n = compensate(model, pruned, a, keep, feeds)
        if notes is not None:
            notes.append(f"bias compensation in {n} layers from {len(feeds)} samples")
        from edgec.optimizer.graph import remove_unused_initializers
        pruned = remove_unused_initializers(pruned)
    return pruned
