"""Other inference engines on the same CPU, for bench_models.py --engines and bench_depthwise.py (compare(): the
one check-then-time loop both run).

One adapter per engine turns an ONNX model into a runner with a fixed intra-op thread count, converting it into a
work folder where the engine has its own format (ncnn through pnnx, MNN through MNNConvert). A runner returns the
outputs in the ONNX graph's output order and times its own inference step: wall-clock ms per inference, after the
same warm-up runs for every engine. Each engine keeps one warm process for the whole comparison: the others live
in this Python process, edgec's generated bench program runs as one `bench --serve` child (a fresh process per
round was slower in its first runs on a loaded host: docs/benchmarks.md, "A young process"). The third-party
engines come from the `bench` extra (`pip install -e .[bench]`) and are imported only here, lazily: a missing one
is skipped with its reason.

Every engine runs in fp32 (ncnn's fp16/bf16 storage and arithmetic off, OpenVINO's precision hint f32, MNN's
default precision, which is fp32 on x86), so its output can be held against onnxruntime's before it is timed.
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

CONVERT_TIMEOUT_S = 900
WARM_MS = 20.0  # least warm-up time before each engine's share of a round


class EngineError(Exception):
    """This engine cannot run this model (conversion or load failed); the message is one line."""


@dataclass
class Runner:
    outputs: Callable[[], list[np.ndarray]]  # one inference on the prepared feeds, outputs in ONNX order
    step: Callable[[], object]  # one inference, results left where they are (what gets timed)
    timer: Callable[[int, int], list[float]] | None = None  # (runs, warmup) -> ms per run, when the engine times itself
    close: Callable[[], object] | None = None  # ends what prepare() started (edgec's bench process)

    def time(self, runs: int, warmup: int) -> list[float]:
        if self.timer is not None:
            return self.timer(runs, warmup)
        for _ in range(warmup):
            self.step()
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            self.step()
            times.append((time.perf_counter() - t0) * 1e3)
        return times


def _dist_version(*names: str) -> str | None:
    for n in names:
        try:
            return importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _tail(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"


def _run_tool(cmd: list[str], cwd: Path, what: str) -> None:
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=CONVERT_TIMEOUT_S)
    except FileNotFoundError:
        raise EngineError(f"{cmd[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise EngineError(f"{what} did not finish within {CONVERT_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        raise EngineError(f"{what} failed: {_tail(proc.stdout + chr(10) + proc.stderr)}")  # the error is stderr's last line


def _tool(name: str) -> str | None:
    """A console script of the venv this interpreter runs in, else from PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


class Engine:
    name = ""
    package = ""  # what to pip install

    def missing(self) -> str | None:
        """None when usable here, else why not (one line)."""
        raise NotImplementedError

    def version(self) -> str:
        raise NotImplementedError

    def prepare(self, model: Path, feeds: dict[str, np.ndarray], threads: int, work: Path) -> Runner:
        raise NotImplementedError


class OnnxRuntime(Engine):
    name, package = "onnxruntime", "onnxruntime"

    def missing(self):
        return None if _dist_version("onnxruntime") else "not installed (pip install onnxruntime)"

    def version(self):
        return _dist_version("onnxruntime") or "?"

    def prepare(self, model, feeds, threads, work):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3  # old exporters' harmless warnings would bury the results
        sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
        return Runner(outputs=lambda: [np.asarray(o) for o in sess.run(None, feeds)], step=lambda: sess.run(None, feeds))


