"""`edgec compile` and `edgec verify`: thin commands over edgec.codegen."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from edgec.cli.console import out, print_json
from edgec.model import parse_input_shapes

SHAPE_HELP = "Pin an input's shape, NAME:D1,D2,... (repeatable). Default: batch 1."


def compile(  # noqa: A001 - the command is called compile
    model: Path = typer.Argument(..., help="ONNX model file.", show_default=False),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for the generated C project.", show_default=False),
    target: str = typer.Option("native", "--target", "-t", help="native, generic, x86_64-avx2, x86_64-avx2-vnni, "
                               "x86_64-avx512, x86_64-avx512-vnni, x86_64-avx512-amx, aarch64-neon, aarch64-v82 "
                               "or armv7-neon."),
    threads: int = typer.Option(1, "--threads", help="Default thread count of the generated code (overridable at run time)."),
    input_shape: Optional[List[str]] = typer.Option(None, "--input-shape", "-s", help=SHAPE_HELP),
    build: bool = typer.Option(False, "--build", help="Also build runner and bench (cross compiler for foreign targets)."),
    profile: bool = typer.Option(False, "--profile", help="With --build: per-layer timing in bench (PROFILE=1)."),
    cc: Optional[str] = typer.Option(None, "--cc", help="C compiler for --build (default: the target's)."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary."),
    explain: bool = typer.Option(False, "--explain", help="Print each layer's algorithm (direct, GEMM, GSPC, "
                                 "depthwise, sparse, int8...) and why the cost model chose it."),
    no_tuning: bool = typer.Option(False, "--no-tuning", help="Ignore this machine's tuning records (edgec tune)."),
) -> None:
    """Compile an ONNX model into a standalone C project (model.c/h, weights, Makefile, runner, bench).

    Example: edgec compile model.onnx -o build/model --target aarch64-neon --build
    """
    from edgec.codegen import compile_model
    from edgec.codegen.options import CompileOptions

    from edgec.devices.tune import local_tuned_options

    cmd = "edgec compile " + shlex.join(sys.argv[2:] if len(sys.argv) > 2 else [str(model), "-o", str(output)])
    opts = CompileOptions.from_env(target=target, threads=threads, **({"tuning": "off"} if no_tuning else {}))
    b = compile_model(model, output, input_shapes=parse_input_shapes(input_shape), build=build, profile=profile,
                      cc=cc, command=cmd, options=local_tuned_options(opts, model))
    doc = {"dir": str(b.dir), "target": b.target.name, "arena_bytes": b.arena_bytes, "naive_bytes": b.naive_bytes,
           "weights_bytes": b.weights_bytes, "layers": b.layers,
           "binaries": {k: str(v) for k, v in b.binaries.items()}}
    if json_out:
        print_json(doc)
        return
    saved = 1 - b.arena_bytes / b.naive_bytes if b.naive_bytes else 0.0
    out.print(f"wrote {escape(str(b.dir))} for target {b.target.name}: {len(b.layers)} layers, "
              f"weights {b.weights_bytes} bytes, "
              f"arena {b.arena_bytes} bytes (naive {b.naive_bytes}, {saved:.0%} saved)")
    for name, path in b.binaries.items():
        out.print(f"built {name}: {escape(str(path))}")
    if explain:
        from edgec.codegen.costmodel import explain_table
        out.print(explain_table(b.layers))


def verify(
    model: Path = typer.Argument(..., help="ONNX model file.", show_default=False),
    target: str = typer.Option("native", "--target", "-t", help="Target to compile for; Arm targets run under qemu."),
    input_file: Optional[Path] = typer.Option(None, "--input", help=".npz with one array per model input "
                                              "(default: random inputs of the right shape and dtype)."),
    input_shape: Optional[List[str]] = typer.Option(None, "--input-shape", "-s", help=SHAPE_HELP),
    rtol: float = typer.Option(1e-3, "--rtol", help="Relative tolerance per element."),
    atol: float = typer.Option(1e-4, "--atol", help="Absolute tolerance per element."),
    lsb: float = typer.Option(1.0, "--lsb", help="int8 models: an output with a quantization step is also ok "
                              "within this many steps (requantization rounds differently from float by <= 1)."),
    threads: int = typer.Option(1, "--threads", help="Threads used by the compiled model."),
    keep: Optional[Path] = typer.Option(None, "--keep", help="Keep the generated project in this folder."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON report."),
) -> None:
    """Compile, build and run a model, then compare every output with onnxruntime.

    Float models are compared with onnxruntime's default (optimized) run. int8 models are compared with
    their exact QDQ arithmetic (onnxruntime, graph optimizations off; QOperator ops first rewritten to
    DequantizeLinear -> float op -> QuantizeLinear), the same on every CPU; onnxruntime's own optimized
    int8 result on this CPU is shown beside it. Exits non-zero when any output is out of tolerance.
    Example: edgec verify model.onnx --target aarch64-neon --json
    """
    from edgec.codegen import verify as run_verify
    from edgec.codegen.options import CompileOptions

    r = run_verify(model, input_file=input_file, input_shapes=parse_input_shapes(input_shape) or None,
                   rtol=rtol, atol=atol, lsb=lsb, out_dir=keep,
                   options=CompileOptions.from_env(target=target, threads=threads))
    if json_out:
        print_json(r.to_json())
    else:
        out.print(Text(f"reference: {r.reference}"))
        out.print(_verify_table(f"{model.name} on {r.target} vs the reference", r.outputs, verdict=True))
        side = r.onnxruntime_int8
        if side is not None and "error" in side:
            out.print(Text(f"{side['reference']}: could not run: {side['error']}"))
        elif side is not None:
            out.print(_verify_table(f"for comparison, {side['reference']} vs the same reference", side["outputs"]))
        out.print("[green]match[/green]" if r.ok else "[bold red]mismatch[/bold red]")
    if not r.ok:
        raise typer.Exit(1)


def _verify_table(title: str, rows: list[dict], verdict: bool = False) -> Table:
    lsb = any("max_err_lsb" in o for o in rows)
    t = Table(title=escape(title), title_justify="left")
    cols = ["output", "shape", "max abs err", *(["max err (LSB)"] if lsb else []), "max rel err", "cosine",
            "argmax agree", *(["ok"] if verdict else [])]
    for col in cols:
        t.add_column(col)
    for o in rows:
        cells = [o["name"], str(o["shape"]), _f(o["max_abs_err"]), *([_f(o.get("max_err_lsb"))] if lsb else []),
                 _f(o["max_rel_err"]), _f(o["cosine"], 6), _f(o.get("argmax_agreement"), 3)]
        t.add_row(*map(Text, cells + (["yes" if o["ok"] else "NO"] if verdict else [])))
    return t


def _f(v, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}g}"


def register(app: typer.Typer) -> None:
    app.command("compile")(compile)
    app.command("verify")(verify)
