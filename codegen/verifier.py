"""verify: compile, build, run the binary (natively or under the target's qemu) and compare every
output with a reference run on the same inputs.

The reference of a float model is onnxruntime with its default graph optimizations. The reference of
a model with int8 content is the model's exact QDQ arithmetic (`exact_outputs`): onnxruntime's
optimized int8 kernels depend on the CPU (on x86 without VNNI its u8 x s8 kernels saturate 16-bit pair
sums), so they are reported beside it, never used as the oracle."""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from edgec.codegen.targets import Target, get_target
from edgec.errors import EdgecError

RUN_TIMEOUT_S = 600
FLOAT_REFERENCE = "onnxruntime (default graph optimizations)"
EXACT_REFERENCE = "exact QDQ arithmetic (onnxruntime, graph optimizations off)"
ORT_INT8 = "onnxruntime int8 (graph optimizations on, this CPU's integer kernels)"


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


def compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float,
            lsb: float | None = None, lsb_tol: float = 0.0) -> dict:
    """Error metrics of one output; ok when every element is within atol + rtol*|want|, or, for an
    int8 output whose quantization step is `lsb`, within lsb_tol steps (the requantization contract)."""
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
    tol = atol + rtol * np.abs(np.nan_to_num(w))
    if lsb:
        tol = np.maximum(tol, lsb_tol * lsb * 1.001)  # 0.1%: the float rounding of q * scale
    r.update(ok=bool(np.all(diff <= tol)), max_abs_err=max_abs, max_rel_err=max_rel, cosine=cos)
    if lsb:
        r["max_err_lsb"] = max_abs / lsb
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
    reference: str = FLOAT_REFERENCE
    # int8 models: onnxruntime's optimized int8 run on this CPU against the same exact reference
    # ({"reference": ..., "outputs": [compare rows]} or {"error": ...}); None for float models
    onnxruntime_int8: dict | None = None

    def to_json(self) -> dict:
        return {"ok": self.ok, "target": self.target, "reference": self.reference, "outputs": self.outputs,
                "onnxruntime_int8": self.onnxruntime_int8, "build_dir": str(self.build_dir)}


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