class Edgec(Engine):
    """The compiled C project: outputs through its runner, times from its own bench program (no Python in the loop)."""
    name, package = "edgec", "edgec"

    def __init__(self, target: str = "native"):
        self.target = target

    def missing(self):
        return None

    def version(self):
        import edgec
        return edgec.__version__

    def prepare(self, model, feeds, threads, work):
        from common import BenchServer

        from edgec.codegen import compile_model
        from edgec.codegen.targets import get_target
        from edgec.codegen.verifier import run_binary
        shapes = {k: list(v.shape) for k, v in feeds.items()}
        build = compile_model(model, work / "edgec", target=self.target, threads=threads, input_shapes=shapes,
                              build=True)
        tgt = get_target(self.target)
        if not tgt.runs_natively():
            raise EngineError(f"target {self.target} does not run on this machine")

        def outputs():
            return run_binary(build.binaries["runner"], tgt, list(feeds.values()), work / "edgec-run", threads=threads)

        server = None

        def timer(runs, warmup):
            nonlocal server
            if server is None:  # started at the first round, not while the others are checked
                server = BenchServer(build.binaries["bench"], threads)
            return server.time(runs, warmup)["runs_ms"]

        def close():
            if server is not None:
                server.close()

        return Runner(outputs=outputs, step=lambda: None, timer=timer, close=close)


class OpenVino(Engine):
    name, package = "openvino", "openvino"

    def missing(self):
        try:
            import openvino  # noqa: F401
        except Exception as e:  # an installed but broken wheel is as unusable as a missing one
            return f"not importable ({type(e).__name__}: {str(e)[:120]}); pip install openvino"
        return None

    def version(self):
        return _dist_version("openvino") or "?"

    def prepare(self, model, feeds, threads, work):
        import openvino as ov
        core = ov.Core()
        m = core.read_model(str(model))
        m.reshape({name: ov.PartialShape(list(a.shape)) for name, a in feeds.items()})
        compiled = core.compile_model(m, "CPU", {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
                                                 "PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"})
        req = compiled.create_infer_request()
        for name, a in feeds.items():
            req.set_tensor(name, ov.Tensor(np.ascontiguousarray(a)))
        n_out = len(compiled.outputs)

        def outputs():
            req.infer()
            return [np.array(req.get_output_tensor(i).data) for i in range(n_out)]

        return Runner(outputs=outputs, step=req.infer)


class Ncnn(Engine):
    """ONNX -> pnnx -> ncnn param/bin (fp32 weights: fp16=0). pnnx names the blobs in0.. and out0.. in graph order."""
    name, package = "ncnn", "ncnn pnnx"

    def missing(self):
        try:
            import ncnn  # noqa: F401
        except Exception as e:
            return f"not importable ({type(e).__name__}: {str(e)[:120]}); pip install ncnn pnnx"
        if _tool("pnnx") is None:
            return "pnnx (the ONNX converter) not installed; pip install pnnx"
        return None

    def version(self):
        return f"{_dist_version('ncnn') or '?'} (pnnx {_dist_version('pnnx') or '?'})"

    def prepare(self, model, feeds, threads, work):
        import ncnn
        d = work / "ncnn"
        d.mkdir(parents=True, exist_ok=True)
        src = d / "model.onnx"
        shutil.copyfile(model, src)
        shapes = ",".join("[" + ",".join(str(int(s)) for s in a.shape) + "]f32" for a in feeds.values())
        _run_tool([_tool("pnnx") or "pnnx", src.name, f"inputshape={shapes}", "fp16=0", "device=cpu"], d,
                  "pnnx conversion")
        param, binf = d / "model.ncnn.param", d / "model.ncnn.bin"
        if not param.exists() or not binf.exists():
            raise EngineError("pnnx wrote no ncnn param/bin")
        net = ncnn.Net()
        net.opt.num_threads = threads
        net.opt.use_fp16_packed = False
        net.opt.use_fp16_storage = False
        net.opt.use_fp16_arithmetic = False
        net.opt.use_bf16_storage = False
        net.opt.use_vulkan_compute = False
        if net.load_param(str(param)) != 0 or net.load_model(str(binf)) != 0:
            raise EngineError("ncnn could not load pnnx's param/bin")
        names = [ln.split()[1] for ln in param.read_text().splitlines()[2:] if ln.split()[:1] == ["Input"]]
        outs = sorted({tok for ln in param.read_text().splitlines()[2:] for tok in ln.split() if tok.startswith("out")
                       and tok[3:].isdigit()}, key=lambda t: int(t[3:]))
        if len(names) != len(feeds):
            raise EngineError(f"pnnx's ncnn graph has {len(names)} inputs, the model {len(feeds)}")
        # ncnn Mats have no batch axis: a batch-1 NCHW feed becomes (C, H, W)
        mats = [ncnn.Mat(np.ascontiguousarray(a[0] if a.ndim >= 2 and a.shape[0] == 1 else a)) for a in feeds.values()]

        def run(fetch: list[str]):
            ex = net.create_extractor()
            for name, m in zip(names, mats):
                ex.input(name, m)
            res = []
            for o in fetch:
                rc, mat = ex.extract(o)
                if rc != 0:
                    raise EngineError(f"ncnn extract {o} failed ({rc})")
                res.append(mat)
            return res

        def outputs():
            return [np.array(m) for m in run(outs)]

        return Runner(outputs=outputs, step=lambda: run(outs))


