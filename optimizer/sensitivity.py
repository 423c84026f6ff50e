"""Per-layer sensitivity: prune one layer at a time at several levels and measure the damage."""

from __future__ import annotations

import onnx

from edgec.optimizer.channel import prune_channels
from edgec.optimizer.data import Dataset
from edgec.optimizer.evaluate import accuracy, fidelity, predict
from edgec.optimizer.prune import PruneSpec, prune_weights, select_layers

LEVELS = (0.25, 0.5, 0.75, 0.9)


def scan(model: onnx.ModelProto, spec: PruneSpec, data: Dataset, cfg, progress=None) -> list[dict]:
    """Rows of {layer, level -> drop}: top-1 points lost with labels, else 1 - cosine vs unpruned."""
    layers, _ = select_layers(model, cfg.prune_skip, cfg.prune_first_last)
    ref = predict(model, data)
    base = accuracy(ref, data.labels)["top1"] if data.labels is not None else None
    kind = spec.kind if spec.kind in ("unstructured", "channel", "block") else "unstructured"
    task = progress.add_task("sensitivity scan", total=len(layers) * len(LEVELS)) if progress else None
    rows = []
    for layer in layers:
        row = {"layer": layer.name, "op": layer.op_type, "drops": {}}
        for level in LEVELS:
            if kind == "channel":
                pruned = prune_channels(model, 0.0, overrides={layer.name: level}, first_last=True)
            else:
                one = PruneSpec(kind, 0.0, spec.block)
                pruned = prune_weights(model, one, overrides={layer.name: level}, first_last=True)
            outs = predict(pruned, data)
            if base is not None:
                row["drops"][str(level)] = (base - accuracy(outs, data.labels)["top1"]) * 100
            else:
                row["drops"][str(level)] = 1.0 - fidelity(ref, outs)["cosine"]
            if task is not None:
                progress.advance(task)
        rows.append(row)
    if task is not None:
        progress.remove_task(task)
    return rows
