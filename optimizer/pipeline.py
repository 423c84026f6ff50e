"""optimize(): load -> graph passes -> prune -> quantize -> check -> write, with a report of every step."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import onnx

from edgec.errors import EdgecError
from edgec.files import atomic_path, refuse_overwrite, write_text_atomic
from edgec.model import graph_inputs, infer_shapes, load_model, parse_input_shapes, with_static_shapes
from edgec.optimizer import channel, fp16, guard, prune, quantize
from edgec.optimizer import graph_passes as gp
from edgec.optimizer.config import OptimizeConfig
from edgec.optimizer.data import Dataset, load_dataset
from edgec.optimizer.evaluate import evaluate
from edgec.optimizer.graph import keep_interface, name_nodes, weights_not_inputs
from edgec.optimizer.passes import Pass, graph_passes, pass_names, run_pass
from edgec.optimizer.runner import latency_ms, random_feeds, session
from edgec.optimizer.stats import stats


FLOOR_HOLDOUT = 0.25  # without --eval, int8 calibrates on 3/4 of the calibration data and is checked on the rest


def config_path_for(out: Path) -> Path:
    return out.with_name(out.stem + ".edgec.yaml")


class Optimizer:
    """Holds the data and the running report while the passes run."""

    def __init__(self, cfg: OptimizeConfig, progress=None, log=print):
        self.cfg, self.progress, self.log = cfg, progress, log
        self.report: dict = {"passes": []}

    def load(self, path: Path) -> onnx.ModelProto:
        """The model the passes edit: its declared inputs and outputs as they are (symbolic dims stay symbolic,
        so the output runs at any batch the input ran at), or pinned to the analysis shapes with fix_shapes.
        Shapes from --input-shape (else batch 1) are for analysis, calibration and checks only."""
        given = parse_input_shapes(self.cfg.input_shapes)
        declared = name_nodes(weights_not_inputs(load_model(path, None, static=False)))
        pinned = with_static_shapes(declared, given)  # checks --input-shape against the model
        self.shapes = {i.name: list(i.shape) for i in graph_inputs(pinned)}
        model = pinned if self.cfg.fix_shapes else declared
        self.interface = onnx.ModelProto()
        self.interface.CopyFrom(model)
        self.calib = self.eval = None
        if self.cfg.calib:
            self.calib = load_dataset(self.cfg.calib, pinned, self.cfg.preprocess, what="calibration",
                                      limit=self.cfg.calib_samples)
        if self.cfg.eval:
            self.eval = load_dataset(self.cfg.eval, pinned, self.cfg.preprocess, what="evaluation")
        if self.eval is None and self.calib is not None and guard.Budget(self.cfg.max_accuracy_drop, self.cfg.min_cosine).active:
            self.held_out()  # before anything is measured, so before/after use the same samples
        elif self.eval is None and self.calib is not None and self.cfg.quantize == "int8" and len(self.calib) >= 2:
            self.held_out(FLOOR_HOLDOUT)  # the fidelity floor is checked on samples calibration never saw
        return model

    def static(self, model: onnx.ModelProto) -> onnx.ModelProto:
        """model with its inputs at the analysis shapes (MACs, channel layouts, random inputs)."""
        return with_static_shapes(model, self.shapes)

    def held_out(self, fraction: float = 0.5) -> Dataset:
        """Evaluation data for guards: --eval, else the last `fraction` of the calibration data."""
        if self.eval is not None:
            return self.eval
        if self.calib is not None and len(self.calib) >= 2:
            keep = min(len(self.calib) - 1, max(1, round(len(self.calib) * (1 - fraction))))
            self.calib, held = self.calib.split(keep)
            self.log(f"no --eval data: holding out {len(held)} of the calibration samples for the guard")
            self.eval = held
            return held
        raise EdgecError("an accuracy budget needs evaluation data: pass --eval DATA")

    def passes(self) -> list[Pass]:
        cfg = self.cfg
        known = set(pass_names())
        bad = [n for n in cfg.disable_passes if n not in known]
        if bad:
            raise EdgecError(f"--disable-pass {bad[0]!r}: unknown pass; passes are {', '.join(pass_names())}")
        out = graph_passes(cfg.quantize == "int8") if cfg.fuse else []
        out += [self._prune_pass(s) for s in cfg.prune]
        if cfg.quantize == "int8":
            out.append(Pass("quantize-int8", self._int8, kind="quantize"))
        elif cfg.quantize == "fp16":
            out.append(Pass("quantize-fp16", self._fp16, kind="quantize"))
        return out

    def _prune_pass(self, spec_text: str) -> Pass:
        cfg, spec = self.cfg, prune.parse_spec(spec_text)
        p = Pass(f"prune-{spec.kind}", lambda m: m, kind="prune", details={"spec": str(spec)})
        kw = dict(skip=cfg.prune_skip, overrides=cfg.prune_layers, first_last=cfg.prune_first_last, notes=p.notes)
        # weights held in Constant nodes (kept with --no-fuse) become initializers first
        if spec.kind == "channel":
            p.fn = lambda m: channel.prune_channels(gp.constants_to_initializers(m), spec.amount,
                                                    feeds=self._compensation_feeds(p.notes), shapes=self.shapes, **kw)
        else:
            p.fn = lambda m: prune.prune_weights(gp.constants_to_initializers(m), spec, scope=cfg.prune_scope, **kw)
        return p

    def _compensation_feeds(self, notes: list):
        """Samples for channel-pruning bias compensation: calibration data, else evaluation data (said so)."""
        if not self.cfg.prune_compensate:
            return None
        if self.calib is not None:
            return self.calib.feeds[:128]
        if self.eval is not None:
            notes.append("bias compensation used the evaluation data (pass --calib to keep them apart)")
            return self.eval.feeds[:128]
        notes.append("no --calib data: pruned without bias compensation (accuracy drops more)")
        return None

    def _int8(self, model: onnx.ModelProto) -> onnx.ModelProto:
        cfg = self.cfg
        budget = guard.Budget(cfg.max_accuracy_drop, cfg.min_cosine)
        held = self.held_out() if budget.active else None
        settings = quantize.Int8Settings(cfg.calib_method, cfg.activations, cfg.per_channel, cfg.reduce_range,
                                         list(cfg.keep_float), equalize=cfg.equalize, range_search=cfg.range_search,
                                         bias_correction=cfg.bias_correction, adaround=cfg.adaround,
                                         adaround_seconds=cfg.adaround_seconds)
        model = name_nodes(model)  # every layer the guard may name has a name
        q = quantize.Quantizer(model, self.calib, settings, self.progress)
        q.macs = self._layer_macs(model)
        try:
            if not budget.active:
                out = self._int8_floor(model, q)
            else:
                judge, confirm = self._judges(model, held, budget)
                out, self.report["guard"] = guard.guarded_int8(q, judge, self.log, cfg.max_float_layers,
                                                               confirm=confirm, macs=q.macs)
            if "guard" in self.report:
                for f in self.report["guard"]["float_layers"]:
                    self._current.notes.append(f"{f['name']}: kept float by the guard (own error {f['own_error']:.2e})")
            self._current.notes[:0] = q.notes
            from edgec.optimizer.int8_cost import report as cost_report

            self.report["int8_cost"] = cost_report(self.static(q.model), self.static(out), quantize.quantized_nodes(out), q.macs,
                                                   self.calib.feeds, cfg.target, cfg.reduce_range)
            self.report["int8_steps"] = {k: q.steps.get(k, "off") for k in ("equalize", "range_search", "bias_correction",
                                                                                "adaround")}
        finally:
            q.close()
        names = quantize.quantized_nodes(out)
        self._current.notes.append(f"{len(names)} nodes run int8 ({'least-error range' if cfg.range_search else cfg.calib_method} calibration on "
                                   f"{len(self.calib)} samples, activations {cfg.activations}"
                                   f"{', reduce_range' if cfg.reduce_range else ''})")
        self._current.notes.extend(f"{n}: kept float (--keep-float)" for n in cfg.keep_float)
        chosen = set(names) | set(cfg.keep_float) | {f["name"] for f in self.report.get("guard", {}).get("float_layers", [])}
        rest = Counter(n.op_type for n in out.graph.node if n.name not in chosen
                       and n.op_type not in ("QuantizeLinear", "DequantizeLinear"))
        if rest:
            self._current.notes.append("float (not int8 in onnxruntime's QDQ scheme or fed by float data): "
                                       + ", ".join(f"{op} x{k}" for op, k in sorted(rest.items())))
        self._current.details["int8_nodes"] = names
        return infer_shapes(out)

    def _judges(self, model, data: Dataset, budget: guard.Budget):
        """The guard chooses on one half of the data and confirms on the other (too few samples: one set)."""
        if len(data) < 8:
            return guard.Judge(model, data, budget, self.progress), None
        choose, confirm = guard.halves(data)
        return guard.Judge(model, choose, budget, self.progress), guard.Judge(model, confirm, budget, self.progress)

    def _layer_macs(self, model) -> dict:
        try:
            from edgec.analysis import model_stats

            return {layer["name"]: layer.get("macs") for layer in model_stats(infer_shapes(self.static(model)))["layers"]}
        except Exception:  # MACs only order the guard's undo pass; without them it still works
            return {}

    def floor(self) -> guard.Budget:
        return guard.Budget(min_cosine=self.cfg.floor_cosine, min_agreement=self.cfg.floor_agreement)

    def _int8_floor(self, model: onnx.ModelProto, q: quantize.Quantizer) -> onnx.ModelProto:
        """Without a user budget: measure int8 against fp32 on held-out samples; below the fidelity floor fall
        back (the guard with the floor as its budget), or with --no-guard write it with a warning."""
        out = q()
        data = self.eval if self.eval is not None else self.calib
        seen = self.eval is None  # fewer than 2 calibration samples: nothing could be held out
        judge = guard.Judge(model, data, self.floor(), self.progress)
        first = judge.score(out, "checking int8 fidelity")
        check = {"stage": "quantize-int8", "floor": str(judge.budget), "data": data.source, "samples": len(data),
                 "held_out": not seen, "all_int8": first, "passed": judge.ok(first), "action": "none"}
        self.report.setdefault("fidelity_checks", []).append(check)
        where = f"{len(data)} {'calibration samples it was calibrated on' if seen else 'held-out samples'}"
        if check["passed"]:
            self._current.notes.append(f"fidelity check passed on {where}: {guard.describe(first)}")
            return out
        if not self.cfg.guard:
            check["action"] = "written anyway (--no-guard)"
            self.log(f"[yellow]warning: int8 is below the fidelity floor ({judge.budget}) on {where}: "
                     f"{guard.describe(first)}; written anyway (--no-guard)[/yellow]")
            self._current.notes.append(f"below the fidelity floor ({guard.describe(first)}); written anyway (--no-guard)")
            return out
        self.log(f"int8 is below the fidelity floor ({judge.budget}) on {where}: {guard.describe(first)}; "
                 "falling back: keeping the worst layers in float")
        choose, confirm = self._judges(model, data, self.floor())
        try:
            out, self.report["guard"] = guard.guarded_int8(q, choose, self.log, self.cfg.max_float_layers,
                                                           confirm=confirm, macs=q.macs)
        except EdgecError as e:
            raise EdgecError(f"int8 collapses ({guard.describe(first)}) and the fallback failed: {e}; "
                             "use --no-guard to write it anyway") from None
        check["action"] = f"fallback: {len(self.report['guard']['float_layers'])} layer(s) kept float"
        check["final"] = self.report["guard"]["final"]
        self._current.notes.append(f"below the fidelity floor ({guard.describe(first)}): {check['action']}, "
                                   f"now {guard.describe(check['final'])}")
        return out

    def _fp16(self, model: onnx.ModelProto) -> onnx.ModelProto:
        data = self.eval or self.calib or Dataset(random_feeds(self.static(model), 8), None, "random inputs")
        h, block, fid = fp16.to_fp16(model, data, self.cfg.min_cosine or 0.999, notes=self._current.notes)
        self.report["fp16"] = {"kept_fp32": block, "fidelity": fid}
        self.report.setdefault("fidelity_checks", []).append(
            {"stage": "quantize-fp16", "floor": f"cosine >= {self.cfg.min_cosine or 0.999:g}", "data": data.source,
             "samples": len(data), "passed": True,
             "action": f"{len(block)} node(s) kept fp32" if block else "none"})
        return h

    def measure(self, model: onnx.ModelProto, reference: onnx.ModelProto | None) -> dict:
        data = self.eval or Dataset(random_feeds(self.static(model), 8, seed=1), None, "random inputs")
        res = stats(model, self.shapes)
        res["eval"] = evaluate(model, data, reference or model, self.progress)
        res["eval"]["data"] = data.source
        res["latency_ms"] = latency_ms(model, data.feeds[0])
        return res

    def run(self, model: onnx.ModelProto) -> onnx.ModelProto:
        original = model
        feeds = random_feeds(self.static(model), 2)
        self.report["before"] = self.measure(model, None)
        if self.cfg.sensitivity:
            self.report["sensitivity"] = self._sensitivity(model)
        for p in self.passes():
            if p.name in self.cfg.disable_passes:
                self.report["passes"].append({"name": p.name, "skipped": True, "notes": ["disabled"]})
                continue
            self._current = p
            self.log(f"pass {p.name}")
            before = model
            model, seconds = run_pass(p, model, self.log, feeds)
            p.notes[:0] = _op_delta(before, model)
            self.report["passes"].append({"name": p.name, "kind": p.kind, "seconds": round(seconds, 3),
                                          "notes": p.notes, **p.details, **stats(model, self.shapes)})
        model = keep_interface(model, self.interface)
        self.report["after"] = self.measure(model, original)
        self._check_budget()
        self._check_floor()
        return model

    def _check_floor(self) -> None:
        """The whole pipeline against the fidelity floor. Quantization has fixed itself above; what is left
        below the floor comes from pruning at the levels the user asked for: said in one line, recorded."""
        fid = self.report["after"]["eval"].get("fidelity")
        if fid is None:
            return
        s = {"cosine": fid["cosine"], "agreement": fid["argmax_agreement"]}
        floor = self.floor()
        ok = s["cosine"] >= floor.min_cosine and s["agreement"] >= floor.min_agreement - 1e-12
        self.report.setdefault("fidelity_checks", []).append(
            {"stage": "final", "floor": str(floor), "data": self.report["after"]["eval"]["data"],
             "samples": fid["samples"], "final": s, "passed": ok, "action": "none" if ok else "warned"})
        if not ok:
            self.log(f"[yellow]warning: the optimized model is below the fidelity floor ({floor}): {guard.describe(s)} "
                     f"on {self.report['after']['eval']['data']}; prune less or set --max-accuracy-drop/--min-cosine "
                     "to refuse such a model[/yellow]")

    def _check_budget(self) -> None:
        """Whatever the passes were, never write a model that breaks the user's budget."""
        budget = guard.Budget(self.cfg.max_accuracy_drop, self.cfg.min_cosine)
        before, after = self.report["before"]["eval"], self.report["after"]["eval"]
        if budget.max_accuracy_drop is not None:
            if "top1" not in after:
                raise EdgecError("--max-accuracy-drop needs evaluation data with labels: pass --eval DATA")
            drop = (before["top1"] - after["top1"]) * 100
            if drop > budget.max_accuracy_drop + 1e-9:
                raise EdgecError(f"the optimized model loses {drop:.2f} top-1 points (budget {budget.max_accuracy_drop:g}); "
                                 "nothing written; prune less (see --sensitivity) or relax the budget")
        if budget.min_cosine is not None and after["fidelity"]["cosine"] < budget.min_cosine:
            raise EdgecError(f"the optimized model's cosine vs the original is {after['fidelity']['cosine']:.5f} "
                             f"(budget {budget.min_cosine:g}, on {after['data']}); nothing written")

    def _sensitivity(self, model):
        from edgec.optimizer.sensitivity import scan

        spec = prune.parse_spec(self.cfg.prune[0]) if self.cfg.prune else prune.PruneSpec("unstructured", 0.5)
        data = self.eval or self.calib or Dataset(random_feeds(self.static(model), 8), None, "random inputs")
        feeds = self._compensation_feeds([]) if spec.kind == "channel" else None
        return {"kind": spec.kind, "rows": scan(model, spec, data.head(200), self.cfg, self.progress, feeds,
                                                shapes=self.shapes)}