class Mnn(Engine):
    """ONNX -> MNNConvert -> .mnn, run through the Session API (NCHW input kept, CPU backend)."""
    name, package = "mnn", "MNN"

    def missing(self):
        try:
            import MNN  # noqa: F401
        except Exception as e:
            return f"not importable ({type(e).__name__}: {str(e)[:120]}); pip install MNN"
        try:
            import _tools  # noqa: F401  (MNN's converter extension)
        except Exception as e:
            return f"MNN's converter extension is not importable ({type(e).__name__}); pip install MNN"
        return None

    def version(self):
        return _dist_version("MNN", "mnn") or "?"

    def prepare(self, model, feeds, threads, work):
        import MNN
        d = work / "mnn"
        d.mkdir(parents=True, exist_ok=True)
        out = d / "model.mnn"
        # The converter's own extension, not the `mnnconvert` script: the script's usage logger runs
        # `pip install aliyun-log-python-sdk` into this venv when that is missing, which downgrades protobuf
        # below what onnx needs (and sends the conversion's details over the network).
        _run_tool([sys.executable, "-c", "import sys, _tools; _tools.mnnconvert(sys.argv)",
                   "-f", "ONNX", "--modelFile", str(model), "--MNNModel", str(out),
                   "--bizCode", "edgec", "--keepInputFormat"], d, "MNNConvert")
        if not out.exists():
            raise EngineError("MNNConvert wrote no .mnn file")
        interp = MNN.Interpreter(str(out))
        sess = interp.createSession({"backend": "CPU", "numThread": threads, "precision": "normal"})
        ins = []
        for name, a in feeds.items():
            t = interp.getSessionInput(sess, name)
            interp.resizeTensor(t, tuple(int(s) for s in a.shape))
            ins.append((t, a))
        interp.resizeSession(sess)
        for t, a in ins:
            host = MNN.Tensor(tuple(int(s) for s in a.shape), MNN.Halide_Type_Float,
                              np.ascontiguousarray(a, dtype=np.float32), MNN.Tensor_DimensionType_Caffe)
            t.copyFrom(host)
        out_names = _onnx_output_names(model)

        def outputs():
            interp.runSession(sess)
            res = []
            for name in out_names:
                t = interp.getSessionOutput(sess, name)
                shape = tuple(t.getShape())
                host = MNN.Tensor(shape, MNN.Halide_Type_Float, np.zeros(shape, np.float32),
                                  MNN.Tensor_DimensionType_Caffe)
                t.copyToHostTensor(host)
                res.append(np.array(host.getNumpyData(), dtype=np.float32).reshape(shape))
            return res

        return Runner(outputs=outputs, step=lambda: interp.runSession(sess))


def _onnx_output_names(model: Path) -> list[str]:
    import onnx
    return [o.name for o in onnx.load(str(model), load_external_data=False).graph.output]


ENGINES: dict[str, Callable[..., Engine]] = {
    "edgec": Edgec, "onnxruntime": OnnxRuntime, "openvino": OpenVino, "ncnn": Ncnn, "mnn": Mnn,
}


