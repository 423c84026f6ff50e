"""`edgec devices list|add|remove|check|trust`, `edgec deploy`, `edgec bench`."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from edgec.cli.console import err, out, print_json
from edgec.devices.progress import DeviceProgress
from edgec.devices.inventory import Inventory, device_from_profile, inventory_path, profile_names
from edgec.errors import EdgecError

devices_app = typer.Typer(help="Boards you deploy to: list, add, remove, check, trust, clean.\n\n"
                               "Example: edgec devices add kitchen-pi --host 192.168.1.20 --user pi --profile pi4",
                          no_args_is_help=True)

# The CPU flags that decide which kernels a board can run.
SIMD_FEATURES = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                 "avx512_bf16", "avx512_fp16", "avx_vnni", "neon", "vfpv4", "asimd", "asimdhp", "asimddp", "i8mm",
                 "bf16", "sve", "sve2")

DEVICE_OPT = typer.Option(None, "--device", "-d", help="Device or group name (repeatable; runs concurrently). "
                                                       "Default: local.")
ACCEPT_OPT = typer.Option(False, "--accept-new-host-key", help="Trust and save an unknown SSH host key.")
BUILD_OPT = typer.Option("auto", "--build", help="cross (build here, upload binaries), on-device (make on the "
                                                 "board) or auto (cross when the cross compiler is installed).")
SHAPE_OPT = typer.Option(None, "--input-shape", "-s", help="Pin an input's shape, NAME:D1,D2,... (repeatable).")
NO_TUNING_OPT = typer.Option(False, "--no-tuning", help="Ignore the device's tuning records (edgec tune).")


def _with_tuning(dev, t, build: str, options, model=None):
    """The device's tuning records (matching fingerprint) in the options, unless --no-tuning (model: the ONNX
    file built, whose own rejections of records apply)."""
    from edgec.devices.deploy import choose_mode
    from edgec.devices.tune import tuned_options

    return tuned_options(dev, t, choose_mode(dev, build), options, model=model)


@devices_app.command("list")
def list_devices(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List your devices (inventory file and the project's edgec.yaml) and the built-in profiles."""
    inv = Inventory()
    devs = inv.all()
    if json_out:
        print_json({"devices": [{"name": d.name, "profile": d.profile, "address": d.address, "target": d.target,
                                 "workdir": d.workdir, "emulated": d.emulated} for d in devs],
                    "groups": inv.groups(), "profiles": profile_names(), "inventory": str(inv.path)})
        return
    t = Table(title=f"devices ({escape(str(inv.path))})", title_justify="left")
    for col in ("name", "profile", "address", "target", "workdir"):
        t.add_column(col)
    for d in devs:
        t.add_row(escape(d.name), d.profile + (" (emulated)" if d.emulated else ""), escape(d.address), d.target,
                  escape(d.workdir))
    out.print(t)
    for g, members in inv.groups().items():
        out.print(f"group {escape(g)}: {escape(', '.join(members))}")
    out.print(f"profiles: {', '.join(profile_names())}")