def _op_delta(a: onnx.ModelProto, b: onnx.ModelProto) -> list[str]:
    """'-5 BatchNormalization', '+12 QuantizeLinear': what a pass did to the node list."""
    ca, cb = Counter(n.op_type for n in a.graph.node), Counter(n.op_type for n in b.graph.node)
    return [f"{cb[k] - ca[k]:+d} {k}" for k in sorted(set(ca) | set(cb)) if cb[k] != ca[k]]


def check_output(model: onnx.ModelProto) -> None:
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        raise EdgecError(f"the optimized model is not valid ONNX: {' '.join(str(e).split())[:300]}") from None
    session(model)


def optimize(model_path: str | Path, out_path: str | Path, cfg: OptimizeConfig, progress=None, log=print) -> dict:
    """Run the pipeline and write OUT (+ its resolved config) atomically; returns the report."""
    model_path, out_path = Path(model_path), Path(out_path)
    refuse_overwrite(model_path, out_path)
    if out_path.suffix != ".onnx":
        raise EdgecError(f"output {out_path} should end in .onnx")
    if not out_path.parent.is_dir():  # say so before minutes of work, not after
        raise EdgecError(f"output folder {out_path.parent} does not exist")
    if not os.access(out_path.parent, os.W_OK | os.X_OK):
        raise EdgecError(f"output folder {out_path.parent} is not writable")
    opt = Optimizer(cfg, progress, log)
    model = opt.load(model_path)
    result = opt.run(model)
    check_output(result)
    with atomic_path(out_path, suffix=".onnx") as tmp:
        onnx.save(result, str(tmp))
    write_text_atomic(config_path_for(out_path), cfg.to_yaml(str(model_path), str(out_path)))
    opt.report.update(model=str(model_path), output=str(out_path), config=str(config_path_for(out_path)))
    return opt.report
