"""edgec tune on this host: whole-model times untuned / fully tuned / transfer-tuned, search times, and
onnxruntime in the same run (1 thread by default).

    python benchmarks/bench_tune.py --budget 300 --md
    python benchmarks/bench_tune.py --pairs stack8:stack16 --full stack4,stack8,stack16 --budget 120
    python benchmarks/bench_tune.py --full digits,ppocr-cls --pairs ppocr-cls:digits --budget 120 --search-only

Every model in --full is tuned with its own fresh database; every pair SRC:DST transfer-tunes DST
(--transfer-only) from a database holding only SRC's records, so transfer never sees DST's own records.
Each search starts from an empty build cache. A pair whose DST is in --full too gives the search-time
ratio transfer / full for DST; --warm times DST's transfer and full searches again, each in its own copy
of SRC's build cache (a device that tuned SRC before: its compiled runtime kernels are in the object cache), --deployed
as well after an untuned deploy of DST there (a device that ran DST before tuning it: the cost model's
kernels of DST compiled too). Afterwards untuned, tuned, transfer and onnxruntime are timed in
interleaved rounds (median of the rounds' medians; --search-only skips this); with --md a second table gives every
round's medians, their spread and the gains round by round (the noise of a shared host). Runs in one process so that
edgec's code-generator fingerprint stays put; the databases live in a temporary cache dir (--cache-dir to
keep them). Search times are wall seconds and CPU seconds (this process and what it ran: make, the compilers,
the programs); each search also prints its wall seconds by phase (the report's `phases`: plan, codegen, reference,
write, make, upload, run, check) and the object cache's hits and stores. --builds per-candidate,units runs every
search once per way of building the measurement
programs, back to back (before/after in one run).

    python benchmarks/bench_tune.py --full rn34g16,rn34g32 --pairs rn34g16:rn34g32 --search-only --warm \
        --builds per-candidate,units --md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "codegen"))

from bench_gspc import stack_model  # noqa: E402
from common import median, random_inputs, time_onnxruntime  # noqa: E402


# multi-layer grouped chains: one grouped 3x3 conv + ReLU per stage of the network's shape list
# (benchmarks/bench_gspc.py SCALING: channels, input size), stride 2 between stages, so every layer is its own
# signature and g=16 / g=32 or the two networks share the layer classes (gconv3x3s1+relu, gconv3x3s2+relu)
# mnv2: MobileNetV2's grouped-set shapes from 144 channels on (192ch 28x28 is where the GSPC set measured the cost
# model's Winograd pick slower than GSPC at g 8 / 16)
CHAINS = {"rn34": [(64, 56), (128, 28), (256, 14), (512, 7)], "wrn": [(32, 32), (64, 16), (128, 8)],
          "mnv2": [(144, 56), (192, 28), (384, 14), (576, 7)]}


def chain_model(path: Path, stages: list[tuple[int, int]], g: int, seed: int = 0) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits, x, cin = [], [], "x", stages[0][0]
    layers = []
    for i, (c, h) in enumerate(stages):
        if i:
            layers.append((cin, c, 2))
        layers += [(c, c, 1), (c, c, 1)]
        cin = c
    for i, (ci, co, s) in enumerate(layers):
        w = (rng.standard_normal((co, ci // g, 3, 3)) / np.sqrt(9 * ci // g)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(np.zeros(co, np.float32), f"b{i}")]
        nodes += [helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], group=g, pads=[1, 1, 1, 1],
                                   strides=[s, s], name=f"conv{i}"),
                  helper.make_node("Relu", [f"c{i}"], [f"y{i}"], name=f"relu{i}")]
        x = f"y{i}"
    c0, h0 = stages[0]
    c1, h1 = stages[-1]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c0, h0, h0])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, c1, h1, h1])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def model_path(name: str, tmp: Path) -> tuple[Path, dict | None]:
    from edgec import zoo

    chain = re.fullmatch(r"(rn34|wrn|mnv2)g(\d+)", name)
    if chain:  # e.g. rn34g16: ResNet34's stage shapes, 16 groups
        return chain_model(tmp / f"{name}.onnx", CHAINS[chain.group(1)], int(chain.group(2))), None
    if name.startswith("stack"):  # the grouped scaling set: 4 x conv3x3 + ReLU, 128 ch, 28x28, g groups
        g = int(name[5:])
        return stack_model(tmp / f"{name}.onnx", 128, 28, 1, g, 4), None
    if name in ("squeezenet", "shufflenet", "resnet50"):
        from test_e2e import randomized
        return randomized(zoo.onnx_light(name), tmp / f"{name}.onnx"), None
    if name == "ppocr-cls":
        return zoo.ppocr_cls(), {"x": [1, 3, 48, 192]}
    if name == "digits":
        return zoo.digits_cnn().model, None
    raise SystemExit(f"unknown model {name}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", default="stack8,stack16,squeezenet,digits,ppocr-cls",
                    help="models to tune fully (comma list): stackG, rn34gG, wrngG, mnv2gG (multi-layer grouped "
                         "chains), squeezenet, shufflenet, resnet50, digits, ppocr-cls")
    ap.add_argument("--pairs", default="stack8:stack16,ppocr-cls:digits", help="SRC:DST transfer pairs (comma list)")
    ap.add_argument("--search-only", action="store_true", help="search times only, no whole-model timing")
    ap.add_argument("--warm", action="store_true",
                    help="also time each pair's DST searches (transfer, then full) in SRC's build cache")
    ap.add_argument("--deployed", action="store_true",
                    help="with --warm: deploy DST untuned in SRC's build cache first (not timed)")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds per full tune")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cache-dir", type=Path, help="keep builds and databases here")
    ap.add_argument("--builds", default="units",
                    help="how a measurement program compiles its candidates (comma list, each runs every search): "
                         "units (candidates sharing runtime headers in one translation unit, objects cached) or "
                         "per-candidate (one object per candidate file, the build before units)")
    ap.add_argument("--no-guard", action="store_true",
                    help="searches without the whole-model check (edgec tune --no-guard): every record kept")
    ap.add_argument("--evict-mb", type=float, default=0.0,
                    help="searches read this many MB between a candidate's timed runs (tune.EVICT_BYTES, a diagnostic)")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="whole-model times: the bench program's CPU time per run (1 thread: leaves out the time other "
                         "processes held the core) or wall clock; onnxruntime is wall clock either way")
    ap.add_argument("--md", action="store_true")
    ap.add_argument("--blk-table", metavar="MODEL=DB",
                    help="only print the cache-blocking table of a kept tuning database (a full tune's) and exit")
    a = ap.parse_args()
    if a.blk_table:
        name, _, db = a.blk_table.partition("=")
        blk_table(name, Path(db), a.md)
        return 0

    import onnxruntime as ort
    ort.set_default_logger_severity(3)  # the light models list initializers as inputs: one warning each
    tmp = Path(tempfile.mkdtemp(prefix="bench-tune-"))
    cache = a.cache_dir or tmp / "cache"
    os.environ["EDGEC_CACHE_DIR"] = str(cache)
    from edgec.devices.inventory import device_from_profile
    from edgec.devices.transport import open_transport
    from edgec.devices.tune import Tuner, tune
    from edgec.devices.tuningdb import TuningDB

    dev = device_from_profile("local", "local")
    full = [m for m in a.full.split(",") if m]
    pairs = [tuple(p.split(":")) for p in a.pairs.split(",") if p]
    names = list(dict.fromkeys(full + [m for p in pairs for m in p]))
    paths = {n: model_path(n, tmp) for n in names}
    builds = [b for b in a.builds.split(",") if b]
    if not builds or set(builds) - {"units", "per-candidate"}:
        raise SystemExit(f"--builds: units and/or per-candidate, got {a.builds!r}")
    by_build: dict[str, dict[str, dict]] = {b: {n: {} for n in names} for b in builds}
    load0 = open("/proc/loadavg").read().split()[:3]
    from edgec.devices import tune as tune_mod

    def search(kind: str, n: str, db, b: str, transfer: bool = False) -> dict:
        """One search of model n in build mode b; its wall time (the report's) and the CPU time of this process
        and the compilers and programs it ran (less sensitive to the shared host's load)."""
        tune_mod.UNITS = b == "units"
        tune_mod.EVICT_BYTES = int(a.evict_mb * 2**20)
        from edgec.devices.deploy import OBJECT_STATS, TUNE_OBJECT_STATS
        c0, o0, u0 = _cpu_s(), dict(OBJECT_STATS), dict(TUNE_OBJECT_STATS)
        rep = tune(paths[n][0], dev, t, threads=a.threads, budget=a.budget, transfer_only=transfer,
                   input_shapes=paths[n][1], db=db, final_bench=False, guard=not a.no_guard)
        rep["cpu_s"] = _cpu_s() - c0
        print(f"# {b}: {kind} {n}: {rep['measured']} signatures in {rep['search_s']:.1f} s ({rep['cpu_s']:.1f} s CPU)"
              f"{' (budget hit)' if rep['stopped_at_budget'] else ''}; load {_load()}", file=sys.stderr)
        # where the search's wall time went, and what make compiled (runtime kernels / the program's own objects:
        # compiled here, or taken from the object cache)
        rep["objects"] = {k: {s: d[s] - d0[s] for s in d} for k, d, d0 in (("runtime", OBJECT_STATS, o0),
                                                                          ("tune", TUNE_OBJECT_STATS, u0))}
        print(f"# {b}: {kind} {n}: phases (wall s) " + json.dumps(rep.get("phases", {})) + "; objects (cache hits / "
              f"compiled and stored) " + json.dumps(rep["objects"]) + f"; programs {rep.get('programs')}",
              file=sys.stderr)
        g = rep.get("guard")
        if g:  # the whole-model check after the search (its time is not in search_s)
            print(f"# {b}: {kind} {n}: whole-model check {g.get('s', 0):.1f} s: {g['verdict']}; "
                  + json.dumps({k: g.get(k) for k in ("tuned_over_untuned", "tuned_interval", "tuned_rounds",
                                                      "kept_over_untuned", "kept_interval")})
                  + "".join(f"\n#   {x['signature']} {x['algo']}"
                            + (f" (alone {x['alone_speedup']}x)" if x["alone_speedup"] else "")
                            + f": with / without {x['with_over_without']} {x['interval']} {x['decision']} {x['rounds']} "
                            f"{'kept' if x['kept'] else 'REJECTED'}" + _runner_up(x.get("runner_up"))
                            for x in g.get("records", [])), file=sys.stderr)
        return rep

    with open_transport(dev) as t:
        # each search starts from an empty build cache: no phase may reuse another's builds. With several --builds,
        # each phase runs once per build mode, back to back (each mode in its own caches), so load falls on all
        for n in full:
            for b in builds:
                os.environ["EDGEC_CACHE_DIR"] = str(cache / b / f"full-{n}")
                db = TuningDB(cache / b / f"full-{n}.sqlite")
                rep = search("full", n, db, b)
                by_build[b][n].update(full_search_s=rep["search_s"], full_cpu_s=rep["cpu_s"],
                                     full_measured=rep["measured"], full_changed=_changed(rep),
                                     full_programs=rep.get("programs"),
                                     full_stopped=rep["stopped_at_budget"], full_db=db.path,
                                     full_layers=[(r["class"], r.get("record", {}).get("algo"),
                                                   r.get("record", {}).get("speedup")) for r in rep["layers"]])
                db.close()
        for src, dst in pairs:
            if src not in full:
                raise SystemExit(f"pair {src}:{dst}: {src} must be in --full")
            for b in builds:
                r = by_build[b][dst]
                os.environ["EDGEC_CACHE_DIR"] = str(cache / b / f"transfer-{src}-{dst}")
                path = cache / b / f"transfer-{src}-{dst}.sqlite"
                shutil.copy(by_build[b][src]["full_db"], path)
                db = TuningDB(path)
                rep = search(f"transfer from {src}", dst, db, b, transfer=True)
                r.update(transfer_from=src, transfer_search_s=rep["search_s"], transfer_cpu_s=rep["cpu_s"],
                         transfer_db=path, transfer_programs=rep.get("programs"),
                         transfer_changed=_changed(rep), transfer_measured=rep["measured"],
                         transfer_stopped=rep["stopped_at_budget"],
                         transfer_sources=[x["source"] for x in rep["layers"]])
                db.close()
                if "full_search_s" in r:
                    r["search_ratio"] = rep["search_s"] / r["full_search_s"]
                    r["cpu_ratio"] = rep["cpu_s"] / r["full_cpu_s"]
        for src, dst in pairs if a.warm else []:
            # a device that tuned SRC before: its build cache holds SRC's programs and compiled kernels. DST is
            # transfer-tuned and fully tuned (fresh databases) each in its own copy of that cache, so neither
            # reuses what the other compiled
            for b in builds:
                base = cache / b / f"full-{src}"
                os.environ["EDGEC_CACHE_DIR"] = str(base)
                if a.deployed:  # the device ran DST untuned before: the cost model's kernels are built
                    from edgec.devices.deploy import deploy
                    deploy(paths[dst][0], dev, t, input_shapes=paths[dst][1])
                path = cache / b / f"warm-transfer-{src}-{dst}.sqlite"
                shutil.copy(by_build[b][src]["full_db"], path)
                warm = {}
                for kind, dbp in (("transfer", path), ("full", cache / b / f"warm-full-{src}-{dst}.sqlite")):
                    wdir = cache / b / f"warm-{kind}-{src}-{dst}"
                    shutil.copytree(base, wdir, symlinks=True)
                    os.environ["EDGEC_CACHE_DIR"] = str(wdir)
                    with TuningDB(dbp) as db:
                        warm[kind] = search(f"warm {kind} (after {src})", dst, db, b, transfer=kind == "transfer")
                by_build[b][dst].update(warm_from=src, warm_transfer_search_s=warm["transfer"]["search_s"],
                                       warm_full_search_s=warm["full"]["search_s"],
                                       warm_ratio=warm["transfer"]["search_s"] / warm["full"]["search_s"],
                                       warm_transfer_cpu_s=warm["transfer"]["cpu_s"],
                                       warm_full_cpu_s=warm["full"]["cpu_s"],
                                       warm_cpu_ratio=warm["transfer"]["cpu_s"] / warm["full"]["cpu_s"])
        results = by_build[builds[0]]  # the whole-model times use the first build mode's records
        # whole-model times, interleaved rounds
        clock = a.clock if a.threads == 1 else "wall"  # a pool's spinning workers add CPU time, not latency
        os.environ["EDGEC_CACHE_DIR"] = str(cache / "whole")
        for n in [] if a.search_only else names:
            path, shapes = paths[n]
            kinds = {"untuned": None}
            if "full_db" in results[n]:
                kinds["tuned"] = results[n]["full_db"]
            if "transfer_db" in results[n]:
                kinds["transfer"] = results[n]["transfer_db"]
            tuners = {k: Tuner(path, dev, t, threads=a.threads, input_shapes=shapes, runs=a.runs,
                               db=TuningDB(p) if p else TuningDB(cache / "empty.sqlite")) for k, p in kinds.items()}
            feeds = random_inputs(path, shapes, seed=1)
            times: dict[str, list[float]] = {k: [] for k in [*kinds, "onnxruntime"]}
            for _ in range(a.rounds):
                for k, tu in tuners.items():
                    times[k].append(tu.whole_model(k != "untuned", runs=a.runs, clock=clock)["median_ms"])
                times["onnxruntime"].append(median(time_onnxruntime(path, feeds, a.threads, a.runs, 5)))
            results[n]["ms"] = {k: median(v) for k, v in times.items()}
            results[n]["rounds_ms"] = times
            print(f"# {n} rounds (ms): {json.dumps(times)}; load {_load()}", file=sys.stderr)
            for tu in tuners.values():
                tu.db.close()
    load1 = open("/proc/loadavg").read().split()[:3]
    host = f"{platform.machine()} {_cpu()}, {os.cpu_count()} cores; loadavg before {' '.join(load0)}, after {' '.join(load1)}"
    print(f"# host: {host}; {a.threads} thread(s), {a.runs} runs x {a.rounds} rounds, budget {a.budget:.0f} s; edgec "
          f"builds timed in {'CPU time' if a.clock == 'cpu' and a.threads == 1 else 'wall clock'}")
    if a.search_only or len(builds) > 1:
        for b in builds:
            print(f"# build: {b}")
            _search_table(names, by_build[b], a.md, a.deployed)
    if not a.search_only and a.md:
        print("| model | untuned ms | tuned ms (search s, signatures changed/measured) | transfer ms (from, search s, "
              "changed) | onnxruntime ms | tuned/untuned | transfer gain / full gain | transfer / full search |")
        print("|---|---|---|---|---|---|---|---|")
        rounds_md = []
    for n in [] if a.search_only else names:
        r, ms = results[n], results[n]["ms"]
        tuned = f"{ms['tuned']:.3f} ({r['full_search_s']:.0f} s, {r['full_changed']}/{r['full_measured']}" \
            f"{', budget hit' if r['full_stopped'] else ''})" if "tuned" in ms else "-"
        tr = f"{ms['transfer']:.3f} ({r['transfer_from']}, {r['transfer_search_s']:.0f} s, {r['transfer_changed']})" \
            if "transfer" in ms else "-"
        ratio = f"{ms['tuned'] / ms['untuned']:.2f}" if "tuned" in ms else "-"
        share = "-"
        if "tuned" in ms and "transfer" in ms:
            full_gain, tr_gain = ms["untuned"] - ms["tuned"], ms["untuned"] - ms["transfer"]
            share = f"{tr_gain / full_gain:.0%}" if full_gain > 0 else "full tuning gained nothing"
        search = f"{r['search_ratio']:.0%}" if "search_ratio" in r else "-"
        if a.md:
            print(f"| {n} | {ms['untuned']:.3f} | {tuned} | {tr} | {ms['onnxruntime']:.3f} | {ratio} | {share} | "
                  f"{search} |")
            rounds_md.append(_rounds_row(n, r["rounds_ms"]))
        else:
            print(json.dumps({"model": n, **{k: v for k, v in r.items() if not k.endswith("_db")}}, default=str))
    if not a.search_only and a.md:
        # the noise: every round's median per build, the spread of the rounds, and the gains round by round
        # (untuned, tuned and transfer of one round ran back to back, so a change of load falls on all three)
        print("\n| model | untuned ms, per round (spread) | tuned ms, per round (spread) | transfer ms, per round "
              "(spread) | tuned / untuned, per round | transfer gain / full gain, per round |")
        print("|---|---|---|---|---|---|")
        for row in rounds_md:
            print(row)
    for n in full:  # the blocking variants' own gains, from the first build mode's full tune of each model
        blk_table(n, by_build[builds[0]][n]["full_db"], a.md)
    for n in names:
        if results[n].get("full_layers"):
            print(f"# {n} tuned layers: " + "; ".join(f"{c} -> {algo} {sp}x" for c, algo, sp in
                                                       results[n]["full_layers"] if algo), file=sys.stderr)
    if not a.cache_dir:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


BLK = ("blk-nc-half", "blk-nc-double", "blk-kc-half", "blk-kc-whole")


def blk_table(model: str, db_path, md: bool) -> None:
    """Per layer of a full tune: the cost model's time and each cache-blocking variant's speedup over it (same code:
    the variant gave the default's blocking; '-': not measured), and what the record kept. Also
    `python benchmarks/bench_tune.py --blk-table MODEL=DB.sqlite`."""
    from edgec.devices.tuningdb import TuningDB

    with TuningDB(db_path) as db:
        recs = [r for r in db.records() if any(t["variant"] in BLK for t in r.trials)]
    if md:
        print(f"\n{model}: cache-blocking variants per layer (speedup over the cost model's pick, layer alone)\n")
        print("| layer | default | default ms | " + " | ".join(b[4:] for b in BLK) + " | recorded |")
        print("|---|---|---|" + "---|" * len(BLK) + "---|")
    wins, live = 0, 0
    for r in sorted(recs, key=lambda r: -r.default_ms):
        tr = {t["variant"]: t for t in r.trials}
        cells = []
        for b in BLK:
            t = tr.get(b)
            if t is None:
                cells.append("-")
            elif "ms" in t:
                live += 1
                cells.append(f"{r.default_ms / t['ms']:.2f}")
            else:
                cells.append("same" if t.get("rejected", "").startswith("same code") else t.get("rejected", "?")[:20])
        wins += r.variant in BLK
        sig = r.signature.split(":")
        row = [f"{sig[0]} {sig[1].split('G')[0]}", r.default_algo, f"{r.default_ms:.3f}", *cells, r.variant]
        print(("| " + " | ".join(row) + " |") if md else "# blk " + model + ": " + " ".join(row),
              file=sys.stdout if md else sys.stderr)
    print(f"# {model}: {len(recs)} layers with blocking variants, {live} blocking candidates timed, "
          f"{wins} records kept one", file=sys.stderr)


def _rounds_row(n: str, times: dict[str, list[float]]) -> str:
    """One model's rounds: each build's round medians with their spread ((max - min) / median), tuned / untuned
    and the transfer's share of full tuning's gain within each round."""
    def col(k: str) -> str:
        v = times.get(k)
        if not v:
            return "-"
        return f"{', '.join(f'{x:.3f}' for x in v)} ({(max(v) - min(v)) / median(v):.0%})"

    u, tu, tr = times["untuned"], times.get("tuned"), times.get("transfer")
    ratio = ", ".join(f"{b / a:.2f}" for a, b in zip(u, tu)) if tu else "-"
    share = "-"
    if tu and tr:
        share = ", ".join(f"{(a - c) / (a - b):.0%}" if a > b else "no gain" for a, b, c in zip(u, tu, tr))
    return f"| {n} | {col('untuned')} | {col('tuned')} | {col('transfer')} | {ratio} | {share} |"


def _runner_up(ru: dict | None) -> str:
    if not ru:
        return ""
    if not ru.get("checked"):
        return f"; runner-up {ru['variant']} not checked ({ru.get('why')})"
    return (f"; runner-up {ru['variant']} {ru['algo']} (alone {ru['alone_speedup']}x): with / without "
            f"{ru['with_over_without']} {ru['interval']} {ru['decision']} {'KEPT' if ru['kept'] else 'rejected'}")


def _changed(rep: dict) -> int:
    """Records whose choice differs from the cost model's (a region record always names its layout)."""
    return sum(1 for r in rep["layers"] if "record" in r and r["record"]["algo"] != r["record"]["default_algo"])


def _search_table(names: list[str], results: dict, md: bool, deployed: bool = False) -> None:
    """Search times only: full tune and transfer per model, and transfer / full for a DST tuned both ways; wall
    seconds (CPU seconds of the process and what it ran)."""
    if md:
        print("| model | full tune: search s (CPU s; signatures measured, programs built) | transfer: search s (CPU s; "
              "from, signatures measured, programs built) | transfer / full: wall (CPU) | after SRC"
              f"{' and an untuned deploy of DST' if deployed else ''}: transfer s / full s, wall (CPU) |")
        print("|---|---|---|---|---|")
    for n in names:
        r = results[n]
        if not md:
            print(json.dumps({"model": n, **{k: v for k, v in r.items() if not k.endswith("_db")}}, default=str))
            continue
        full = f"{r['full_search_s']:.1f} ({r['full_cpu_s']:.1f}; {r['full_measured']}, " \
            f"{r.get('full_programs', '?')}{', budget hit' if r['full_stopped'] else ''})" \
            if "full_search_s" in r else "-"
        tr = f"{r['transfer_search_s']:.1f} ({r['transfer_cpu_s']:.1f}; {r['transfer_from']}, " \
            f"{r['transfer_measured']}, {r.get('transfer_programs', '?')}" \
            f"{', budget hit' if r['transfer_stopped'] else ''})" if "transfer_search_s" in r else "-"
        ratio = f"{r['search_ratio']:.0%} ({r['cpu_ratio']:.0%})" if "search_ratio" in r else "-"
        warm = f"{r['warm_transfer_search_s']:.1f} / {r['warm_full_search_s']:.1f} = {r['warm_ratio']:.0%} " \
            f"({r['warm_transfer_cpu_s']:.1f} / {r['warm_full_cpu_s']:.1f} = {r['warm_cpu_ratio']:.0%})" \
            if "warm_ratio" in r else "-"
        print(f"| {n} | {full} | {tr} | {ratio} | {warm} |")


def _cpu_s() -> float:
    """CPU seconds of this process and of the children it waited for (make, the compilers, the programs)."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def _cpu() -> str:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
