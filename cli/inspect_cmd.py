"""`edgec inspect`: what is in a model, and what edgec can compile of it."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from edgec.analysis import inspect_model
from edgec.cli.console import out, print_json
from edgec.model import load_model, parse_input_shapes, with_static_shapes


def inspect(
    model: Path = typer.Argument(..., help="ONNX model file.", show_default=False),
    input_shape: Optional[List[str]] = typer.Option(
        None, "--input-shape", "-s", help="Pin an input's shape, NAME:D1,D2,... (repeatable). Default: batch 1."),
    json_out: bool = typer.Option(False, "--json", help="Print a stable JSON document instead of tables."),
) -> None:
    """Show a model's inputs, ops, parameters, MACs per layer, conv kinds, sparsity and unsupported ops.

    Example: edgec inspect mobilenet.onnx --input-shape input:1,3,224,224 --json
    """
    shapes = parse_input_shapes(input_shape)
    declared = load_model(model, static=False, finite_weights=False)  # inspect shows broken models too
    doc = inspect_model(with_static_shapes(declared, shapes), declared, model)
    if json_out:
        print_json(doc)
    else:
        render(doc)


def _shape(s) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in s) + "]"


def _num(n) -> str:
    if n is None:
        return "?"
    for unit, div in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return f"{n / div:.2f}{unit}"
    return str(n)


def render(doc: dict) -> None:
    opset = ", ".join(f"{d} {v}" for d, v in doc["opset"].items())
    out.print(f"[bold]{escape(doc['model'])}[/bold]  IR {doc['ir_version']}, opset {opset}, producer {escape(doc['producer'] or '?')}")
    io = Table(title="Inputs and outputs", title_justify="left")
    for col in ("", "name", "shape", "declared", "dtype"):
        io.add_column(col)
    for kind in ("inputs", "outputs"):
        for t in doc[kind]:
            io.add_row(*map(Text, (kind[:-1], t["name"], _shape(t["shape"]), _shape(t["declared_shape"]), t["dtype"])))
    out.print(io)
    out.print(f"nodes {doc['nodes']}  params {_num(doc['params'])} ({doc['params']})  "
              f"weights {doc['weight_bytes'] / 1e6:.2f} MB  MACs {_num(doc['macs'])} ({doc['macs']})  "
              f"weight sparsity {doc['weight_sparsity']:.1%}")
    out.print(Text("ops: " + ", ".join(f"{op} {n}" for op, n in doc["op_histogram"].items())))
    cb = doc["conv_breakdown"]
    groups = ", ".join(f"g={g}: {n}" for g, n in cb["grouped_by_groups"].items())
    out.print(f"convs: dense kxk {cb['dense']}, 1x1 {cb['pointwise']}, depthwise {cb['depthwise']}, "
              f"grouped {cb['grouped']}" + (f" ({groups})" if groups else ""))
    layers = Table(title="Layers", title_justify="left")
    for col in ("name", "op", "kind", "groups", "MACs", "% MACs", "params", "sparsity"):
        layers.add_column(col, justify="right" if col not in ("name", "op", "kind") else "left",
                          overflow="fold")
    total = doc["macs"] or 1
    for l in doc["layers"]:
        macs = l.get("macs")
        layers.add_row(*map(Text, (l["name"], l["op"], l.get("kind", ""), str(l.get("groups", "")), _num(macs),
                                   f"{100 * macs / total:.1f}" if macs else "", _num(l.get("params")),
                                   f"{l['sparsity']:.1%}" if "sparsity" in l else "")))
    out.print(layers)
    un = doc["unsupported"]
    if not un["checked"]:
        out.print(f"[yellow]unsupported ops: not checked ({escape(un['reason'])})[/yellow]")
    elif un["nodes"]:
        out.print(f"[red]{len(un['nodes'])} node(s) the code generator does not support:[/red]")
        for n in un["nodes"]:
            out.print(Text(f"  {n['name']} ({n['op']})"))
    else:
        out.print("[green]every node is supported by the code generator[/green]")


def register(app: typer.Typer) -> None:
    app.command("inspect")(inspect)
