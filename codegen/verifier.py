"""verify: compile, build, run the binary (natively or under the target's qemu) and compare every
output with onnxruntime on the same inputs."""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgec.codegen.targets import Target, get_target
from edgec.errors import EdgecError

RUN_TIMEOUT_S = 600


def run_binary(runner: Path, target: Target, inputs: list[np.ndarray], work: Path,
               threads: int | None = None) -> list[np.ndarray]:
    """Write inputs as .npy, run the runner (qemu for a foreign target), read output_<i>.npy back."""
    work.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, a in enumerate(inputs):
        p = work / f"input_{i}.npy"
        np.save(p, np.ascontiguousarray(a))
        paths.append(str(p))
    out = work / "out"
    out.mkdir(exist_ok=True)
    for old in out.glob("output_*.npy"):
        old.unlink()
    cmd = [*(target.qemu or [] if not target.runs_natively() else []), str(runner), *paths, "--out", str(out)]
    if threads:
        cmd += ["--threads", str(threads)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except FileNotFoundError:
        raise EdgecError(f"cannot run {cmd[0]}: not installed (needed for target {target.name})") from None
    except subprocess.TimeoutExpired:
        raise EdgecError(f"{runner} did not finish within {RUN_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        raise EdgecError(f"the compiled model failed to run: {why[:300]}")
    results, i = [], 0
    while (out / f"output_{i}.npy").exists():
        results.append(np.load(out / f"output_{i}.npy"))
        i += 1
    return results


def compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> dict:
    """Error metrics of one output; ok when every element is within atol + rtol*|want|."""
    r = {"name": name, "shape": list(want.shape), "dtype": str(want.dtype)}
    if got.shape != want.shape:
        got = got.reshape(want.shape) if got.size == want.size else got
    if got.shape != want.shape:
        return {**r, "ok": False, "error": f"shape {list(got.shape)} != {list(want.shape)}",
                "max_abs_err": None, "max_rel_err": None, "cosine": None}
    g, w = got.astype(np.float64), want.astype(np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    diff = np.where(both_nan, 0.0, np.abs(g - w))
    diff = np.where(np.isinf(w) & (g == w), 0.0, diff)
    max_abs = float(np.max(diff)) if diff.size else 0.0
    rel = diff / np.maximum(np.abs(w), 1e-12)
    max_rel = float(np.max(np.where(diff == 0, 0.0, rel))) if diff.size else 0.0
    gf, wf = np.nan_to_num(g).ravel(), np.nan_to_num(w).ravel()
    den = float(np.linalg.norm(gf) * np.linalg.norm(wf))
    cos = float(gf @ wf / den) if den > 0 else (1.0 if np.array_equal(gf, wf) else 0.0)
    ok = bool(np.all(diff <= atol + rtol * np.abs(np.nan_to_num(w))))
    r.update(ok=ok, max_abs_err=max_abs, max_rel_err=max_rel, cosine=cos)
    if want.size > 1 and np.issubdtype(want.dtype, np.floating):
        # per batch item over everything else (class scores may come as [N, C, 1, 1])
        rows = want.shape[0] if want.ndim >= 2 else 1
        gr, wr = g.reshape(rows, -1), w.reshape(rows, -1)
        r["argmax_agreement"] = float(np.mean(np.argmax(gr, axis=1) == np.argmax(wr, axis=1)))
    return r


@dataclass
class VerifyResult:
    ok: bool
    target: str
    outputs: list[dict]
    build_dir: Path

    def to_json(self) -> dict:
        return {"ok": self.ok, "target": self.target, "outputs": self.outputs, "build_dir": str(self.build_dir)}


def random_inputs(model_path: Path, input_shapes=None, seed: int = 0) -> dict[str, np.ndarray]:
    from edgec.model import graph_inputs, load_model

    m = load_model(model_path, input_shapes)
    rng = np.random.default_rng(seed)
    feeds = {}
    for info in graph_inputs(m):
        dt = np.dtype(info.dtype)
        if dt.kind == "f":
            feeds[info.name] = rng.standard_normal(info.shape).astype(dt)
        elif dt == np.bool_:
            feeds[info.name] = rng.integers(0, 2, info.shape).astype(bool)
        else:
            feeds[info.name] = rng.integers(0, 4, info.shape).astype(dt)
    return feeds


def onnxruntime_outputs(model_path: Path, feeds: dict) -> tuple[list[str], list[np.ndarray]]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        return names, sess.run(names, feeds)
    except Exception as e:
        raise EdgecError(f"onnxruntime could not run {model_path.name}: {str(e).splitlines()[0][:300]}") from None


def verify(model_path, *, target="native", inputs: dict | None = None, input_file=None, input_shapes=None,
           rtol: float = 1e-3, atol: float = 1e-4, out_dir=None, threads: int = 1, cc: str | None = None,
           cflags: str | None = None) -> VerifyResult:
    """Compile model_path for target, run it on inputs (a .npz, a dict, else random) and compare with onnxruntime."""
    from edgec.codegen.project import build_project, compile_model

    model_path, tgt = Path(model_path), get_target(target)
    if input_file is not None:
        inputs = load_npz(Path(input_file))
    if inputs is None:
        inputs = random_inputs(model_path, input_shapes)
    if input_shapes is None:
        import onnx
        from edgec.model import graph_inputs
        declared = {i.name for i in graph_inputs(onnx.load(str(model_path), load_external_data=False))}
        input_shapes = {k: list(np.shape(v)) for k, v in inputs.items() if k in declared}
    tmp = None
    if out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="edgec-verify-")
        out_dir = Path(tmp.name) / "project"
    try:
        b = compile_model(model_path, out_dir, target=tgt, threads=threads, input_shapes=input_shapes)
        bins = build_project(out_dir, tgt, cc=cc, cflags=cflags)
        names = b.graph.source["input_names"]
        missing = [n for n in names if n not in inputs]
        if missing:
            raise EdgecError(f"no data for model input {missing[0]!r}; inputs given: {', '.join(inputs) or '(none)'}")
        got = run_binary(bins["runner"], tgt, [inputs[n] for n in names], Path(out_dir) / "verify")
        onames, want = onnxruntime_outputs(model_path, {n: inputs[n] for n in names})
        rows = [compare(n, g, w, rtol, atol) for n, g, w in zip(onames, got, want)]
        return VerifyResult(all(r["ok"] for r in rows) and len(got) == len(want), tgt.name, rows, Path(out_dir))
    finally:
        if tmp is not None:
            tmp.cleanup()


def load_npz(path: Path) -> dict[str, np.ndarray]:
    if not path.exists():
        raise EdgecError(f"input file not found: {path}")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (ValueError, OSError) as e:
        raise EdgecError(f"{path} is not a readable .npz of input arrays: {str(e)[:200]}") from None
