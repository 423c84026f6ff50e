"""Run deployed programs on a board: the runner (outputs checked against onnxruntime) and the bench.

`bench()` records the board's state before and after the runs and hands the raw
numbers to report.make_report; `--compare-ort` times onnxruntime on the board
itself when python3 + onnxruntime are there.
"""

from __future__ import annotations

import hashlib
import io
import json
import shlex
import sys
import tempfile
import uuid
from pathlib import Path

import numpy as np

from edgec.devices import probe
from edgec.devices.deploy import Deployment
from edgec.devices.report import make_report
from edgec.devices.transport import last_line
from edgec.devices.upload import Manifest, upload
from edgec.errors import EdgecError
from edgec.files import write_bytes_atomic, write_text_atomic

ORT_SCRIPT = r"""
import json, sys, time
import numpy as np
import onnxruntime as ort
path, runs, warmup, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
so = ort.SessionOptions(); so.intra_op_num_threads = threads; so.inter_op_num_threads = 1
t0 = time.perf_counter()
s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
init = (time.perf_counter() - t0) * 1e3
kinds = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64,
         "tensor(int32)": np.int32, "tensor(uint8)": np.uint8, "tensor(int8)": np.int8, "tensor(bool)": np.bool_}
rng = np.random.default_rng(0)
feed = {i.name: rng.standard_normal([d if isinstance(d, int) and d > 0 else 1 for d in i.shape]).astype(
        kinds.get(i.type, np.float32)) for i in s.get_inputs()}
times = []
for r in range(warmup + runs):
    t = time.perf_counter(); s.run(None, feed); dt = (time.perf_counter() - t) * 1e3
    if r >= warmup: times.append(dt)
print(json.dumps({"version": ort.__version__, "init_ms": init, "runs_ms": times,
                  "inputs": {k: list(v.shape) for k, v in feed.items()}}))
"""


def _run_dir(dep: Deployment) -> str:
    return f"{dep.transport.workdir()}/runs/{uuid.uuid4().hex[:12]}"


def run_model(dep: Deployment, inputs: list[np.ndarray], timeout: float = 600) -> list[np.ndarray]:
    """Run the deployed runner once on these inputs (graph order); returns its outputs."""
    t = dep.transport
    remote = _run_dir(dep)
    with tempfile.TemporaryDirectory() as tmp:
        names = []
        t.mkdir(remote)
        for i, arr in enumerate(inputs):
            local = Path(tmp) / f"input_{i}.npy"
            np.save(local, np.ascontiguousarray(arr))
            t.put(local, f"{remote}/input_{i}.npy")
            names.append(f"{remote}/input_{i}.npy")
    t.check(dep.command("runner", *names, "--out", remote), "runner", timeout=timeout)
    outs, i = [], 0
    while t.run(["test", "-f", f"{remote}/output_{i}.npy"], timeout=30).ok:
        outs.append(np.load(io.BytesIO(t.read(f"{remote}/output_{i}.npy")), allow_pickle=False))
        i += 1
    t.run(["rm", "-rf", remote], timeout=60)
    return outs


def random_inputs(model: Path, input_shapes: dict | None = None, seed: int = 0) -> list[np.ndarray]:
    from edgec.model import graph_inputs, load_model

    m = load_model(model, input_shapes)
    rng = np.random.default_rng(seed)
    out = []
    for info in graph_inputs(m):
        dt = np.dtype(info.dtype)
        a = rng.standard_normal(info.shape) if dt.kind == "f" else rng.integers(0, 4, info.shape)
        out.append(a.astype(dt))
    return out


def check_outputs(dep: Deployment, input_shapes: dict | None = None, seed: int = 0,
                  timeout: float = 600) -> dict:
    """Run the board's binary and the reference (here) on the same random inputs; compare. The reference is
    `edgec verify`'s: onnxruntime for a float model, the model's exact QDQ arithmetic for an int8 one, whose
    quantized outputs may differ by one quantization step (the requantization contract)."""
    if dep.model is None:
        raise EdgecError("no model to check against: pass the .onnx file (or --model with a build folder)")
    from edgec.codegen.verifier import compare, exact_outputs, is_quantized, onnxruntime_outputs, output_steps
    from edgec.model import graph_inputs, load_model

    model = load_model(dep.model, input_shapes)
    inputs = random_inputs(dep.model, input_shapes, seed)
    got = run_model(dep, inputs, timeout=timeout)
    feeds = {i.name: a for i, a in zip(graph_inputs(model), inputs)}
    quantized = is_quantized(model)
    try:
        static = _static_model(dep)
        if quantized:
            names, want, _ = exact_outputs(static, feeds)
        else:
            names, want = onnxruntime_outputs(static, feeds)
    except EdgecError:
        raise
    except Exception as e:  # onnxruntime raises its own untyped errors
        raise EdgecError(f"onnxruntime cannot run {dep.model.name} for the check ({last_line(str(e))}); "
                         f"deploy with --no-check") from None
    if len(got) != len(want):
        raise EdgecError(f"runner on {dep.device.name} wrote {len(got)} output(s), the model has {len(want)}")
    steps = output_steps(model) if quantized else {}
    worst, worst_lsb, ok = 0.0, 0.0, True
    for name, g, w in zip(names, got, want):
        if g.shape != w.shape:
            raise EdgecError(f"output shape {g.shape} on {dep.device.name} differs from onnxruntime's {w.shape}")
        if g.size:
            err = float(np.max(np.abs(g.astype(np.float64) - w) / (1.0 + np.abs(w))))
            worst = max(worst, err)
            r = compare(name, g, w, 1e-3, 1e-3, steps.get(name), 1.0)
            ok = ok and r["ok"]
            worst_lsb = max(worst_lsb, r.get("max_err_lsb") or 0.0)
    out = {"outputs": len(got), "max_rel_err": worst, "ok": ok,
           "reference": "exact QDQ arithmetic" if quantized else "onnxruntime"}
    if quantized:
        out["max_err_lsb"] = worst_lsb
    return out