@devices_app.command("add")
def add(
    name: str = typer.Argument(..., help="Your name for the board."),
    host: str = typer.Option(..., "--host", help="Host name, IP, a Host alias from ~/.ssh/config, or `local` "
                                                 "(this machine, no SSH)."),
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help=f"Board kind: {', '.join(profile_names())}. "
                                          "Default: connect and probe the board to choose."),
    user: Optional[str] = typer.Option(None, "--user", "-u", help="SSH user (default: from ~/.ssh/config or yours)."),
    port: Optional[int] = typer.Option(None, "--port", help="SSH port (default 22)."),
    identity_file: Optional[str] = typer.Option(None, "--identity-file", "-i", help="Private key (default: agent "
                                                                                     "or ~/.ssh/id_*)."),
    workdir: Optional[str] = typer.Option(None, "--workdir", help="Where builds go on the board."),
    exec_wrapper: Optional[str] = typer.Option(None, "--exec-wrapper", help="Run programs through this command, "
                                                                              "e.g. 'qemu-aarch64 -cpu cortex-a72'."),
    replace: bool = typer.Option(False, "--replace", help="Overwrite an existing entry."),
    accept_new_host_key: bool = ACCEPT_OPT,
) -> None:
    """Add a board to your inventory (~/.config/edgec/devices.yaml).

    Example: edgec devices add kitchen-pi --host 192.168.1.20 --user pi --profile pi4
    """
    if name == "local":
        raise EdgecError("`local` is built in (this machine); choose another name")
    local = host == "local"  # this machine without SSH, e.g. with an emulator as --exec-wrapper
    inv = Inventory()  # read first: a broken inventory is reported before connecting anywhere
    if profile is None and local:
        raise EdgecError("--host local needs --profile (the board kind the emulator or this machine stands for)")
    if profile is None:  # probe the board over SSH for the profile that fits
        from edgec.devices.transport import open_transport

        probe_dev = device_from_profile(name, "local", host=host, user=user, port=port, transport="ssh",
                                        identity_file=identity_file, probe_profile=True)
        with open_transport(probe_dev, accept_new_host_key=accept_new_host_key, notice=_notice):
            profile = probe_dev.profile
    dev = device_from_profile(name, profile, host=None if local else host, user=user, port=port,
                              identity_file=identity_file, workdir=workdir, transport="local" if local else None,
                              exec_wrapper=exec_wrapper.split() if exec_wrapper else None)
    inv.add(dev, replace=replace)
    out.print(f"added {escape(name)} ({escape(dev.address)}, profile {escape(profile)}) to "
              f"{escape(str(inventory_path()))}; "
              f"next: edgec devices check {escape(name)}")


@devices_app.command("remove")
def remove(name: str = typer.Argument(..., help="Device to remove.")) -> None:
    """Remove a board from your inventory."""
    Inventory().remove(name)
    out.print(f"removed {escape(name)}")


@devices_app.command("trust")
def trust_cmd(name: str = typer.Argument(..., help="Device whose SSH host key to trust."),
              replace: bool = typer.Option(False, "--replace", help="Replace a different, already trusted key.")
              ) -> None:
    """Fetch a board's SSH host key, show its fingerprint and trust it (saved in edgec's known_hosts).

    Compare the fingerprint with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` on the board.
    """
    from edgec.devices.ssh import trust

    dev = Inventory().get(name)
    if dev.transport == "local":
        raise EdgecError(f"{name} is a local device: nothing to trust")
    out.print(escape(trust(dev, replace=replace)))