def onnxruntime_outputs(model_path: Path, feeds: dict, *, optimize: bool = True,
                        model: onnx.ModelProto | None = None) -> tuple[list[str], list[np.ndarray]]:
    """onnxruntime's CPU run, one thread; `model` (a rewritten copy of model_path) is run instead when given."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        src = model.SerializeToString() if model is not None else str(model_path)
        sess = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        return names, sess.run(names, feeds)
    except Exception as e:
        raise EdgecError(f"onnxruntime could not run {Path(model_path).name}: {str(e).splitlines()[0][:300]}") from None


# ---- the int8 oracle -------------------------------------------------------------------------------
# QDQ models: onnxruntime with graph optimizations off runs DequantizeLinear -> float op ->
# QuantizeLinear as written (float32 arithmetic), the same on every CPU. QOperator convs and matrix
# products (QLinearConv, QLinearMatMul, com.microsoft QGemm) would still run on onnxruntime's integer
# GEMM kernels even then, and those depend on the CPU (u8 x s8 pair sums saturate at 16 bits without
# VNNI), so they are rewritten to that same DQ -> float op -> Q form: each float op sees exactly the
# values DequantizeLinear gives, so the result is the op's integer sum, scaled, rounded once (equal to
# an integer QLinearConv but for float rounding at near-ties). The other QOperator ops (QLinearAdd,
# QLinearGlobalAveragePool, QLinearSigmoid, ...) keep onnxruntime's kernels: they evaluate the op's
# formula from the float scale ratios with no 16-bit intermediate, and resolve exact ties (scale ratios
# like 0.5) as the formula does, where a float DQ -> op -> Q chain would round them by float noise.
# This does not reuse codegen/ops/qop.py: the oracle must not share code with what it checks.
_QDQ_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}
# ops onnxruntime runs on its integer GEMM kernels; the first three are rewritten, the rest reported
_QOP_GEMM = {"QLinearConv", "QLinearMatMul", "QGemm", "ConvInteger", "MatMulInteger", "QAttention",
             "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QLinearConvTranspose"}


def is_quantized(model: onnx.ModelProto) -> bool:
    """Does the model hold int8 content (Q/DQ pairs or QOperator ops)?"""
    return any(n.op_type in _QDQ_OPS or n.op_type in _QOP_GEMM or n.op_type.startswith("QLinear")
               for n in model.graph.node)


class _Exact:
    """Rewrites the integer-GEMM QOperator nodes of one model to DequantizeLinear -> float op -> QuantizeLinear."""

    def __init__(self, model: onnx.ModelProto):
        from edgec.model import constant_tensors, opset_version

        self.consts, self.opset, self.inits, self.k = constant_tensors(model), opset_version(model), [], 0

    def _name(self, base: str) -> str:
        self.k += 1
        return f"{base}__exact{self.k}"

    def _scalar(self, name: str) -> bool:
        return name in self.consts and self.consts[name].size == 1

    def deq(self, x: str, s: str, z: str, out: list, axis: int | None = None) -> str | None:
        """The float tensor DequantizeLinear(x, s, z) gives (axis: per-channel axis of x); None if not expressible."""
        c = self.consts
        if x in c and s in c and (not z or z in c):
            # a constant: dequantized here, with the float32 formula DequantizeLinear uses
            v, sc = c[x].astype(np.int64), c[s].astype(np.float32)
            zp = c[z].astype(np.int64) if z else np.zeros(sc.shape, np.int64)
            if sc.size > 1:
                if axis is None:
                    return None
                shape = [1] * v.ndim
                shape[axis] = -1
                sc, zp = sc.reshape(shape), zp.reshape(shape)
            else:
                sc, zp = sc.reshape(()), zp.reshape(())
            name = self._name(x)
            self.inits.append(numpy_helper.from_array(((v - zp).astype(np.float32) * sc).astype(np.float32), name))
            return name
        if s not in c and axis is not None:
            return None  # a per-channel tensor with a computed scale: its axis cannot be told here
        per_axis = s in c and c[s].size > 1
        if per_axis and (axis is None or self.opset < 13):
            return None  # per-axis DequantizeLinear needs opset 13, and the model's opset stays as it is
        name = self._name(x)
        out.append(helper.make_node("DequantizeLinear", [x, s] + ([z] if z else []), [name],
                                    **({"axis": axis} if per_axis else {})))
        return name

    def bias(self, b: str, xs: str, ws: str, out: list) -> str | None:
        """int32 bias at scale x_scale * w_scale (float32 product, zero point 0)."""
        c = self.consts
        if not (b in c and xs in c and ws in c):
            return None
        name = self._name(b)
        sc = (c[xs].astype(np.float32).reshape(-1)[0] * c[ws].astype(np.float32).reshape(-1)).astype(np.float32)
        self.inits.append(numpy_helper.from_array((c[b].astype(np.float32) * sc).astype(np.float32), name))
        return name

    def rewrite(self, n: onnx.NodeProto) -> list[onnx.NodeProto] | None:
        """The replacement nodes of one QOperator node, or None to leave it as it is."""
        ins = list(n.input) + [""] * 10
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        out: list = []
        t = n.output[0]

        def quant(f, ys, yz):
            return out + [helper.make_node("QuantizeLinear", [f, ys] + ([yz] if yz else []), [t])]

        if n.op_type == "QLinearConv" and n.domain in ("", "ai.onnx"):
            x, xs, xz, w, ws, wz, ys, yz, b = ins[:9]
            fx, fw = self.deq(x, xs, xz, out), self.deq(w, ws, wz, out, axis=0)
            fb = self.bias(b, xs, ws, out) if b else ""
            if None in (fx, fw, fb) or not self._scalar(xs):
                return None
            f = self._name(t)
            out.append(helper.make_node("Conv", [fx, fw] + ([fb] if fb else []), [f], name=n.name, **attrs))
            return quant(f, ys, yz)
        if n.op_type == "QLinearMatMul" and n.domain in ("", "ai.onnx"):
            a, as_, az, b, bs, bz, ys, yz = ins[:8]
            rank_b = self.consts[b].ndim if b in self.consts else 2
            fa, fb = self.deq(a, as_, az, out), self.deq(b, bs, bz, out, axis=rank_b - 1)
            if None in (fa, fb) or not self._scalar(as_):
                return None
            f = self._name(t)
            out.append(helper.make_node("MatMul", [fa, fb], [f], name=n.name))
            return quant(f, ys, yz)
        if n.domain != "com.microsoft":
            return None
        if n.op_type == "QGemm":
            a, as_, az, b, bs, bz, c, ys, yz = ins[:9]
            if attrs.get("alpha", 1.0) != 1.0 or attrs.get("transA", 0):
                return None  # alpha's effect on C is not part of the op's documented formula
            fa, fb = self.deq(a, as_, az, out), self.deq(b, bs, bz, out, axis=0 if attrs.get("transB", 0) else 1)
            fc = self.bias(c, as_, bs, out) if c else ""
            if None in (fa, fb, fc) or not self._scalar(as_):
                return None
            f = self._name(t) if ys else t
            out.append(helper.make_node("Gemm", [fa, fb] + ([fc] if fc else []), [f], name=n.name,
                                        transB=int(attrs.get("transB", 0))))
            return quant(f, ys, yz) if ys else out
        return None


def exact_int8_model(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """A copy of `model` whose QLinearConv / QLinearMatMul / QGemm nodes run as DequantizeLinear -> float
    op -> QuantizeLinear, and the op types of integer-GEMM nodes left as they are (no exact form here)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    ex, nodes, left = _Exact(m), [], []
    for n in m.graph.node:
        k = len(ex.inits)
        new = ex.rewrite(n) if n.op_type in _QOP_GEMM else None
        if new is None and n.op_type in _QOP_GEMM:
            left.append(n.op_type)
            del ex.inits[k:]  # constants made for a node left as it is
        nodes.extend(new if new is not None else [n])
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    m.graph.initializer.extend(ex.inits)
    return m, left


