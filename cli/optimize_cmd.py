"""`edgec optimize` and `edgec eval`: smaller, faster ONNX that still answers the same, and proof of it."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from edgec.cli.console import err, out, print_json
from edgec.errors import EdgecError
from edgec.files import refuse_overwrite, write_text_atomic


@contextlib.contextmanager
def _progress():
    """Progress bars on stderr; invisible when stderr is not a terminal."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as p:
        yield p


def optimize(
    model: Path = typer.Argument(..., help="Input ONNX model (never modified).", show_default=False),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the optimized .onnx.", show_default=False),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="edgec.yaml describing the pipeline."),
    prune: Optional[List[str]] = typer.Option(None, "--prune", help="unstructured:S | block:RxC:S | nm:N:M | channel:R (repeatable)."),
    quantize: Optional[str] = typer.Option(None, "--quantize", "-q", help="int8 (QDQ, static) or fp16."),
    calib: Optional[Path] = typer.Option(None, "--calib", help="Calibration data: .npz, folder of .npy, or image folder."),
    calib_method: Optional[str] = typer.Option(None, "--calib-method", help="minmax | percentile | entropy."),
    calib_samples: Optional[int] = typer.Option(None, "--calib-samples", help="Use at most this many calibration samples."),
    eval_data: Optional[Path] = typer.Option(None, "--eval", help="Held-out data for accuracy/fidelity before and after."),
    max_accuracy_drop: Optional[float] = typer.Option(None, "--max-accuracy-drop", help="Guard: allowed top-1 drop in points."),
    min_cosine: Optional[float] = typer.Option(None, "--min-cosine", help="Guard: minimum mean cosine vs the fp32 model."),
    max_float_layers: Optional[int] = typer.Option(None, "--max-float-layers", help="Guard: keep at most N layers float."),
    sensitivity: bool = typer.Option(False, "--sensitivity", help="Scan each layer's pruning sensitivity first."),
    no_fuse: bool = typer.Option(False, "--no-fuse", help="Skip the graph passes."),
    disable_pass: Optional[List[str]] = typer.Option(None, "--disable-pass", help="Skip a pass by name (repeatable)."),
    keep_float: Optional[List[str]] = typer.Option(None, "--keep-float", help="Never quantize this node (repeatable)."),
    reduce_range: Optional[bool] = typer.Option(None, "--reduce-range/--full-range", help="7-bit int8 weights (AVX2 without VNNI)."),
    target: Optional[str] = typer.Option(None, "--target", "-t", help="Compile target the int8 model is for (e.g. native, "
                                         "x86_64-avx2): picks --reduce-range when its fastest int8 GEMM needs 7-bit weights."),
    input_shape: Optional[List[str]] = typer.Option(
        None, "--input-shape", "-s",
        help="Shape to analyse and calibrate at, NAME:D1,D2,... (the output keeps the model's own input shapes)."),
    fix_shapes: bool = typer.Option(False, "--fix-shapes", help="Write the output with its inputs pinned to the "
                                    "--input-shape shapes (default batch 1) instead of the model's dynamic dims."),
    no_equalize: bool = typer.Option(False, "--no-equalize", help="int8: skip cross-layer equalization."),
    no_range_search: bool = typer.Option(False, "--no-range-search", help="int8: calibrator ranges as they are "
                                         "(no per-tensor least-error range search)."),
    no_bias_correction: bool = typer.Option(False, "--no-bias-correction", help="int8: skip bias correction."),
    adaround: Optional[bool] = typer.Option(None, "--adaround/--no-adaround", help="int8: per-layer weight rounding "
                                            "of least output error (off by default: slower, no measured top-1 gain)."),
    no_guard: bool = typer.Option(False, "--no-guard", help="Write int8 even below the fidelity floor (with a warning)."),
    report: Optional[Path] = typer.Option(None, "--report", help="Also write the report as JSON here."),
) -> None:
    """Fuse, prune and quantize an ONNX model; print what each pass did and what it cost.

    Example: edgec optimize model.onnx -o model.int8.onnx --quantize int8 --calib calib.npz --eval test.npz --max-accuracy-drop 1
    """
    from edgec.optimizer.config import load_config
    from edgec.optimizer.pipeline import optimize as run

    flags = dict(prune=prune, quantize=quantize, calib=_s(calib), calib_method=calib_method, calib_samples=calib_samples,
                 eval=_s(eval_data), max_accuracy_drop=max_accuracy_drop, min_cosine=min_cosine, max_float_layers=max_float_layers,
                 sensitivity=sensitivity or None, fuse=False if no_fuse else None, disable_passes=disable_pass,
                 keep_float=keep_float, reduce_range=reduce_range, input_shapes=input_shape,
                 fix_shapes=fix_shapes or None, guard=False if no_guard else None,
                 equalize=False if no_equalize else None, range_search=False if no_range_search else None,
                 bias_correction=False if no_bias_correction else None, adaround=adaround,
                 target=target)
    cfg = load_config(config, flags)
    if target is not None and reduce_range is None and cfg.quantize == "int8":  # an explicit flag wins
        from edgec.optimizer.quantize import reduce_range_for

        cfg.reduce_range, why = reduce_range_for(target)
        err.print(f"[dim]{escape(why)}[/dim]")
    if report is not None:
        refuse_overwrite(model, report)
        if report.resolve() == output.resolve():
            raise EdgecError(f"--report {report} is the output model path; choose another file")
        if not report.parent.is_dir():  # the report is written last: say so before the work
            raise EdgecError(f"--report folder {report.parent} does not exist")
    with _progress() as p:
        doc = run(model, output, cfg, progress=p, log=lambda m: err.print(f"[dim]{escape(m)}[/dim]"))
    render(doc)
    if report is not None:
        write_text_atomic(report, json.dumps(doc, indent=2, sort_keys=True, default=_plain) + "\n")


