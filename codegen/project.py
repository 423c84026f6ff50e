"""compile_model / build_project: the library behind `edgec compile`."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from edgec.codegen import registry, variants
from edgec.codegen.emit import EmitContext, LayerInfo
from edgec.codegen.ir import Graph
from edgec.codegen.lower import lower_file
from edgec.codegen.memory import Plan, mark_inplace_concats, mark_residual_outputs, plan_memory
from edgec.codegen.options import CompileOptions, using
from edgec.codegen.printer import write_model, write_project, write_tune_project
from edgec.codegen.targets import Target, get_target
from edgec.errors import EdgecError


@dataclass
class Build:
    dir: Path
    target: Target
    arena_bytes: int
    naive_bytes: int
    weights_bytes: int
    layers: list[dict]
    binaries: dict[str, Path] = field(default_factory=dict)
    graph: Graph | None = field(default=None, repr=False)
    plan: Plan | None = field(default=None, repr=False)


def emit_layers(g: Graph, ctx: EmitContext) -> list[LayerInfo]:
    """Run every node's emitter; bodies still hold activation placeholders."""
    layers = []
    for node in g.nodes:
        spec = registry.get(node.op)
        if spec is None:
            raise EdgecError(f"node {node.name} ({node.op}) has no C emitter")
        if not node.epilogue.empty and not spec.epilogue:
            raise EdgecError(f"internal: epilogue fused into {node.op}, whose emitter cannot apply it")
        info = ctx.begin(node)
        info.body = variants.emit(spec, node, ctx)  # a tuning record may force this layer's variant
        layers.append(info)
    return layers


def _emit(g: Graph, target: Target, prefix: str) -> tuple[EmitContext, list[LayerInfo], Plan]:
    from edgec.codegen import layout, options, q8layout
    g = layout.assign(g, target, options.active().layout)  # per region NCHW or NCHWc, reorders at the edges
    g = q8layout.assign(g, target, options.active().layout)  # int8 activations between convs blocked where all read it
    ctx = EmitContext(target, weights_symbol=f"{prefix}_weights", pool_expr=f"{prefix}_pool")
    mark_inplace_concats(g)  # before emission: the Concat emitter skips the inputs written in place
    mark_residual_outputs(g)  # before emission: an emitter whose kernel accumulates onto its output takes the offer
    layers = emit_layers(g, ctx)
    return ctx, layers, plan_memory(g, [l.scratch for l in layers], ctx.scratch_sizes)


def _layer_table(layers: list[LayerInfo]) -> list[dict]:
    return [{"name": ", ".join(l.node.onnx_names) or l.node.name, "op": l.node.op, "algo": l.algo, "macs": l.macs,
             **({"details": l.details} if l.details else {})} for l in layers]


def _stamp(stamp: dict | None, target: Target, threads: int, plan: Plan) -> dict:
    stamp = dict(stamp or {})
    stamp.setdefault("target", f"{target.name} (isa {target.isa}), threads {threads}")
    stamp["arena"] = f"{plan.arena_bytes} bytes (naive sum of intermediates {plan.naive_bytes})"
    return stamp


def generate(g: Graph, out_dir: Path, target: Target, *, threads: int = 1, prefix: str = "model",
             stamp: dict | None = None) -> Build:
    """IR -> project files in out_dir."""
    ctx, layers, plan = _emit(g, target, prefix)
    write_project(out_dir, prefix, g, plan, ctx, layers, _stamp(stamp, target, threads, plan), threads)
    return Build(out_dir, target, plan.arena_bytes, plan.naive_bytes, len(ctx.weights), _layer_table(layers),
                 graph=g, plan=plan)


@dataclass
class Emitted:
    """One build of a model, emitted under its own options and symbol prefix but not yet written."""
    prefix: str
    options: CompileOptions
    graph: Graph
    ctx: EmitContext
    layers: list[LayerInfo]
    plan: Plan

    @property
    def table(self) -> list[dict]:
        """The layers as Build.layers lists them (algo, MACs, details with the layer signature)."""
        return _layer_table(self.layers)


def emit_model(model_path, options: CompileOptions, prefix: str, input_shapes=None) -> Emitted:
    """Code generation only (nothing written): what a build of the model under these options would hold."""
    g = lower_file(Path(model_path), input_shapes)
    with using(options):
        ctx, layers, plan = _emit(g, get_target(options.target), prefix)
    return Emitted(prefix, options, g, ctx, layers, plan)