def exact_outputs(model_path, feeds: dict) -> tuple[list[str], list[np.ndarray], list[str]]:
    """The int8 oracle: output names, outputs, and the integer-GEMM op types that had no exact form and
    ran on onnxruntime's own kernels (empty when none did)."""
    model_path = Path(model_path)
    m = onnx.load(str(model_path), load_external_data=False)
    if not any(n.op_type in _QOP_GEMM for n in m.graph.node):
        return (*onnxruntime_outputs(model_path, feeds, optimize=False), [])
    from onnx.external_data_helper import load_external_data_for_model
    load_external_data_for_model(m, str(model_path.parent))
    m, left = exact_int8_model(m)
    return (*onnxruntime_outputs(model_path, feeds, optimize=False, model=m), sorted(set(left)))


def _deviation(name, got, want, step) -> dict:
    """compare()'s metrics without a verdict: how far another run is from the reference."""
    r = compare(name, got, want, 0.0, 0.0, step)
    r.pop("ok")
    return r


def output_steps(model: onnx.ModelProto) -> dict[str, float]:
    """Quantization step of each graph output that has one: the scale of the DequantizeLinear making
    it (per tensor), or 1 for an int8/uint8 output."""
    from edgec.model import constant_tensors

    outs = {o.name: o.type.tensor_type.elem_type for o in model.graph.output}
    steps = {k: 1.0 for k, t in outs.items() if t in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)}
    try:
        consts = constant_tensors(model)
    except Exception:  # scales in external data that is not loaded: no steps then
        return steps
    for n in model.graph.node:
        if n.op_type == "DequantizeLinear" and n.output[0] in outs and n.input[1] in consts \
                and consts[n.input[1]].size == 1:
            steps[n.output[0]] = float(consts[n.input[1]].reshape(-1)[0])
    return steps


def verify(model_path, *, target="native", inputs: dict | None = None, input_file=None, input_shapes=None,
           rtol: float = 1e-3, atol: float = 1e-4, lsb: float = 1.0, out_dir=None, threads: int = 1,
           cc: str | None = None, cflags: str | None = None, options=None) -> VerifyResult:
    """Compile model_path for target, run it on inputs (a .npz, a dict, else random) and compare with the
    reference: onnxruntime for a float model, the exact QDQ arithmetic for an int8 one (whose outputs with
    a quantization step are also ok within `lsb` steps; onnxruntime's own int8 result is reported beside).
    options (CompileOptions), when given, carries target and threads too."""
    from edgec.codegen.project import build_project, compile_model

    if options is not None:
        target, threads = options.target, options.threads
    model_path, tgt = Path(model_path), get_target(target)
    if input_file is not None:
        inputs = load_npz(Path(input_file))
    if inputs is None:
        inputs = random_inputs(model_path, input_shapes)
    if input_shapes is None:
        from edgec.model import graph_inputs
        declared = {i.name for i in graph_inputs(onnx.load(str(model_path), load_external_data=False))}
        input_shapes = {k: list(np.shape(v)) for k, v in inputs.items() if k in declared}
    tmp = None
    if out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="edgec-verify-")
        out_dir = Path(tmp.name) / "project"
    try:
        b = compile_model(model_path, out_dir, target=tgt, threads=threads, input_shapes=input_shapes, options=options)
        bins = build_project(out_dir, tgt, cc=cc, cflags=cflags)
        names = b.graph.source["input_names"]
        missing = [n for n in names if n not in inputs]
        if missing:
            raise EdgecError(f"no data for model input {missing[0]!r}; inputs given: {', '.join(inputs) or '(none)'}")
        got = run_binary(bins["runner"], tgt, [inputs[n] for n in names], Path(out_dir) / "verify")
        feeds = {n: inputs[n] for n in names}
        proto = onnx.load(str(model_path), load_external_data=False)
        if not is_quantized(proto):
            onames, want = onnxruntime_outputs(model_path, feeds)
            rows = [compare(n, g, w, rtol, atol) for n, g, w in zip(onames, got, want)]
            return VerifyResult(all(r["ok"] for r in rows) and len(got) == len(want), tgt.name, rows, Path(out_dir))
        onames, want, left = exact_outputs(model_path, feeds)
        steps = output_steps(proto)
        rows = [compare(n, g, w, rtol, atol, steps.get(n), lsb) for n, g, w in zip(onames, got, want)]
        ref = EXACT_REFERENCE + (f"; {', '.join(left)} on onnxruntime's own kernels" if left else "")
        try:
            _, ort8 = onnxruntime_outputs(model_path, feeds)
            side = {"reference": ORT_INT8,
                    "outputs": [_deviation(n, o, w, steps.get(n)) for n, o, w in zip(onames, ort8, want)]}
        except EdgecError as e:
            side = {"reference": ORT_INT8, "error": str(e)}
        return VerifyResult(all(r["ok"] for r in rows) and len(got) == len(want), tgt.name, rows, Path(out_dir),
                            ref, side)
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