def check(got: list[np.ndarray], want: list[np.ndarray], tol: float) -> dict:
    """Hold an engine's outputs against onnxruntime's: max abs error over all outputs (ok when within tol x the
    reference's magnitude, at least tol) and top-1 agreement per batch row (a near-tie, where onnxruntime's value at
    the engine's argmax is within that same bound of its maximum, counts as agreement)."""
    if len(got) < len(want):
        return {"ok": False, "why": f"{len(got)} outputs, onnxruntime has {len(want)}", "max_abs": None}
    max_abs, argmax_ok = 0.0, True
    for g, w in zip(got, want):
        g = np.asarray(g, np.float64)
        w = np.asarray(w, np.float64)
        if g.size != w.size:
            return {"ok": False, "why": f"output shape {list(g.shape)} vs onnxruntime {list(w.shape)}", "max_abs": None}
        g = g.reshape(w.shape)
        if not np.all(np.isfinite(g)):
            return {"ok": False, "why": "non-finite values", "max_abs": None}
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        b = tol * max(1.0, scale)
        err = float(np.max(np.abs(g - w))) if w.size else 0.0
        max_abs = max(max_abs, err)
        rows_w = w.reshape(w.shape[0], -1) if w.ndim >= 2 else w.reshape(1, -1)
        rows_g = g.reshape(rows_w.shape)
        for rw, rg in zip(rows_w, rows_g):
            if rw.size and rw[int(np.argmax(rg))] < rw.max() - b:
                argmax_ok = False
        if err > b:
            top1 = "" if argmax_ok else ", top-1 differs"
            return {"ok": False, "why": f"max abs error {err:.3g} > {b:.3g}{top1}", "max_abs": max_abs,
                    "argmax_ok": argmax_ok}
    if not argmax_ok:
        return {"ok": False, "why": "top-1 differs from onnxruntime", "max_abs": max_abs, "argmax_ok": False}
    return {"ok": True, "why": "", "max_abs": max_abs, "argmax_ok": True}


def ratio_words(edgec_ms: float, other: str, other_ms: float) -> str:
    """edgec against one other engine, in words (both readings of the same ratio are easy to misread)."""
    r = edgec_ms / other_ms
    if r <= 1.0:
        return f"edgec is {1 / r:.2f}x faster than {other}"
    return f"edgec takes {r:.2f}x {other}'s time"


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def fastest_other(ms: dict[str, float]) -> tuple[float | None, str]:
    """edgec's ratio to the fastest engine that is not edgec or one of its forced variants ("edgec:..."), and
    that in words; (None, "") when either side is missing."""
    others = {n: v for n, v in ms.items() if not n.startswith("edgec")}
    if "edgec" not in ms or not others:
        return None, ""
    best = min(others, key=others.get)
    return ms["edgec"] / others[best], ratio_words(ms["edgec"], best, others[best])


def paired_ratios(rounds_ms: dict[str, list[float]]) -> list[float]:
    """edgec's time over the fastest other engine's, round by round (each round's own medians, or its fastest runs).
    On a shared host a slow spell that lasts longer than a round slows every engine in it, so the ratio within a
    round moves far less than either engine's time across rounds; one shorter than a round (0.1-1 s on the AVX-512
    host) can cover a single engine's share, which its fastest run shows least."""
    others = [n for n in rounds_ms if not n.startswith("edgec")]
    if "edgec" not in rounds_ms or not others:
        return []
    return [e / min(rounds_ms[n][k] for n in others) for k, e in enumerate(rounds_ms["edgec"])]


def spread(ratios: list[float]) -> str:
    """Per-round ratios as "median x (min-max)", or "" when there are none."""
    from common import median
    return f"{median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else ""