@devices_app.command("check")
def check(names: List[str] = typer.Argument(..., help="Device(s) or group(s) to probe."),
          accept_new_host_key: bool = ACCEPT_OPT,
          json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Connect and probe boards: CPU, features, cores, memory, compiler, governor, temperature, throttling.

    Warns where the board disagrees with its profile. Example: edgec devices check kitchen-pi
    """
    from edgec.devices.probe import describe_governor, probe
    from edgec.devices.transport import open_transport

    recs = []
    for dev in Inventory().resolve(names):
        with open_transport(dev, accept_new_host_key=accept_new_host_key, notice=_notice) as t:
            recs.append(probe(t))
    if json_out:
        print_json(recs if len(recs) > 1 else recs[0])
        return
    for r in recs:
        t = Table(title=escape(f"{r['device']} ({r['address']}, profile {r['profile']})"), show_header=False,
                  title_justify="left")
        simd = [f for f in SIMD_FEATURES if f in r["features"]]
        feats = f"{' '.join(simd) or 'no SIMD extensions edgec uses'} ({len(r['features'])} flags in all)"
        for k, v in (("arch", r["arch"]), ("cpu", r["cpu"]), ("cores", r["cores"]), ("memory", f"{r['mem_mb']} MB"),
                     ("SIMD", feats), ("compiler", f"{r['cc'] or 'none'} {r['cc_version'] or ''}"),
                     ("governor", describe_governor(r)), ("temperature", r["temp_c"]),
                     ("throttled", r["throttled"]), ("load", r["loadavg_1m"]), ("onnxruntime", r["onnxruntime"])):
            t.add_row(k, escape(str(v if v is not None else "unknown")))
        out.print(t)
        for w in r["warnings"]:
            out.print(f"[yellow]warning:[/yellow] {escape(w)}")
        if not r["warnings"]:
            out.print("[green]matches its profile[/green]")


@devices_app.command("clean")
def clean(names: List[str] = typer.Argument(..., help="Device(s) or group(s) to clean."),
          accept_new_host_key: bool = ACCEPT_OPT) -> None:
    """Delete everything edgec uploaded to a board (builds, upload cache, run files) to free its disk.

    Example: edgec devices clean kitchen-pi
    """
    from edgec.devices.transport import open_transport

    for dev in Inventory().resolve(names):
        with open_transport(dev, accept_new_host_key=accept_new_host_key, notice=_notice) as t:
            work = t.workdir()
            used = t.run(["du", "-sk", work], timeout=120).out.split()
            t.check(["rm", "-rf", f"{work}/builds", f"{work}/objects", f"{work}/runs"], "cleaning", timeout=300)
        freed = f"{int(used[0]) / 1024:.1f} MB" if used and used[0].isdigit() else "nothing"
        out.print(f"{escape(dev.name)}: removed edgec's files in {escape(work)} ({freed})")


def _run_all(names, fn):
    """Run fn(device, progress) for every device concurrently; returns ({name: result}, {name: error})."""
    devices = Inventory().resolve(names or [])
    results, failures = {}, {}
    with DeviceProgress([d.name for d in devices], err) as prog:
        def one(dev):
            try:
                results[dev.name] = fn(dev, prog.callback(dev.name))
                prog.done(dev.name)
            except Exception as e:  # one board failing must not stop the others
                failures[dev.name] = e
                prog.done(dev.name, failed=True)
        with ThreadPoolExecutor(max_workers=max(1, len(devices))) as pool:
            list(pool.map(one, devices))
    if len(devices) == 1 and failures:
        raise next(iter(failures.values()))
    errors = {n: str(e) if isinstance(e, EdgecError) else f"internal error: {type(e).__name__}: {e}"
              for n, e in failures.items()}
    return [results[d.name] for d in devices if d.name in results], errors


def deploy_cmd(
    source: Path = typer.Argument(..., help="ONNX model, or a folder made by `edgec compile`."),
    device: Optional[List[str]] = DEVICE_OPT,
    build: str = BUILD_OPT,
    threads: int = typer.Option(1, "--threads", "-t", help="Threads the compiled model uses."),
    input_shape: Optional[List[str]] = SHAPE_OPT,
    model: Optional[Path] = typer.Option(None, "--model", help="The .onnx behind a build folder (for the check)."),
    check_outputs: bool = typer.Option(True, "--check/--no-check", help="Run once on random inputs and compare "
                                                                       "with onnxruntime."),
    run_bench: bool = typer.Option(False, "--bench", help="Also benchmark (as `edgec bench`)."),
    accept_new_host_key: bool = ACCEPT_OPT,
    no_tuning: bool = NO_TUNING_OPT,
) -> None:
    """Compile, build (cross or on the board), upload and run a model on one or more boards.

    Example: edgec deploy model.onnx --device kitchen-pi --build cross --bench
    """
    from edgec.codegen.options import CompileOptions
    from edgec.devices.bench import bench, check_outputs as check_fn
    from edgec.devices.deploy import deploy
    from edgec.devices.transport import open_transport
    from edgec.model import parse_input_shapes

    shapes = parse_input_shapes(input_shape) or None
    options = CompileOptions.from_env(threads=threads, **({"tuning": "off"} if no_tuning else {}))

    def work(dev, progress):  # each device's target and tuning records are filled in per device
        with open_transport(dev, accept_new_host_key=accept_new_host_key, notice=_notice) as t:
            dep = deploy(source, dev, t, mode=build, threads=threads, input_shapes=shapes, model=model,
                         progress=progress, options=_with_tuning(dev, t, build, options, source))
            res = {"device": dev.name, "dir": dep.dir, "build": dep.mode, "sent_bytes": dep.sent_bytes,
                   "unchecked": check_outputs and dep.model is None}
            if check_outputs and dep.model is not None:
                progress("run", "runner vs onnxruntime", 0)
                res["check"] = check_fn(dep, shapes)
                if not res["check"]["ok"]:
                    raise EdgecError(f"outputs on {dev.name} differ from {res['check']['reference']}: max "
                                     f"relative error {res['check']['max_rel_err']:.2e}"
                                     + (f", {res['check']['max_err_lsb']:.0f} quantization steps"
                                        if "max_err_lsb" in res["check"] else ""))
            if run_bench:
                progress("run", "bench", 0)
                res["bench"] = bench(dep, threads=threads)
            return res

    results, errors = _run_all(device, work)
    for r in results:
        chk = r.get("check")
        line = f"deployed to {r['device']}:{r['dir']} ({r['build']} build, {r['sent_bytes']} bytes sent)"
        if chk:
            line += f"; outputs match {chk['reference']} (max rel err {chk['max_rel_err']:.1e}" + \
                (f", {chk['max_err_lsb']:.0f} quantization steps)" if "max_err_lsb" in chk else ")")
        elif r["unchecked"]:
            line += "; outputs not checked (pass --model MODEL.onnx)"
        out.print(escape(line))
        if "bench" in r:
            from edgec.devices.report import render
            render(r["bench"], out)
    _report_errors(errors)


def bench_cmd(
    source: Path = typer.Argument(..., help="ONNX model, or a folder made by `edgec compile`."),
    device: Optional[List[str]] = DEVICE_OPT,
    runs: int = typer.Option(50, "--runs", "-n", help="Timed runs."),
    warmup: int = typer.Option(5, "--warmup", help="Untimed runs first."),
    warmup_ms: Optional[float] = typer.Option(None, "--warmup-ms",
                                              help="Warm up for at least this long too (default 250 ms)."),
    threads: int = typer.Option(1, "--threads", "-t", help="Threads the model uses."),
    json_out: bool = typer.Option(False, "--json", help="Print stable JSON (median_ms, p90_ms, ...) only."),
    compare_ort: bool = typer.Option(False, "--compare-ort", help="Also time onnxruntime on the board."),
    build: str = BUILD_OPT,
    input_shape: Optional[List[str]] = SHAPE_OPT,
    layers: bool = typer.Option(True, "--layers/--no-layers", help="Time each layer (profiling build)."),
    accept_new_host_key: bool = ACCEPT_OPT,
    no_tuning: bool = NO_TUNING_OPT,
) -> None:
    """Benchmark a model on boards: latency statistics, layers, memory, device state, trust warnings.

    Example: edgec bench model.onnx (this machine) or edgec bench model.onnx -d pi4 -d pi5 --compare-ort
    """
    from edgec.codegen.options import CompileOptions
    from edgec.devices.bench import bench
    from edgec.devices.deploy import deploy
    from edgec.devices.report import compare_table, render
    from edgec.devices.transport import open_transport
    from edgec.model import parse_input_shapes

    shapes = parse_input_shapes(input_shape) or None
    options = CompileOptions.from_env(threads=threads, **({"tuning": "off"} if no_tuning else {}))

    def work(dev, progress):  # each device's target and tuning records are filled in per device
        with open_transport(dev, accept_new_host_key=accept_new_host_key, notice=_notice) as t:
            opts = _with_tuning(dev, t, build, options, source)
            dep = deploy(source, dev, t, mode=build, threads=threads, input_shapes=shapes, profile=False,
                         progress=progress, options=opts)
            # per-layer timers cost time themselves: latency from the plain build, layers from a profiled one
            ldep = deploy(source, dev, t, mode=build, threads=threads, input_shapes=shapes, profile=True,
                          progress=progress, options=opts) if layers else None
            progress("run", f"{warmup}+{runs} runs", 0)
            return bench(dep, runs=runs, warmup=warmup, threads=threads, compare_ort=compare_ort, layers_dep=ldep,
                         warmup_ms=warmup_ms)

    reports, errors = _run_all(device, work)
    if json_out:
        print_json(reports[0] if len(reports) == 1 and not errors else {"reports": reports, "errors": errors})
    else:
        for r in reports:
            render(r, out)
        if len(reports) + len(errors) > 1:
            out.print(compare_table(reports, errors))
    _report_errors(errors)


def _notice(line: str) -> None:
    err.print(escape(line))


def _report_errors(errors: dict[str, str]) -> None:
    if errors:
        for name, e in errors.items():
            err.print(f"[bold red]error:[/bold red] {escape(e)}")
        raise EdgecError(f"{len(errors)} device(s) failed: {', '.join(errors)}")


def register(app: typer.Typer) -> None:
    app.add_typer(devices_app, name="devices")
    app.command("deploy")(deploy_cmd)
    app.command("bench")(bench_cmd)
