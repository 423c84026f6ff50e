"""`edgec tune`: measure per-layer kernel variants on a device (thin; the library is edgec.devices.tune)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from edgec.cli.console import err, out, print_json
from edgec.errors import EdgecError


def tune_cmd(
    model: Optional[Path] = typer.Argument(None, help="ONNX model to tune (not needed with --export/--import)."),
    device: str = typer.Option("local", "--device", "-d", help="Device to tune on (local, or one from the inventory)."),
    threads: int = typer.Option(1, "--threads", "-t", help="Threads the compiled model uses (part of the signature)."),
    budget: float = typer.Option(300.0, "--budget", help="Stop measuring after this many seconds (the records "
                                 "measured so far are kept; run again to go on)."),
    transfer_only: bool = typer.Option(False, "--transfer-only", help="Only reuse other models' records: exact "
                                       "signatures, then their variants for layers of the same class, measured."),
    build: str = typer.Option("auto", "--build", help="cross, on-device or auto (as for deploy)."),
    input_shape: Optional[List[str]] = typer.Option(None, "--input-shape", "-s", help="Pin an input's shape, "
                                                    "NAME:D1,D2,... (repeatable)."),
    no_guard: bool = typer.Option(False, "--no-guard", help="Skip the whole-model check after the layer search "
                                  "(records that make this model slower are then not rejected for it)."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    export: Optional[Path] = typer.Option(None, "--export", help="Write the tuning records (of --device when "
                                          "given with a model, else all) to this JSON file."),
    import_: Optional[Path] = typer.Option(None, "--import", help="Add the records of a JSON file written by "
                                           "--export."),
    accept_new_host_key: bool = typer.Option(False, "--accept-new-host-key", help="Trust and save an unknown "
                                             "SSH host key."),
) -> None:
    """Measure every distinct layer's kernel variants on a device and record the fastest; later
    compile/deploy/bench builds for that device use the records (--no-tuning ignores them).

    Example: edgec tune model.onnx --device kitchen-pi --budget 120
    """
    from edgec.devices.tuningdb import TuningDB, export as export_records, import_file

    if export or import_:
        if model is not None:
            raise EdgecError("--export/--import move records; tune the model in a separate command")
        with TuningDB() as db:
            if import_:
                n = import_file(import_, db)
                out.print(escape(f"imported {n} tuning record(s) from {import_} into {db.path}"))
            if export:
                n = export_records(export, db)
                out.print(escape(f"exported {n} tuning record(s) to {export}"))
        return
    if model is None:
        raise EdgecError("give a model to tune (or --export FILE / --import FILE)")
    from edgec.devices.inventory import Inventory
    from edgec.devices.transport import open_transport
    from edgec.devices.tune import tune
    from edgec.model import parse_input_shapes

    devs = Inventory().resolve([device])
    if len(devs) != 1:
        raise EdgecError(f"{device} is a group of {len(devs)} devices: tune one device at a time")
    dev = devs[0]
    shapes = parse_input_shapes(input_shape) or None
    with _TuneProgress(err) as prog, open_transport(dev, accept_new_host_key=accept_new_host_key,
                                                    notice=lambda s: err.print(escape(s))) as t:
        rep = tune(model, dev, t, threads=threads, budget=budget, transfer_only=transfer_only, mode=build,
                   input_shapes=shapes, progress=prog, guard=not no_guard)
    if json_out:
        print_json(rep)
        return
    render(rep)


def render(rep: dict) -> None:
    emu = " (emulated: timings are the emulator's, kept for emulated devices only)" if rep["emulated"] else ""
    what = "transfer-tuning" if rep["transfer_only"] else "tuning"
    tab = Table(title=escape(f"{what} {Path(rep['model']).name} on {rep['device']}{emu}"), title_justify="left")
    for col in ("layer", "class", "cost model", "tuned", "speedup", "record from"):
        tab.add_column(col)
    for r in rep["layers"]:
        rec = r.get("record")
        name = r["layers"][0][:32] + (f" (+{len(r['layers']) - 1})" if len(r["layers"]) > 1 else "")
        tab.add_row(*map(Text, (name, r["class"], r["default_algo"], rec["algo"] if rec else "-",
                                f"{rec['speedup']:.2f}x" if rec else "-", r["source"])))
    out.print(tab)
    src = f"; records transferred from {rep['source_model']}" if rep.get("source_model") else ""
    line = (f"{rep['measured']} layer signature(s) measured, {rep['resumed']} recorded before (resumed) in "
            f"{rep['search_s']:.0f} s{src}")
    if rep["stopped_at_budget"]:
        line += f"; stopped at the {rep['budget_s']:.0f} s budget: run again to measure the rest"
    out.print(escape(line))
    g = rep.get("guard")
    if g:
        line = f"whole-model check: {g['verdict']}"
        if "tuned_over_untuned" in g:
            line += f" (tuned / untuned {g['tuned_over_untuned']:.2f}, median of {g['rounds']} interleaved rounds)"
        out.print(escape(line))
        for x in g.get("records", []):
            if not x["kept"]:
                out.print(escape(f"  rejected for this model: {x['algo']} on {x['signature']}: {x['why']}"))
            ru = x.get("runner_up")
            if ru and ru.get("checked"):
                what = "used instead" if ru["kept"] else "not used either"
                out.print(escape(f"    runner-up {ru['variant']} ({ru['algo']}, {ru['alone_speedup']:.2f}x alone): "
                                 f"with / without {ru['with_over_without']:.2f}, {ru['decision']}: {what}"))
        if g.get("unchecked"):
            what = "kept" if g.get("unchecked_kept", True) else "left out of this model's builds until a tune checks them"
            out.print(escape(f"  not checked (budget), {what}: {', '.join(g['unchecked'])}"))
    wm = rep.get("whole_model")
    if wm:
        cpu = ", CPU time a run" if wm.get("clock") == "cpu" else ""
        out.print(escape(f"whole model: untuned {wm['untuned_ms']:.3f} ms, tuned {wm['tuned_ms']:.3f} ms "
                         f"({wm['speedup']:.2f}x{cpu}; {wm['tuned_layers']} layer(s) use a record)"))


class _TuneProgress:
    """A rich bar over the layer signatures with the best speedup so far (plain lines when piped)."""

    def __init__(self, console):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console, self.live = console, console.is_terminal
        self.p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          TextColumn("best so far {task.fields[best]}"), console=console, transient=False)
        self.task = None
        self.best = 1.0

    def __enter__(self):
        if self.live:
            self.p.start()
        return self

    def __exit__(self, *exc):
        if self.live:
            self.p.stop()

    def __call__(self, event: str, **kw) -> None:
        if event == "start":
            self.task = self.p.add_task("tuning", total=kw["total"], best="1.00x")
        elif event == "layer" and self.task is not None:
            self.p.update(self.task, description=escape(kw["cls"]))
            if not self.live:
                self.console.print(escape(f"layer {kw['signature']}"))
        elif event == "candidate" and self.task is not None and self.live:
            self.p.update(self.task, description=escape(f"{kw['name']}"))
        elif event == "done-layer" and self.task is not None:
            self.best = kw["best"]
            self.p.update(self.task, advance=1, best=f"{self.best:.2f}x")
        elif event == "guard" and self.task is not None:
            self.p.update(self.task, description=f"whole-model check of {kw['records']} record(s)")
        elif event == "final" and self.task is not None:
            self.p.update(self.task, description="whole model: untuned vs tuned")


def register(app: typer.Typer) -> None:
    app.command("tune")(tune_cmd)