def evaluate(
    model: Path = typer.Argument(..., help="ONNX model to evaluate.", show_default=False),
    data: Path = typer.Option(..., "--data", "-d", help=".npz (with optional 'labels'), folder of .npy, or image folder."),
    reference: Optional[Path] = typer.Option(None, "--reference", "-r", help="Compare outputs with this model (fidelity)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="edgec.yaml (data.preprocess for images)."),
    input_shape: Optional[List[str]] = typer.Option(None, "--input-shape", "-s", help="Pin an input shape, NAME:D1,D2,..."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Top-1/top-5 accuracy when the data has labels, else fidelity against --reference.

    Example: edgec eval model.int8.onnx --data test.npz --reference model.onnx
    """
    from edgec.model import load_model, parse_input_shapes
    from edgec.optimizer.config import load_config
    from edgec.optimizer.data import load_dataset
    from edgec.optimizer.evaluate import evaluate as run

    cfg = load_config(config, {"input_shapes": input_shape})
    shapes = parse_input_shapes(cfg.input_shapes)
    m = load_model(model, shapes)
    ref = load_model(reference, shapes) if reference is not None else None
    ds = load_dataset(data, m, cfg.preprocess, what="evaluation")
    with _progress() as p:
        res = run(m, ds, ref, p)
    res = {"model": str(model), "data": str(data), "reference": _s(reference), **res}
    if json_out:
        print_json(res)
        return
    t = Table(title=f"{escape(str(model))} on {escape(str(data))}", title_justify="left")
    t.add_column("metric")
    t.add_column("value", justify="right")
    for k, v in _flat(res).items():
        if k not in ("model", "data", "reference"):
            t.add_row(escape(k), _fmt(k, v))
    out.print(t)


def _s(p):
    return None if p is None else str(p)


def _plain(o):
    try:
        return o.item()
    except AttributeError:
        return str(o)


def _flat(d: dict, prefix: str = "") -> dict:
    res = {}
    for k, v in d.items():
        if isinstance(v, dict):
            res.update(_flat(v, f"{prefix}{k}."))
        else:
            res[prefix + k] = v
    return res


def _fmt(key: str, v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if key.endswith(("top1", "top5", "agreement", "sparsity")):
            return f"{v * 100:.2f}%"
        return f"{v:.6g}"
    return escape(str(v))


def _num(n) -> str:
    if n is None:
        return "?"
    for unit, div in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.2f}{unit}"
    return str(n)


def _quality(ev: dict) -> str:
    parts = []
    if "top1" in ev:
        parts.append(f"top-1 {ev['top1'] * 100:.2f}%")
    fid = ev.get("fidelity")
    if fid:
        parts.append(f"cos {fid['cosine']:.5f}")
    return ", ".join(parts) or "-"


def render(doc: dict) -> None:
    t = Table(title=f"edgec optimize: {escape(doc['model'])} -> {escape(doc['output'])}", title_justify="left")
    for col in ("pass", "nodes", "params", "MACs", "size", "sparsity", "what changed"):
        t.add_column(col, justify="left" if col in ("pass", "what changed") else "right")
    b = doc["before"]
    t.add_row("(input)", str(b["nodes"]), _num(b["params"]), _num(b["macs"]), _num(b["size_bytes"]) + "B",
              f"{b['weight_sparsity'] * 100:.1f}%", "")
    for p in doc["passes"]:
        if p.get("skipped"):
            t.add_row(p["name"], "", "", "", "", "", "disabled")
            continue
        delta = [n for n in p["notes"] if n[:1] in "+-"]
        notes = ", ".join(delta[:4]) + (f", +{len(delta) - 4} more" if len(delta) > 4 else "")
        t.add_row(p["name"], str(p["nodes"]), _num(p["params"]), _num(p["macs"]), _num(p["size_bytes"]) + "B",
                  f"{p['weight_sparsity'] * 100:.1f}%", escape(notes))
    out.print(t)
    for p in doc["passes"]:
        details = [n for n in p.get("notes", []) if n[:1] not in "+-" and n != "disabled"]
        for n in details:
            out.print(f"  {escape(p['name'])}: {escape(n)}")
    a = doc["after"]
    s = Table(title="before -> after", title_justify="left")
    for col in ("", "before", "after"):
        s.add_column(col, justify="right")
    s.add_row("params", _num(b["params"]), _num(a["params"]))
    s.add_row("MACs", _num(b["macs"]), _num(a["macs"]))
    s.add_row("file size", _num(b["size_bytes"]) + "B", _num(a["size_bytes"]) + "B")
    s.add_row("weight sparsity", f"{b['weight_sparsity'] * 100:.1f}%", f"{a['weight_sparsity'] * 100:.1f}%")
    s.add_row(f"quality ({escape(a['eval']['data'])})", _quality(b["eval"]), _quality(a["eval"]))
    s.add_row("onnxruntime latency (1 thread)", f"{b['latency_ms']:.3f} ms", f"{a['latency_ms']:.3f} ms")
    out.print(s)
    if "guard" in doc:
        g = doc["guard"]
        kept = ", ".join(f["name"] for f in g["float_layers"]) or "none"
        out.print(f"guard ({escape(g['budget'])}): kept float: {escape(kept)}")
        c = g.get("confirmed")
        if c:
            line = f"confirmed on {c['samples']} samples the choice did not use: cosine {c['cosine']:.5f}"
            if "drop_ci95" in c:
                line += (f", top-1 drop {c['drop_points']:.2f} points (95% CI {c['drop_ci95'][0]:.2f} to "
                         f"{c['drop_ci95'][1]:.2f})")
            if c.get("enough_data") is False:
                line += "; too few samples to promise the budget"
            out.print(line)
    for c in doc.get("fidelity_checks", []):
        if not c["passed"] or c["action"] != "none":
            out.print(f"fidelity check ({escape(c['stage'])}, {escape(c['floor'])}, {c['samples']} samples): "
                      f"{'passed' if c['passed'] else 'below the floor'}; {escape(c['action'])}")
    if "int8_cost" in doc:
        _render_int8_cost(doc["int8_cost"])
    if "sensitivity" in doc:
        _render_sensitivity(doc["sensitivity"])
    out.print(f"wrote {escape(doc['output'])} and {escape(doc['config'])}")


def _render_int8_cost(c: dict) -> None:
    """Per layer: int8 or float, its own int8 error, predicted int8 speed-up; then the whole mix."""
    t = Table(title=f"int8 per layer (target {escape(str(c['target']))})", title_justify="left")
    for col in ("layer", "op", "path", "MACs", "runs", "SQNR alone", "int8 speed-up"):
        t.add_column(col, justify="left" if col in ("layer", "op", "path", "runs") else "right")
    for r in c["layers"]:
        sq = "-" if r["sqnr_db"] is None else f"{r['sqnr_db']:.1f} dB"
        sp = f"{r['predicted_speedup']:.2f}x" if "predicted_speedup" in r else "-"
        t.add_row(escape(r["name"]), r["op"], r["path"], _num(r["macs"]), "int8" if r["int8"] else "float", sq, sp)
    out.print(t)
    m = c.get("model")
    if m:
        x = m["predicted_speedup"]
        words = f"{x:.2f}x faster" if x >= 1 else f"{1 / x:.2f}x slower"
        out.print(f"predicted latency, chosen mix vs fp32: {words} "
                  f"({m['mix_us']:.1f} vs {m['fp32_us']:.1f} us; {m['float_mac_share'] * 100:.1f}% of MACs float, "
                  f"{m['boundary_us']:.1f} us of float-island Quantize/Dequantize)")
    out.print(f"[dim]speed-up: {escape(c['source'])}; SQNR: {escape(c['sqnr'])}[/dim]")


def _render_sensitivity(sens: dict) -> None:
    rows = sens["rows"]
    t = Table(title=f"sensitivity ({sens['kind']}; top-1 points lost, or 1 - cosine)", title_justify="left")
    t.add_column("layer")
    levels = list(rows[0]["drops"]) if rows else []
    for lv in levels:
        t.add_column(f"{float(lv):.0%}", justify="right")
    for r in rows:
        t.add_row(escape(r["layer"]), *["kept" if r["drops"][lv] is None else f"{r['drops'][lv]:.4g}" for lv in levels])
    out.print(t)


def register(app: typer.Typer) -> None:
    app.command("optimize")(optimize)
    app.command("eval")(evaluate)