def _busy_cpus(window: float) -> float | None:
    """CPUs busy on the whole machine over `window` s (/proc/stat), or None where it cannot be read."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + (v[4] if len(v) > 4 else 0)  # total, idle + iowait (jiffies)
    try:
        t0, i0 = sample()
        time.sleep(window)
        t1, i1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    return (os.cpu_count() or 1) * (1 - (i1 - i0) / max(t1 - t0, 1))


def settle(pause: float, cap: float = 1.0, window: float = 0.02) -> None:
    """Sleep `pause` s, then until the machine's CPUs are idle (at most `cap` s more): an engine's workers spin on
    after its runs (OpenMP, TBB and MNN pools; some for longer than 50 ms) and take a core from whichever engine
    runs next. Seen: edgec's 2-thread 576ch 14x14 stride-2 g=8 layer timed at 0.363 ms after a 50 ms pause,
    0.219 ms after 300 ms, 0.216 ms alone (Zen 4, 2 vCPUs)."""
    time.sleep(pause)
    end = time.monotonic() + cap
    while time.monotonic() < end:
        busy = _busy_cpus(window)
        if busy is None or busy < 0.25:
            return


def time_interleaved(runners: dict, runs: int, rounds: int, warmup: int,
                     pause: float = 0.05) -> tuple[dict, dict, dict]:
    """Time prepared runners {name: Runner} in `rounds` interleaved rounds (each in turn, the order rotating, so
    drift on a shared host hits all alike), `runs` runs in all per runner; closes them. Returns ({name: every run's
    ms}, {name: each round's median ms}, {name: each round's fastest run})."""
    from common import median

    per_round = max(1, -(-runs // rounds))
    times = {n: [] for n in runners}
    rounds_ms = {n: [] for n in runners}
    rounds_best = {n: [] for n in runners}
    order = list(runners)
    try:
        # every share warms up for at least WARM_MS as well as `warmup` runs: a model of tens of microseconds
        # is otherwise timed in the cache state the engine before it left behind
        warm = {n: max(warmup, math.ceil(WARM_MS / max(median(runners[n].time(3, 1)), 1e-3))) for n in order}
        for k in range(rounds):
            for n in order[k % len(order):] + order[:k % len(order)] if order else []:
                got = runners[n].time(per_round, warm[n])
                times[n] += got
                rounds_ms[n].append(median(got))
                rounds_best[n].append(min(got))
                settle(pause)
    finally:
        for r in runners.values():
            if r.close is not None:
                r.close()
    return times, rounds_ms, rounds_best


def compare(label: str, path: Path, feeds: dict[str, np.ndarray], engines: list, threads_list: list[int], runs: int,
            rounds: int, warmup: int, tol: float, work: Path, out=print, announce: bool = False,
            pause: float = 0.05) -> list[dict]:
    """One model on every engine, per thread count: each engine's output held against onnxruntime's (one that
    cannot run or does not match gets one line and is not timed), then the good ones timed in `rounds` interleaved
    rounds (each engine in turn, the order rotating, so drift on a shared host hits all alike). Returns per thread
    count {"threads", "ms": median ms per engine, "rounds_ms": each round's median per engine, "rounds_best": each
    round's fastest run per engine, "status": why an engine was not timed}. `announce` also prints
    each match at the first thread count; `pause` s between engines lets the previous one's spinning workers idle."""
    from common import median

    from edgec.errors import EdgecError
    ref = OnnxRuntime().prepare(path, feeds, 1, work).outputs()
    rows = []
    for t in threads_list:
        runners, status = {}, {}
        for e in engines:
            try:
                r = e.prepare(path, feeds, t, work / f"{path.stem}-{e.name}-t{t}")
                c = check(r.outputs(), ref, tol)
            except (EngineError, EdgecError) as ex:
                status[e.name] = "cannot run"
                out(f"  {label}, {e.name}: cannot run: {one_line(ex)}")
                continue
            except Exception as ex:  # a third-party engine's own exception types: one line, the run goes on
                status[e.name] = "cannot run"
                out(f"  {label}, {e.name}: cannot run: {type(ex).__name__}: {one_line(ex)}")
                continue
            if not c["ok"]:
                status[e.name] = "wrong output"
                out(f"  {label}, {e.name}, {t} thread(s): wrong output vs onnxruntime ({c['why']}); not timed")
                continue
            if announce and t == threads_list[0]:
                out(f"  {label}, {e.name}: matches onnxruntime (max abs error {c['max_abs']:.2g}, top-1 agrees)")
            runners[e.name] = r
        times, rounds_ms, rounds_best = time_interleaved(runners, runs, rounds, warmup, pause)
        rows.append({"threads": t, "ms": {n: median(v) for n, v in times.items()}, "rounds_ms": rounds_ms,
                     "rounds_best": rounds_best, "status": status})
    return rows

