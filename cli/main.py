"""The `edgec` entry point: builds the Typer app and owns the error edge.

Every command lives in its own module under cli/ and registers itself through
`register(app)`. Library code raises EdgecError; only main() turns it into one
red line on stderr and a non-zero exit (a traceback only with --debug).
"""

from __future__ import annotations

import sys

import typer

from edgec import __version__
from edgec.errors import EdgecError

from edgec.cli import inspect_cmd, optimize_cmd, devices_cmd, compile_cmd, tune_cmd
from edgec.cli.console import err, plain

COMMAND_MODULES = [inspect_cmd, optimize_cmd, devices_cmd, compile_cmd, tune_cmd]

app = typer.Typer(
    name="edgec",
    help="Optimize, compile, verify, deploy and benchmark ONNX models on small Arm and x86 boards.\n\n"
         "Example: edgec inspect model.onnx --input-shape input:1,3,224,224",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"edgec {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
) -> None:
    """edgec: ONNX in, a fast dependency-free C binary on your board out."""


for _module in COMMAND_MODULES:
    _module.register(app)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        rv = app(args=args, prog_name="edgec", standalone_mode=False)
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        err.print("[red]aborted[/red]")
        return 130
    except typer.TyperException as e:
        # Usage errors (unknown command or option, bad value, missing argument): typer's own rendering is the
        # usual usage line, a hint and the problem; exit code 2. `edgec` alone prints the help the same way.
        show = getattr(e, "show", None)
        if show is not None:
            show()
        else:
            err.print(f"error: {e}", markup=False)
        return e.exit_code
    except EdgecError as e:
        if debug:
            raise
        err.print(f"[bold red]error:[/bold red] {plain(str(e))}", markup=True, highlight=False)
        return e.exit_code
    except KeyboardInterrupt:
        err.print("[red]interrupted[/red]")
        return 130
    except Exception as e:  # a bug: say so in one line, the traceback is behind --debug
        if debug:
            raise
        text = " ".join(str(e).split())[:300]
        err.print(f"[bold red]internal error:[/bold red] {type(e).__name__}: {plain(text)} "
                  "(rerun with --debug for the traceback)")
        return 1
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":  # python -m edgec.cli.main
    sys.exit(main())
