"""Per-layer sensitivity: prune one layer at a time at several levels and measure the damage."""

from __future__ import annotations

import numpy as np
import onnx

from edgec.optimizer.channel import prune_channels
from edgec.optimizer.data import Dataset
from edgec.optimizer.evaluate import accuracy, fidelity, predict
from edgec.optimizer.prune import PruneSpec, prune_weights, select_layers

LEVELS = (0.25, 0.5, 0.75, 0.9)


def _size(model: onnx.ModelProto) -> int:
    return sum(int(np.prod(t.dims)) for t in model.graph.initializer)


def _drop(model, kind, spec, name, level, data, ref, base, feeds, shapes):
    if kind == "channel":
        pruned = prune_channels(model, 0.0, overrides={name: level}, first_last=True, feeds=feeds, shapes=shapes)
        if _size(pruned) == _size(model):
            return None
    else:
        pruned = prune_weights(model, PruneSpec(kind, 0.0, spec.block), overrides={name: level}, first_last=True)
    outs = predict(pruned, data)
    if base is not None:
        return (base - accuracy(outs, data.labels)["top1"]) * 100
    return 1.0 - fidelity(ref, outs)["cosine"]


def scan(model: onnx.ModelProto, spec: PruneSpec, data: Dataset, cfg, progress=None, feeds=None,
         shapes=None) -> list[dict]:
    """Rows of {layer, level -> drop}: top-1 points lost with labels, else 1 - cosine vs unpruned.
    None where the layer cannot be pruned that way (channel pruning of a frozen group)."""
    layers, _ = select_layers(model, cfg.prune_skip, cfg.prune_first_last)
    ref = predict(model, data)
    base = accuracy(ref, data.labels)["top1"] if data.labels is not None else None
    kind = spec.kind if spec.kind in ("unstructured", "channel", "block") else "unstructured"
    task = progress.add_task("sensitivity scan", total=len(layers) * len(LEVELS)) if progress else None
    rows = []
    for layer in layers:
        row = {"layer": layer.name, "op": layer.op_type, "drops": {}}
        for level in LEVELS:
            row["drops"][str(level)] = _drop(model, kind, spec, layer.name, level, data, ref, base, feeds, shapes)
            if task is not None:
                progress.advance(task)
        rows.append(row)
    if task is not None:
        progress.remove_task(task)
    return rows