def write_candidates(out_dir, builds: list[Emitted], names: list[str], algos: list[str],
                     layers: list[int] | None = None, units: list[list[str]] | None = None) -> Path:
    """One C project holding several builds (edgec tune's candidates, one variant forced in each) and the
    harness that checks and times them all in one program (templates/tune.c): each build keeps its own
    symbol prefix, weights blob and workspace; the runtime kernels are compiled once. layers[i] says which
    layer model build i is of (default: all of one model); the builds of a layer share its interface, and the
    layers' inputs follow each other on the program's command line. names and algos label the builds.
    units: the builds' prefixes grouped into translation units, each compiled once (default: one per build)."""
    out_dir = Path(out_dir)
    layers = list(layers) if layers is not None else [0] * len(builds)
    if not builds or len({b.prefix for b in builds}) != len(builds) or \
            not len(builds) == len(names) == len(algos) == len(layers) or \
            sorted(set(layers)) != list(range(max(layers) + 1)):
        raise EdgecError("internal: candidate builds need distinct prefixes, one name, algo and layer each")
    first = builds[0]
    target, threads = get_target(first.options.target), first.options.threads
    graphs: dict[int, object] = {}
    for b, layer in zip(builds, layers):  # one program: one target, one thread count; per layer one interface
        if get_target(b.options.target).name != target.name or b.options.threads != threads:
            raise EdgecError("internal: candidate builds of one program must share target and threads")
        g = graphs.setdefault(layer, b.graph)
        if [t.shape for t in b.graph.inputs + b.graph.outputs] != [t.shape for t in g.inputs + g.outputs]:
            raise EdgecError("internal: candidate builds of one layer must be of the same model")
    _check_writable(out_dir)
    runtime: list[str] = []
    for b, name in zip(builds, names):
        stamp = _stamp({"model": f"{b.graph.name} sha256 {b.graph.source.get('sha256', '?')}", "candidate": name},
                       target, threads, b.plan)
        for f in write_model(out_dir, b.prefix, b.graph, b.plan, b.ctx, b.layers, stamp, threads):
            if f not in runtime:
                runtime.append(f)
    write_tune_project(out_dir, [b.prefix for b in builds], names, algos, [graphs[i] for i in sorted(graphs)],
                       target, runtime, threads, layers, units)
    return out_dir


def compile_model(model_path, out_dir, *, target="native", threads: int = 1, input_shapes=None, build: bool = False,
                  profile: bool = False, cc: str | None = None, command: str | None = None,
                  options: CompileOptions | None = None) -> Build:
    """Compile an ONNX file into a C project in out_dir (and build it when build=True).
    options, when given, carries target and threads too; else they come from the arguments and the
    environment's EDGEC_* switches."""
    model_path, out_dir = Path(model_path), Path(out_dir)
    if options is None:
        if threads < 1:
            raise EdgecError(f"--threads must be at least 1, got {threads}")
        options = CompileOptions.from_env(target=getattr(target, "name", target), threads=threads)
    target, threads = options.target, options.threads
    tgt = get_target(target)
    if out_dir.exists() and not out_dir.is_dir():
        raise EdgecError(f"output {out_dir} exists and is not a folder")
    _check_writable(out_dir)
    g = lower_file(model_path, input_shapes)
    stamp = {"command": command or "edgec compile " + shlex.join([str(model_path), "-o", str(out_dir),
                                                                  "--target", tgt.name]),
             "model": f"{model_path.name} sha256 {g.source.get('sha256', '?')}"}
    with using(options):
        b = generate(g, out_dir, tgt, threads=threads, stamp=stamp)
    if build:
        b.binaries = build_project(out_dir, tgt, cc=cc, profile=profile)
    return b


def _check_writable(out_dir: Path) -> None:
    """Before any work: the project folder, or the nearest folder it would be created in, takes writes."""
    probe = out_dir
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        raise EdgecError(f"output {out_dir}: {probe} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise EdgecError(f"output folder {probe} is not writable")


def build_project(dir, target="native", cc: str | None = None, profile: bool = False,
                  cflags: str | None = None, ldflags: str | None = None, jobs: int = 1) -> dict[str, Path]:
    """Run make in a generated project (cross compiler and -static for foreign targets)."""
    dir, tgt = Path(dir), get_target(target)
    if shutil.which("make") is None:
        raise EdgecError("make is not installed; install it (apt-get install make) to build the project")
    cc = cc or tgt.cc
    if shutil.which(cc) is None:
        raise EdgecError(f"compiler {cc!r} for target {tgt.name} not found on PATH")
    args = ["make", f"-j{jobs}", "-C", str(dir), f"CC={cc}"]
    if profile:
        args.append("PROFILE=1")
    if cflags is not None:
        args.append(f"CFLAGS={cflags}")
    if ldflags is not None or not tgt.runs_natively():
        args.append(f"LDFLAGS={ldflags if ldflags is not None else '-static'}")
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        errs = [ln for ln in proc.stderr.splitlines() if "error" in ln] or proc.stderr.splitlines() or ["?"]
        sys.stderr.write(proc.stderr[-4000:])
        raise EdgecError(f"building {dir} with {cc} failed: {errs[0][:300]}")
    return {"runner": dir / "runner", "bench": dir / "bench"}


def model_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
