"""The optimizer as a list of named passes, each a pure function ModelProto -> ModelProto.

Order (what runs, in the order it reads):
  shape-inference            static shapes for everything after
  constants-to-initializers  Constant nodes become weights the other passes can see
  remove-identity            Identity / inference Dropout
  fold-batchnorm             BatchNorm into the preceding Conv/ConvTranspose/Gemm
  matmul-add-to-gemm         2-D MatMul + bias -> Gemm
  ort-basic                  onnxruntime's offline basic level: constant folding, redundant nodes, fusions
  dedupe-initializers        identical weights stored once
  cse                        identical nodes computed once
  dead-nodes                 nothing that no output needs
  opset-upgrade              to opset 13 when int8 needs per-channel QDQ
  prune-<kind>               one pass per --prune spec
  quantize-int8 / quantize-fp16
Graph passes must not change outputs: each result is compared with its input on random data and a pass
that changes them is reverted (and the report says so).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import onnx

from edgec.optimizer import graph_passes as gp
from edgec.optimizer.runner import compare, random_feeds, session

EQUAL_TOL = 1e-4


@dataclass
class Pass:
    name: str
    fn: Callable[[onnx.ModelProto], onnx.ModelProto]
    kind: str = "graph"  # graph passes are checked for equal outputs
    notes: list = field(default_factory=list)
    details: dict = field(default_factory=dict)


GRAPH_PASSES = [
    ("shape-inference", gp.shape_inference),
    ("constants-to-initializers", gp.constants_to_initializers),
    ("remove-identity", gp.remove_identity),
    ("fold-batchnorm", gp.fold_batchnorm),
    ("matmul-add-to-gemm", gp.matmul_add_to_gemm),
    ("ort-basic", gp.ort_basic),
    ("dedupe-initializers", gp.dedupe_initializers),
    ("cse", gp.cse),
    ("dead-nodes", gp.dead_nodes),
]


def graph_passes(upgrade_opset: bool) -> list[Pass]:
    passes = [Pass(name, fn) for name, fn in GRAPH_PASSES]
    if upgrade_opset:
        passes.append(Pass("opset-upgrade", gp.opset_upgrade))
    return passes


def pass_names() -> list[str]:
    return [n for n, _ in GRAPH_PASSES] + ["opset-upgrade", "prune-unstructured", "prune-block", "prune-nm",
                                           "prune-channel", "quantize-int8", "quantize-fp16"]


def equal_outputs(a: onnx.ModelProto, b: onnx.ModelProto, feeds=None) -> float:
    """Worst relative output difference of two models on the same random inputs."""
    feeds = feeds or random_feeds(a, 2)
    sa, sb = session(a), session(b)
    return max(compare(sa.run(None, f), sb.run(None, f)) for f in feeds)


def run_pass(p: Pass, model: onnx.ModelProto, log, feeds=None) -> tuple[onnx.ModelProto, float]:
    t0 = time.perf_counter()
    out = p.fn(model)
    if p.kind == "graph":
        err = equal_outputs(model, out, feeds)
        if err > EQUAL_TOL:
            p.notes.append(f"reverted: outputs changed by {err:.2e} (relative)")
            log(f"[yellow]{p.name}: reverted, it changed the outputs by {err:.2e}[/yellow]")
            return model, time.perf_counter() - t0
    return out, time.perf_counter() - t0