def bench(dep: Deployment, *, runs: int = 50, warmup: int = 5, threads: int = 1, compare_ort: bool = False,
          timeout: float = 1800, layers_dep: Deployment | None = None, warmup_ms: float | None = None) -> dict:
    """Run the bench program on the board and return the full report (report.make_report).

    Warm-up is at least `warmup` runs and at least `warmup_ms` ms (None: the bench program's default, 250 ms;
    a fresh process's first runs are slower on a busy machine). The times are wall clock; the report adds the
    process's CPU time per run. With layers_dep (a profiling build of the same model), latency comes from dep
    and only the per-layer times from a shorter run of layers_dep: the per-layer timers would otherwise
    inflate the latency."""
    if runs < 1 or warmup < 0 or threads < 1 or (warmup_ms is not None and not 0 <= warmup_ms < float("inf")):
        raise EdgecError("--runs and --threads must be at least 1, --warmup and --warmup-ms at least 0")
    t = dep.transport
    before = probe.state(t)
    raw = _run_bench(dep, runs, warmup, threads, timeout, warmup_ms)
    after = probe.state(t)
    if layers_dep is not None:
        raw["layers"] = _run_bench(layers_dep, max(10, runs // 5), min(warmup, 5), threads, timeout).get("layers", [])
    ort_res = ort_on_board(dep, runs, warmup, threads, timeout) if compare_ort else None
    return make_report(raw, device=dep.device, before=before, after=after, binary_bytes=dep.binary_bytes,
                       warmup=warmup, ort=ort_res, mode=dep.mode, build_info=dep.build_info)


def _run_bench(dep: Deployment, runs: int, warmup: int, threads: int, timeout: float,
               warmup_ms: float | None = None) -> dict:
    # --warmup-ms only when asked for: a build folder made by an older edgec has no such option
    extra = () if warmup_ms is None else ("--warmup-ms", f"{warmup_ms:g}")
    res = dep.transport.check(dep.command("bench", "--runs", runs, "--warmup", warmup, *extra, "--threads", threads),
                              "bench", timeout=timeout)
    try:
        return json.loads(res.out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise EdgecError(f"bench on {dep.device.name} printed no JSON result: "
                         f"{last_line(res.out) or last_line(res.err) or 'nothing'}") from None


def ort_on_board(dep: Deployment, runs: int, warmup: int, threads: int, timeout: float) -> dict:
    """onnxruntime's times on the board, or {"skipped": reason}."""
    t, d = dep.transport, dep.device
    if dep.model is None:
        return {"skipped": "no .onnx model known for this build"}
    if d.emulated:
        return {"skipped": "emulated device: onnxruntime would run natively on the host, not emulated"}
    # On this machine, the interpreter running edgec has onnxruntime for sure.
    py = sys.executable if d.transport == "local" else "python3"
    if not t.run([py, "-c", "import onnxruntime, numpy"], timeout=60).ok:
        return {"skipped": f"python3 with onnxruntime not found on {d.name} (pip install onnxruntime)"}
    m = Manifest()
    m.add("model.onnx", _static_model(dep), 0o644)
    m.add("ort_bench.py", _script_file(), 0o644)
    up = upload(t, m)
    cmd = f"cd {shlex.quote(up.dir)} && " + shlex.join([py, "ort_bench.py", "model.onnx", str(runs), str(warmup),
                                                         str(threads)])
    res = t.check(cmd, "onnxruntime benchmark", timeout=timeout)
    try:
        return json.loads(res.out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"skipped": f"onnxruntime benchmark printed no result: {last_line(res.err)}"}


def _static_model(dep: Deployment) -> Path:
    """The model with the same pinned input shapes the compiled code uses (onnxruntime would see -1/?)."""
    from edgec.devices.deploy import cache_dir
    from edgec.model import load_model

    data = load_model(dep.model, dep.input_shapes).SerializeToString()
    path = cache_dir() / "ort" / (hashlib.sha256(data).hexdigest()[:16] + ".onnx")
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data)
    return path


def _script_file() -> Path:
    path = Path(tempfile.gettempdir()) / "edgec-ort-bench.py"
    if not path.is_file() or path.read_text() != ORT_SCRIPT:
        write_text_atomic(path, ORT_SCRIPT)
    return path
