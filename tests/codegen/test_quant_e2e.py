"""End to end int8: QDQ models from onnxruntime.quantization.quantize_static (per-channel int8
weights; uint8 and int8 activations) compiled into integer kernels, run natively and under qemu,
against the model's exact QDQ arithmetic (edgec verify's int8 oracle: onnxruntime with graph
optimizations off, QOperator convs/matmuls rewritten to DequantizeLinear -> float op -> QuantizeLinear).
onnxruntime's optimized int8 run is not the oracle: its kernels differ between CPUs (on x86 without
VNNI its u8 x s8 pair sums saturate, 60 LSB off on the digits CNN)."""

from __future__ import annotations

import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

from edgec.codegen.project import compile_model
from edgec.codegen.verifier import EXACT_REFERENCE, ORT_INT8, exact_outputs, onnxruntime_outputs, verify
from edgec.codegen.targets import get_target


class _Reader(CalibrationDataReader):
    def __init__(self, name, batches):
        self.it = iter([{name: b} for b in batches])

    def get_next(self):
        return next(self.it, None)


def quantize(src, dst, name, batches, acts=QuantType.QUInt8, fmt=QuantFormat.QDQ):
    quantize_static(str(src), str(dst), _Reader(name, batches), quant_format=fmt, per_channel=True,
                    activation_type=acts, weight_type=QuantType.QInt8)
    return dst


def exact(model, feeds):
    """The int8 oracle's first output; every integer GEMM op had an exact form."""
    _, outs, left = exact_outputs(model, feeds)
    assert left == [], left
    return outs[0]


def _out_scale(model) -> float:
    m = onnx.load(str(model))
    dq = [n for n in m.graph.node if n.op_type == "DequantizeLinear" and n.output[0] == m.graph.output[0].name][0]
    return float(numpy_helper.to_array([i for i in m.graph.initializer if i.name == dq.input[1]][0]))


@pytest.fixture(scope="module")
def digits_int8(digits_cnn, tmp_path_factory):
    x = np.load(digits_cnn.data)["input"]
    d = tmp_path_factory.mktemp("q")
    return {acts: quantize(digits_cnn.model, d / f"digits_{acts}.onnx", "input", [x[i:i + 1] for i in range(0, 64, 2)],
                           QuantType.QUInt8 if acts == "u8" else QuantType.QInt8) for acts in ("u8", "s8")}


def run_binary(runner, target, inputs, work):
    """Run a generated runner (through the target's qemu when foreign) and read its outputs."""
    work.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, a in enumerate(inputs):
        paths.append(str(work / f"input_{i}.npy"))
        np.save(paths[-1], a)
    cmd = [*(target.qemu or [] if not target.runs_natively() else []), str(runner), *paths, "--out", str(work)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return [np.load(work / "output_0.npy")]


def _compile_run(model, target, x, tmp_path, name="input"):
    b = compile_model(model, tmp_path / "out", target=target, build=True, input_shapes={name: list(x.shape)})
    y = run_binary(b.binaries["runner"], get_target(target), [x], tmp_path / "work")[0]
    return b, y


@pytest.mark.parametrize("acts,target", [("u8", "native"), ("s8", "native"), ("s8", "aarch64-neon"),
                                         ("u8", "aarch64-v82"), ("s8", "armv7-neon")])
def test_digits_int8_matches_exact_qdq(digits_int8, digits_cnn, acts, target, tmp_path):
    data = np.load(digits_cnn.data)
    x, labels = data["input"], data["labels"]
    if get_target(target).qemu:
        x, labels = x[:64], labels[:64]  # emulation: a subset is enough for correctness
    b, y = _compile_run(digits_int8[acts], target, x, tmp_path)
    ref = exact(digits_int8[acts], {"input": x})
    algos = [l["algo"] for l in b.layers]
    assert {"q8-gemm", "q8-dwconv", "q8-add", "q8-maxpool", "q8-gavgpool", "q8-lut"} <= set(algos), algos
    # one int8 region: the standalone BatchNorm is a per-channel table, not a float island
    assert algos.count("q8-quantize") == 1 and algos.count("q8-dequantize") == 1, algos
    assert np.abs(y - ref).max() <= _out_scale(digits_int8[acts]) * 1.001  # within 1 LSB of the int8 logits
    acc, acc_ref = (y.argmax(1) == labels).mean(), (ref.argmax(1) == labels).mean()
    assert abs(acc - acc_ref) <= 1 / len(labels) + 1e-9
    if target == "native":
        assert acc >= digits_cnn.accuracy - 0.02  # int8 keeps the fp32 model's accuracy


def test_int8_mlp_matmul_and_residual_relu(tmp_path):
    """MatMul (QLinearMatMul path, several rows) + Add + Relu quantized by onnxruntime."""
    rng = np.random.default_rng(0)
    w1, w2 = rng.normal(0, 0.3, (24, 40)).astype(np.float32), rng.normal(0, 0.3, (40, 40)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["h2"]), helper.make_node("Add", ["h2", "r"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 24])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 40])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    src = tmp_path / "mlp.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), src)
    x = rng.normal(0, 1, (5, 24)).astype(np.float32)
    q = quantize(src, tmp_path / "mlp_q.onnx", "x", [rng.normal(0, 1, (5, 24)).astype(np.float32) for _ in range(8)])
    b, y = _compile_run(q, "native", x, tmp_path, name="x")
    assert [l["op"] for l in b.layers].count("QLinearMatMul") == 2
    assert np.abs(y - exact(q, {"x": x})).max() <= _out_scale(q) * 1.001


def _channelwise_model(kind: str, rng):
    """A float op with per-channel constants between two quantized layers (onnxruntime leaves it in float
    between a DequantizeLinear and a QuantizeLinear)."""
    C = 6
    if kind == "bn1d":  # rank 2: MatMul -> BatchNormalization -> Relu -> MatMul
        shape = [5, 24]
        inits = {"w1": rng.normal(0, 0.3, (24, C)), "w2": rng.normal(0, 0.3, (C, 7))}
        first, last = helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("MatMul", ["a", "w2"], ["y"])
        out = [5, 7]
    else:
        shape = [2, 3, 7, 9]
        inits = {"w1": rng.normal(0, 0.3, (C, 3, 3, 3)), "w2": rng.normal(0, 0.3, (4, C, 1, 1))}
        first = helper.make_node("Conv", ["x", "w1"], ["h"], pads=[1, 1, 1, 1])
        last = helper.make_node("Conv", ["a", "w2"], ["y"])
        out = [2, 4, 7, 9]
    if kind == "sigmoid":  # per-tensor: one table of 256 bytes
        mid = [helper.make_node("Sigmoid", ["h"], ["a"])]
    elif kind in ("bn", "bn1d"):
        inits.update(g=rng.uniform(0.5, 2, C), b=rng.normal(0, 0.5, C), m=rng.normal(0, 0.5, C), v=rng.uniform(0.2, 2, C))
        mid = [helper.make_node("BatchNormalization", ["h", "g", "b", "m", "v"], ["n"]),
               helper.make_node("Relu", ["n"], ["a"])]
    else:  # Mul by [1, C, 1, 1], Add of [C, 1, 1]
        inits.update(s=rng.uniform(-2, 2, (1, C, 1, 1)), t=rng.normal(0, 0.5, (C, 1, 1)))
        mid = [helper.make_node("Mul", ["h", "s"], ["n"]), helper.make_node("Add", ["n", "t"], ["a"])]
    g = helper.make_graph([first, *mid, last], kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
                          [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), shape


@pytest.mark.parametrize("acts", ["u8", "s8"])
@pytest.mark.parametrize("kind", ["bn", "bn1d", "mul-add", "sigmoid"])
def test_per_channel_float_island_becomes_tables(kind, acts, tmp_path):
    """Per-channel float ops between quantized layers become one table per channel; a per-tensor one
    (Sigmoid) one table, in the u8 domain for int8 activations too, applied by the conv before it as it stores."""
    rng = np.random.default_rng(5)
    model, shape = _channelwise_model(kind, rng)
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    q = quantize(src, tmp_path / "q.onnx", "x", [rng.normal(0, 1, shape).astype(np.float32) for _ in range(8)],
                 QuantType.QUInt8 if acts == "u8" else QuantType.QInt8)
    x = rng.normal(0, 1, shape).astype(np.float32)
    b, y = _compile_run(q, "native", x, tmp_path, name="x")
    algos = [l["algo"] for l in b.layers]
    fused = [l.get("details", {}).get("fused_lut") for l in b.layers if l.get("details", {}).get("fused_lut")]
    assert algos.count("q8-dequantize") == 1 and algos.count("q8-quantize") == 1, algos
    assert (len(fused), algos.count("q8-lut")) == ((1, 0) if kind == "sigmoid" else (0, 1)), (algos, fused)
    assert np.abs(y - exact(q, {"x": x})).max() <= _out_scale(q) * 1.001


def _fire_model(path, shape, e: int, out: int, std: float, rng):
    """SqueezeNet's fire module in float: 1x1 and 3x3 expand convs (e channels each, ReLU), their Concat, a 3x3
    stride-2 MaxPool, a 1x1 conv to `out` channels; saved to path."""
    C = shape[1]
    w1, w2, w3 = (rng.normal(0, std, s).astype(np.float32) for s in ((e, C, 1, 1), (e, C, 3, 3), (out, 2 * e, 1, 1)))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]), helper.make_node("Relu", ["a"], ["ar"]),
             helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1] * 4), helper.make_node("Relu", ["b"], ["br"]),
             helper.make_node("Concat", ["ar", "br"], ["c"], axis=1),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[3, 3], strides=[2, 2]),
             helper.make_node("Conv", ["p", "w3"], ["y"])]
    g = helper.make_graph(nodes, "fire", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in (("w1", w1), ("w2", w2), ("w3", w3))])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return path


@pytest.mark.parametrize("acts", ["u8", "s8"])
def test_concat_of_requantized_inputs_runs_on_bytes(acts, tmp_path):
    """SqueezeNet's fire module: Concat of two convs with their own output scales, quantized again. The float
    island (DequantizeLinear x2 -> Concat -> QuantizeLinear) becomes a Concat of the int8 tensors, one of them
    through a requantization table (the other already has the output's scale), which its conv applies as it stores:
    no float pass, no layer for the table, and the output equals the exact QDQ result (a 3x3 MaxPool after it runs
    on the bytes too)."""
    rng = np.random.default_rng(8)
    shape = (1, 8, 13, 13)
    src = _fire_model(tmp_path / "m.onnx", shape, 16, 4, 0.4, rng)
    q = quantize(src, tmp_path / "q.onnx", "x", [rng.normal(0, 1, shape).astype(np.float32) for _ in range(8)],
                 QuantType.QUInt8 if acts == "u8" else QuantType.QInt8)
    x = rng.normal(0, 1, shape).astype(np.float32)
    b, y = _compile_run(q, "native", x, tmp_path, name="x")
    algos = [l["algo"] for l in b.layers]
    assert algos.count("q8-quantize") == 1 and algos.count("q8-dequantize") == 1, algos  # the model's edges only
    fused = [l.get("details", {}).get("fused_lut") for l in b.layers if l.get("details", {}).get("fused_lut")]
    assert algos.count("q8-lut") == 0 and len(fused) == 1 and "q8-maxpool" in algos, (algos, fused)
    assert np.abs(y - exact(q, {"x": x})).max() <= _out_scale(q) * 1.001


def test_int8_split_ops_same_bytes_at_every_thread_count(tmp_path):
    """With every layer split (learned hand-off 0): the int8 conv's packing (padding, im2col, 1x1 interleave),
    the table lookups, the byte MaxPool and the model's QuantizeLinear / DequantizeLinear edges over thread shares
    give the 1-thread bytes at 2 and 3 threads."""
    from edgec.codegen import build_project
    from edgec.codegen.options import CompileOptions
    from edgec.codegen.verifier import run_binary as run_threads

    rng = np.random.default_rng(10)
    shape = (1, 48, 40, 40)  # >= 64 KB packed for the 1x1 and the 3x3: their packing is split
    src = _fire_model(tmp_path / "m.onnx", shape, 32, 8, 0.2, rng)
    q = quantize(src, tmp_path / "q.onnx", "x", [rng.normal(0, 1, shape).astype(np.float32) for _ in range(4)])
    x = rng.normal(0, 1, shape).astype(np.float32)
    opts = CompileOptions(target="native", threads=3, learned=(("pool-job-us", 0.0),))
    b = compile_model(q, tmp_path / "out", options=opts, input_shapes={"x": list(shape)})
    code = (b.dir / "model.c").read_text()
    assert "ec_b" in code and "q8_quantize(e_ - b_" in code and "q8_dequantize(e_ - b_" in code  # bodies split
    runner = build_project(b.dir, "native", jobs=2)["runner"]
    got = {t: run_threads(runner, b.target, [x], tmp_path / f"t{t}", threads=t)[0] for t in (1, 2, 3)}
    assert np.array_equal(got[2], got[1]) and np.array_equal(got[3], got[1])
    assert np.abs(got[1] - exact(q, {"x": x})).max() <= _out_scale(q) * 1.001


def test_residual_sum_runs_as_the_float_add(tmp_path):
    """Older ResNets add their residuals with a two-input Sum: it runs as the int8 Add (q8_add_f32, the float
    arithmetic of DequantizeLinear -> Sum -> Relu -> QuantizeLinear), not as a float island."""
    rng = np.random.default_rng(9)
    shape = (1, 16, 9, 9)
    w1, w2, w3 = (rng.normal(0, 0.3, s).astype(np.float32) for s in ((16, 16, 1, 1), (16, 16, 3, 3), (8, 16, 1, 1)))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]), helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1] * 4),
             helper.make_node("Sum", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("Conv", ["r", "w3"], ["y"])]
    g = helper.make_graph(nodes, "res", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in (("w1", w1), ("w2", w2), ("w3", w3))])
    src = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), src)
    q = quantize(src, tmp_path / "q.onnx", "x", [rng.normal(0, 1, shape).astype(np.float32) for _ in range(8)])
    x = rng.normal(0, 1, shape).astype(np.float32)
    b, y = _compile_run(q, "native", x, tmp_path, name="x")
    adds = [l for l in b.layers if l["algo"] == "q8-add"]
    assert len(adds) == 1 and adds[0]["details"]["kernel"] == "q8_add_f32", [l["algo"] for l in b.layers]
    assert [l["algo"] for l in b.layers].count("q8-dequantize") == 1
    assert np.abs(y - exact(q, {"x": x})).max() <= _out_scale(q) * 1.001


@pytest.mark.parametrize("div,pool", [(6.0, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
                                      (0.7, dict(kernel_shape=[2, 2], strides=[2, 2]))])
def test_float_maxpool_after_rising_chain_runs_on_bytes(div, pool, tmp_path):
    """DequantizeLinear -> Div by a positive constant -> MaxPool -> QuantizeLinear (ppocr cls's last
    HardSwish before its pool): the pool runs on the bytes, the chain as a table after it; exactly the
    float result (max commutes with a non-decreasing function)."""
    rng = np.random.default_rng(9)
    shape = [1, 5, 9, 11]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s1", "z1"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s1", "z1"], ["xf"]),
             helper.make_node("Div", ["xf", "c"], ["d"]),
             helper.make_node("MaxPool", ["d"], ["p"], **pool),
             helper.make_node("QuantizeLinear", ["p", "s2", "z2"], ["pq"]),
             helper.make_node("DequantizeLinear", ["pq", "s2", "z2"], ["y"])]
    inits = [numpy_helper.from_array(np.float32(0.05), "s1"), numpy_helper.from_array(np.uint8(77), "z1"),
             numpy_helper.from_array(np.float32(div), "c"), numpy_helper.from_array(np.float32(0.013), "s2"),
             numpy_helper.from_array(np.uint8(20), "z2")]
    g = helper.make_graph(nodes, "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8))
    onnx.save(m, tmp_path / "m.onnx")
    x = rng.normal(0, 3, shape).astype(np.float32)
    b, y = _compile_run(tmp_path / "m.onnx", "native", x, tmp_path, name="x")
    algos = [l["algo"] for l in b.layers]
    assert "q8-maxpool" in algos and "q8-lut" in algos and not any("maxpool2d" in a for a in algos), algos
    assert np.array_equal(y, exact(tmp_path / "m.onnx", {"x": x}))


def _ppocr_int8(ppocr_cls, d):
    """ppocr cls: BN folded (onnxruntime pre-processing), opset 13 (per-axis Q/DQ), then QDQ int8."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    quant_pre_process(str(ppocr_cls), str(d / "pre.onnx"), skip_symbolic_shape=True)
    onnx.save(onnx.version_converter.convert_version(onnx.load(str(d / "pre.onnx")), 13), str(d / "pre13.onnx"))
    rng = np.random.default_rng(0)
    return quantize(d / "pre13.onnx", d / "ppocr_q.onnx", "x",
                    [rng.uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32) for _ in range(4)])


@pytest.mark.parametrize("target", ["native", "aarch64-neon"])
def test_ppocr_int8_matches_exact_qdq(ppocr_cls, target, tmp_path):
    q = _ppocr_int8(ppocr_cls, tmp_path)
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)
    b, y = _compile_run(q, target, x, tmp_path, name="x")
    ref = exact(q, {"x": x})
    algos = [l["algo"] for l in b.layers]
    tables = algos.count("q8-lut") + sum(1 for l in b.layers if l.get("details", {}).get("fused_lut"))
    assert tables >= 9 and algos.count("q8-dwconv") == 11  # HardSwish/SE islands as tables, most fused into convs
    assert algos.count("q8-quantize") + algos.count("q8-dequantize") <= 6
    assert np.abs(y - ref).max() <= 1.001 / 255 and (y.argmax(1) == ref.argmax(1)).all()


def test_digits_qoperator_format(digits_cnn, tmp_path):
    """QOperator output (QLinearConv + com.microsoft QLinearAdd / QLinearGlobalAveragePool / QGemm)."""
    data = np.load(digits_cnn.data)
    x = data["input"]
    q = quantize(digits_cnn.model, tmp_path / "qop.onnx", "input", [x[i:i + 1] for i in range(0, 64, 2)],
                 fmt=QuantFormat.QOperator)
    assert any(n.domain == "com.microsoft" for n in onnx.load(str(q)).graph.node)
    b, y = _compile_run(q, "native", x, tmp_path)
    ref = exact(q, {"input": x})
    assert {"q8-gemm", "q8-dwconv", "q8-add", "q8-gavgpool"} <= {l["algo"] for l in b.layers}
    assert np.abs(y - ref).max() <= _out_scale(q) * 1.001
    assert (y.argmax(1) == ref.argmax(1)).mean() >= 0.995


def test_verify_names_the_exact_reference_and_reports_onnxruntime_int8(digits_int8, digits_cnn, tmp_path):
    """verify on an int8 model: checked against the exact QDQ arithmetic (the compile is within 1 LSB of
    it), with onnxruntime's optimized int8 run on this CPU measured against the same reference beside it."""
    q = digits_int8["s8"]
    r = verify(q, input_file=digits_cnn.data, out_dir=tmp_path / "p")
    assert r.ok and r.reference == EXACT_REFERENCE, r.to_json()
    out, step = r.outputs[0], _out_scale(q)
    assert out["max_err_lsb"] <= 1.001 and abs(out["max_abs_err"] / step - out["max_err_lsb"]) < 1e-6
    x = np.load(digits_cnn.data)["input"]
    want, (ort8,) = exact(q, {"input": x}), onnxruntime_outputs(q, {"input": x})[1]
    side = r.onnxruntime_int8
    assert side["reference"] == ORT_INT8 and side["outputs"][0]["name"] == "logits"
    dev = side["outputs"][0]
    assert dev["max_err_lsb"] == pytest.approx(np.abs(ort8 - want).max() / step, rel=1e-6)
    assert dev["argmax_agreement"] == pytest.approx(np.mean(ort8.argmax(1) == want.argmax(1)))
    doc = r.to_json()
    assert doc["reference"] == EXACT_REFERENCE and doc["onnxruntime_int8"]["outputs"][0]["max_err_lsb"] >= 0
    # a float model keeps onnxruntime's default run as its reference, with nothing beside it
    f = verify(digits_cnn.model, input_file=digits_cnn.data, out_dir=tmp_path / "f")
    assert f.ok and f.reference != EXACT_REFERENCE and f.onnxruntime_int8 is None


def test_verify_cli_prints_both_references(digits_int8, digits_cnn, capsys):
    import json

    from edgec.cli.main import main

    assert main(["verify", str(digits_int8["u8"]), "--input", str(digits_cnn.data)]) == 0
    text = " ".join(capsys.readouterr().out.split())  # lines wrap at the terminal width
    assert f"reference: {EXACT_REFERENCE}" in text and f"{ORT_INT8} vs the same reference" in text
    assert "LSB" in text and text.endswith("match")
    assert main(["verify", str(digits_int8["u8"]), "--input", str(digits_cnn.data), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["reference"] == EXACT_REFERENCE
    assert set(doc["onnxruntime_int8"]["outputs"][0]) >= {"max_abs_err", "max_err_lsb", "argmax_agreement"}


def test_exact_qlinearmatmul_per_column_and_unrewritten_ops_named():
    """QLinearMatMul (per-column int8 weights, uint8 activations) in the oracle equals its integer
    definition; an integer op without an exact form (MatMulInteger) is reported, not hidden."""
    from edgec.codegen.verifier import exact_int8_model

    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (6, 40)).astype(np.uint8)
    w = rng.integers(-128, 128, (40, 9)).astype(np.int8)
    ws = rng.uniform(0.002, 0.02, 9).astype(np.float32)
    inits = {"as": np.float32(0.03), "az": np.uint8(121), "w": w, "ws": ws, "wz": np.zeros(9, np.int8),
             "ys": np.float32(0.5), "yz": np.uint8(100)}
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "w", "ws", "wz", "ys", "yz"], ["y"])
    g = helper.make_graph([node, helper.make_node("MatMulInteger", ["a", "w2"], ["z"])], "qmm",
                          [helper.make_tensor_value_info("a", TensorProto.UINT8, [6, 40])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [6, 9]),
                           helper.make_tensor_value_info("z", TensorProto.INT32, [6, 3])],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()]
                          + [numpy_helper.from_array(rng.integers(0, 255, (40, 3)).astype(np.uint8), "w2")])
    m, left = exact_int8_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8))
    assert left == ["MatMulInteger"] and "QLinearMatMul" not in {n.op_type for n in m.graph.node}
    got = onnxruntime_outputs("qmm.onnx", {"a": a}, optimize=False, model=m)[1][0]
    acc = (a.astype(np.int64) - 121) @ w.astype(np.int64)
    scale = (np.float32(0.03) * ws).astype(np.float64) / 0.5
    want = np.clip(np.rint(acc * scale) + 100, 0, 255)
    d = np.abs(got.astype(np.int64) - want)
    assert d.max() <= 1 and np.mean(d == 0) > 0.99


def _ppocr_7bit(ppocr_cls, tmp_path):
    """ppocr cls quantized with 7-bit weights (reduce_range), per-channel QDQ, calibrated on 4 random inputs."""
    _ppocr_int8(ppocr_cls, tmp_path)  # writes pre13.onnx
    rng = np.random.default_rng(0)
    q = tmp_path / "ppocr_q7.onnx"
    quantize_static(str(tmp_path / "pre13.onnx"), str(q),
                    _Reader("x", [rng.uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32) for _ in range(4)]),
                    quant_format=QuantFormat.QDQ, per_channel=True, reduce_range=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return q


def test_ppocr_7bit_runs_maddubs_depthwise_exactly(ppocr_cls, tmp_path):
    """ppocr cls with 7-bit weights for x86_64-avx2: every depthwise layer (5x5 windows over 2-3 row maps,
    where the kernel skips kernel rows in the padding) runs the vpmaddubsw kernel with the following
    HardSwish table fused (the variant whose output rows share taps: every consecutive 7-bit tap pair fits),
    and the model's output is bit-identical to the build on the scalar reference kernels."""
    if not get_target("x86_64-avx2").runs_natively():
        pytest.skip("this CPU lacks AVX2")
    q = _ppocr_7bit(ppocr_cls, tmp_path)
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)
    b, y = _compile_run(q, "x86_64-avx2", x, tmp_path / "avx2", name="x")
    kernels = [l["details"]["kernel"] for l in b.layers if l["algo"] == "q8-dwconv"]
    assert kernels == ["q8_dwconv__avx2_maddubs_shared"] * 11, kernels
    # the HardSwish tables after the 8 depthwise convs without a Relu run inside the depthwise driver
    fused = [l.get("details", {}).get("fused_lut") for l in b.layers if l["algo"] == "q8-dwconv"]
    assert fused.count("q8_lut__avx2") == 8, fused
    muls = [l["details"].get("kernel") for l in b.layers if l["algo"] == "q8-mul"]  # SE gates in fixed point
    assert muls == ["q8_mul_outer_fx"] * 9, muls
    _, y_ref = _compile_run(q, "generic", x, tmp_path / "generic", name="x")  # the scalar reference kernels
    assert np.array_equal(y, y_ref)
    # this input has Conv near-ties in the oracle's float32 sums (see _conv_near_ties below): edgec's exact
    # integer sum rounds them the other way, and SE gates amplify the 1-LSB flips to 3 LSB of the softmax
    ref = exact(q, {"x": x})
    assert np.abs(y - ref).max() <= 3.001 / 255 and (y.argmax(1) == ref.argmax(1)).all()


def _int_conv(x, w, b, att) -> np.ndarray:
    """Integer NCHW convolution in int64 (x already minus its zero point; pads are real zeros)."""
    g, (sh, sw), (dh, dw) = att.get("group", 1), att.get("strides", [1, 1]), att.get("dilations", [1, 1])
    p = att.get("pads", [0, 0, 0, 0])
    x = np.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    k, cg, kh, kw = w.shape
    win = np.lib.stride_tricks.sliding_window_view(x, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))
    win = win[:, :, ::sh, ::sw, ::dh, ::dw]                       # n, c, oh, ow, kh, kw
    n, _, oh, ow = win.shape[:4]
    win = win.reshape(n, g, cg, oh, ow, kh, kw)
    wg = w.reshape(g, k // g, cg, kh, kw)
    y = np.einsum("ngchwij,gocij->ngohw", win, wg, optimize=True).reshape(n, k, oh, ow)
    return y + b.reshape(1, -1, 1, 1)


def _conv_near_ties(model: onnx.ModelProto, feeds: dict) -> int:
    """Conv outputs where the exact QDQ oracle's byte is not the exact integer sum requantized with the
    compiled multiplier (the float32 scale x_s * w_s / y_s, rounded half up). Each one must be a near-tie:
    the exact value lies within the float32 error bound of the oracle's float Conv of a .5 tie (the
    (K + 3) * 2^-24 * sum |terms| bound of a float sum, plus the final division's rounding)."""
    from edgec.codegen.verifier import onnxruntime_outputs

    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    prod = {o: n for n in model.graph.node for o in n.output}
    convs = []
    for n in (n for n in model.graph.node if n.op_type == "Conv"):
        q = [c for c in model.graph.node if c.op_type == "QuantizeLinear" and c.input[0] == n.output[0]][0]
        convs.append((n, *(prod[i] for i in n.input), q))
    names = sorted({t for c in convs for t in (c[1].input[0], c[-1].output[0])})
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.output.extend(helper.make_empty_tensor_value_info(t) for t in names)
    got = dict(zip([o.name for o in m.graph.output], onnxruntime_outputs("probe.onnx", feeds, optimize=False, model=m)[1]))
    ties = 0
    for conv, xdq, wdq, bdq, q in convs:
        (xs, xz), ws, (ys, yz) = (init[i] for i in xdq.input[1:]), init[wdq.input[1]], (init[i] for i in q.input[1:])
        w, b = init[wdq.input[0]].astype(np.int64), init[bdq.input[0]].astype(np.int64)
        att = {a.name: helper.get_attribute_value(a) for a in conv.attribute}
        x = got[xdq.input[0]].astype(np.int64) - int(xz)
        acc = _int_conv(x, w, b, att)
        scale = ((np.float32(xs) * ws.astype(np.float32)) / np.float32(ys)).astype(np.float64).reshape(1, -1, 1, 1)
        mine = np.clip(np.floor(acc * scale + 0.5) + int(yz), 0, 255)  # acc * scale is exact in float64
        off = mine != got[q.output[0]]
        if not off.any():
            continue
        mag = _int_conv(np.abs(x), np.abs(w), np.abs(b), att) * scale
        real = acc * scale                      # within 2^-24 relative of the exact value (scale's own rounding)
        tie = np.floor(real) + 0.5
        bound = (w[0].size + 3) * 2.0 ** -24 * mag + np.abs(tie) * 2.0 ** -23
        assert (np.abs(real - tie)[off] <= bound[off]).all(), f"{conv.output[0]}: off the oracle away from a tie"
        assert (np.abs(mine - got[q.output[0]])[off] == 1).all()
        ties += int(off.sum())
    return ties


@pytest.mark.parametrize("target", ["x86_64-avx2", "x86_64-avx512-vnni", "aarch64-neon"])
def test_ppocr_7bit_random_inputs_match_exact_qdq_off_near_ties(ppocr_cls, target, tmp_path):
    """ppocr cls 7-bit on 8 random inputs against the exact QDQ oracle. Every int8 op other than Conv
    (HardSwish / HardSigmoid tables, GlobalAveragePool, the fixed-point SE Mul, Add, MaxPool, Gemm) matched
    the oracle byte for byte when fed the oracle's own input bytes; a Conv differs only where the oracle's
    float32 Conv lands within its own rounding error of a .5 tie (_conv_near_ties: 38 of 12.1M conv
    outputs on 20 inputs), and edgec's exact integer sum then rounds the other way. So: an input whose
    oracle run has no such near-tie gives a bit-identical output; one with near-ties still gets the class,
    but the 1-LSB flips are amplified downstream (an SE gate byte scales a whole channel; 20 inputs: up
    to 10 LSB of the softmax)."""
    if not get_target(target).runs_natively() and not get_target(target).qemu:
        pytest.skip(f"{target} cannot run here")
    if target.startswith("x86_64") and not get_target(target).runs_natively():
        pytest.skip(f"this CPU cannot run {target}")
    q = _ppocr_7bit(ppocr_cls, tmp_path)
    model = onnx.shape_inference.infer_shapes(onnx.load(str(q)))
    b = compile_model(q, tmp_path / "out", target=target, build=True, input_shapes={"x": [1, 3, 48, 192]})
    clean = tied = 0
    for i in range(108, 116):  # 3 of these 8 inputs have no near-tie
        x = np.random.default_rng(i).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)
        y = run_binary(b.binaries["runner"], get_target(target), [x], tmp_path / f"w{i}")[0]
        ref = exact(q, {"x": x})
        if _conv_near_ties(model, {"x": x}) == 0:
            clean += 1
            assert np.array_equal(y, ref), (i, np.abs(y - ref).max() * 255)
        else:
            tied += 1
            assert (y.argmax(1) == ref.argmax(1)).all() and np.abs(y - ref).max() <= 16.001 / 255, i
    assert clean >= 3 and tied >= 3, (clean, tied)  # both kinds are exercised


@pytest.mark.parametrize("reduce_range", [True, False])
def test_reduce_range_model_runs_maddubs_gemm_exactly(digits_cnn, reduce_range, tmp_path):
    """7-bit weights (quantize_static reduce_range, what `edgec optimize --target x86_64-avx2` asks for)
    compile to the u8 x s8 vpmaddubsw GEMM on every conv/Gemm layer and match the exact QDQ arithmetic;
    8-bit weights never reach it (their pair sums would saturate)."""
    if not get_target("x86_64-avx2").runs_natively():
        pytest.skip("this CPU lacks AVX2")
    from edgec.optimizer.quantize import reduce_range_for

    assert reduce_range_for("x86_64-avx2")[0] and not reduce_range_for("aarch64-neon")[0]
    data = np.load(digits_cnn.data)
    x, labels = data["input"], data["labels"]
    q = tmp_path / "q.onnx"
    quantize_static(str(digits_cnn.model), str(q), _Reader("input", [x[i:i + 1] for i in range(0, 64, 2)]),
                    quant_format=QuantFormat.QDQ, per_channel=True, reduce_range=reduce_range,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    ws = [numpy_helper.to_array(i) for i in onnx.load(str(q)).graph.initializer if i.data_type == TensorProto.INT8]
    assert (max(int(np.abs(w).max()) for w in ws) <= 64) == reduce_range
    b, y = _compile_run(q, "x86_64-avx2", x, tmp_path)
    kernels = [l["details"]["kernel"] for l in b.layers if l["algo"] == "q8-gemm"]
    assert kernels and all((k == "q8_gemm_4x16__avx2_maddubs") == reduce_range for k in kernels), kernels
    ref = exact(q, {"input": x})
    assert np.abs(y - ref).max() <= _out_scale(q) * 1.001  # within 1 LSB of the int8 logits
    assert abs((y.argmax(1) == labels).mean() - (ref.argmax(1) == labels).mean()) <= 1 / len(labels) + 1e-9


def test_ppocr_8bit_on_avx_vnni_runs_vpdpbusd_kernels(ppocr_cls, tmp_path):
    """x86_64-avx2-vnni (AVX-VNNI, no AVX-512): 8-bit weights, no 7-bit restriction. Every 1x1 conv runs the ymm
    vpdpbusd GEMM and every depthwise layer the vpdpbusd depthwise kernel (with the HardSwish tables fused), the
    output bit-identical to the scalar reference kernels' build and within 1 LSB of the exact QDQ result; the
    optimizer keeps 8-bit weights for the target."""
    from edgec.optimizer.quantize import reduce_range_for

    assert not reduce_range_for("x86_64-avx2-vnni")[0] and reduce_range_for("x86_64-avx2")[0]
    if not get_target("x86_64-avx2-vnni").runs_natively():
        pytest.skip("this CPU lacks AVX-VNNI")
    q = _ppocr_int8(ppocr_cls, tmp_path)
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)
    b, y = _compile_run(q, "x86_64-avx2-vnni", x, tmp_path / "vnni", name="x")
    kernels = {l["algo"]: set() for l in b.layers}
    for l in b.layers:
        kernels[l["algo"]].add(l.get("details", {}).get("kernel"))
    assert kernels["q8-dwconv"] == {"q8_dwconv__avxvnni"} and kernels["q8-gemm"] == {"q8_gemm_4x16__avxvnni"}, kernels
    fused = [l.get("details", {}).get("fused_lut") for l in b.layers if l["algo"] == "q8-dwconv"]
    assert fused.count("q8_lut__avx2") == 8, fused
    _, y_ref = _compile_run(q, "generic", x, tmp_path / "generic", name="x")
    assert np.array_equal(y, y_ref)
    ref = exact(q, {"x": x})
    assert np.abs(y - ref).max() <= 1.001 / 255 and (y.argmax(1) == ref.argmax(1)).all()


def test_ppocr_on_amx_runs_the_tile_gemm(ppocr_cls, tmp_path):
    """x86_64-avx512-amx: ppocr cls's 1x1 convs of >= 32 input channels run the AMX GEMM (others and depthwise: the
    VNNI kernels), the output bit-identical to the x86_64-avx512-vnni build's (the same fp32 requantization; the
    generic build's fixed-point one may differ by 1 LSB at near-ties) and within 1 LSB of the exact QDQ result."""
    if not get_target("x86_64-avx512-amx").runs_natively():
        pytest.skip("this CPU lacks AMX-INT8")
    q = _ppocr_int8(ppocr_cls, tmp_path)
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)  # the AVX-VNNI test's input
    b, y = _compile_run(q, "x86_64-avx512-amx", x, tmp_path / "amx", name="x")
    gemms = {l["details"]["kernel"] for l in b.layers if l["algo"] == "q8-gemm"}
    assert gemms == {"q8_gemm_32x32__amx", "q8_gemm_8x32__avx512vnni"}, gemms  # the VNNI one below 32 channels
    _, y_ref = _compile_run(q, "x86_64-avx512-vnni", x, tmp_path / "vnni", name="x")
    assert np.array_equal(y, y_ref)
    ref = exact(q, {"x": x})
    assert np.abs(y - ref).max() <= 1.001 / 255 and (y.argmax(1) == ref.argmax(1)).all()


def test_optimize_target_picks_7bit_weights(digits_cnn, tmp_path, capsys):
    """`edgec optimize --target x86_64-avx2` writes 7-bit weights (and says why); aarch64-neon and an explicit
    --full-range keep 8 bits; an unknown target is one clear error line."""
    from edgec.cli.main import main as edgec

    data = np.load(digits_cnn.data)
    np.savez(tmp_path / "calib.npz", input=data["input"][:32])
    peaks = {}
    for tag, flags in (("avx2", ["--target", "x86_64-avx2"]), ("neon", ["--target", "aarch64-neon"]),
                       ("full", ["--target", "x86_64-avx2", "--full-range"])):
        out = tmp_path / f"{tag}.onnx"
        rc = edgec(["optimize", str(digits_cnn.model), "-o", str(out), "--quantize", "int8", "--calib",
                    str(tmp_path / "calib.npz"), "--no-guard", *flags])
        assert rc == 0
        ws = [numpy_helper.to_array(i) for i in onnx.load(str(out)).graph.initializer if i.data_type == TensorProto.INT8]
        peaks[tag] = max(int(np.abs(w.astype(np.int16)).max()) for w in ws)
    assert peaks["avx2"] <= 64 < peaks["neon"] and peaks["full"] > 64, peaks
    assert "7-bit weights for x86_64-avx2" in capsys.readouterr().err
    rc = edgec(["optimize", str(digits_cnn.model), "-o", str(tmp_path / "x.onnx"), "--quantize", "int8", "--calib",
                str(tmp_path / "calib.npz"), "--target", "bogus"])
    err = capsys.readouterr().err
    assert rc != 0 and "unknown target 'bogus'" in err and "Traceback" not in err and not (tmp_path / "x.onnx").exists()


def test_small_map_convs_implicit_and_strided_1x1_packed_from_input(tmp_path):
    """ResNet's stage-4 shapes at small scale: a 3x3 at stride 2, a 3x3 on a 7x7 map and a 1x1 at stride 2 (packed
    straight from the input, no padded copy). Through the pixel-lane GEMM (forced) both 3x3s take its implicit form
    (63 extended pixels fill the same 16-pixel vectors as 49); by default on AVX-512 VNNI all three take the
    channel-lane GEMM. The bytes match the exact QDQ arithmetic at 1 and 2 threads either way."""
    from edgec.codegen.options import CompileOptions
    from edgec.codegen.verifier import run_binary as run_threads

    rng = np.random.default_rng(12)
    shape = (1, 32, 14, 14)
    ws = {"w1": (32, 32, 3, 3), "w2": (32, 32, 3, 3), "w3": (32, 32, 1, 1)}
    inits = [numpy_helper.from_array(rng.normal(0, 0.1, s).astype(np.float32), k) for k, s in ws.items()]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1] * 4, strides=[2, 2]),
             helper.make_node("Relu", ["a"], ["ar"]),
             helper.make_node("Conv", ["ar", "w2"], ["b"], pads=[1] * 4),
             helper.make_node("Conv", ["x", "w3"], ["c"], strides=[2, 2]),
             helper.make_node("Add", ["b", "c"], ["y"])]
    g = helper.make_graph(nodes, "s4", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    src = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), src)
    q = quantize(src, tmp_path / "q.onnx", "x", [rng.normal(0, 1, shape).astype(np.float32) for _ in range(8)])
    x = rng.normal(0, 1, shape).astype(np.float32)
    want = exact(q, {"x": x})
    for mode in ("q8-gemm", "auto"):
        b = compile_model(q, tmp_path / mode, options=CompileOptions(target="native", threads=2, q8conv=mode),
                          build=True, input_shapes={"x": list(shape)})
        convs = [l["details"] for l in b.layers if l["op"] == "QLinearConv"]
        if b.target.arch == "x86_64" and "avx512_vnni" in b.target.features and "amx_int8" not in b.target.features:
            if mode == "q8-gemm":
                assert sum("implicit" in c.get("why", "") for c in convs) == 2, convs
            else:
                assert [c["kernel"] for c in convs] == ["q8_cgemm_32x8__avx512vnni"] * 3, convs
        got = {t: run_threads(b.binaries["runner"], b.target, [x], tmp_path / f"{mode}{t}", threads=t)[0]
               for t in (1, 2)}
        assert np.array_equal(got[1], got[2])
        assert np.abs(got[1] - want).max() <= _out_scale(q) * 1.001


@pytest.mark.parametrize("rows", [1, 3])
def test_int8_classifier_gemm_splits_output_channels_on_threads(rows, tmp_path):
    """A classifier's Gemm on few rows (its pixels) with 75 outputs: on 2 threads the output channels are split in
    8-row panels (a one-row GEMM is one pixel chunk); the same bytes as 1 thread, within the exact QDQ result."""
    from edgec.codegen.options import CompileOptions
    from edgec.codegen.verifier import run_binary as run_threads

    rng = np.random.default_rng(14)
    w, c = rng.normal(0, 0.1, (75, 200)).astype(np.float32), rng.normal(0, 0.1, 75).astype(np.float32)
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1)], "fc",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 200])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, 75])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(c, "c")])
    src = tmp_path / "fc.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), src)
    q = quantize(src, tmp_path / "fc_q.onnx", "x", [rng.normal(0, 1, (rows, 200)).astype(np.float32) for _ in range(8)])
    x = rng.normal(0, 1, (rows, 200)).astype(np.float32)
    opts = CompileOptions(target="native", threads=2, learned=(("pool-job-us", 0.0),))  # handed the pool when small
    b = compile_model(q, tmp_path / "out", options=opts, build=True, input_shapes={"x": [rows, 200]})
    assert "model_pool);" in [l for l in (b.dir / "model.c").read_text().splitlines() if "q8_matmul(" in l][0]
    got = {t: run_threads(b.binaries["runner"], b.target, [x], tmp_path / f"t{t}", threads=t)[0] for t in (1, 2)}
    assert np.array_equal(got[1], got[2])
    assert np.abs(got[1] - exact(q, {"x": x})).max() <= _out_scale(q) * 1.001


def test_table_fused_into_a_grouped_conv_runs_after_it_on_the_pool(tmp_path):
    """A per-tensor table (Sigmoid between quantized layers) after a grouped conv that runs GSPC, whose driver applies
    no table itself: fused all the same (no layer of its own), run right after the conv over the pool's threads in
    4 KB blocks (q8_lut_pool; 72 KB here, so 2 threads split it). The bytes at 1 and 2 threads, the exact QDQ result."""
    from edgec.codegen.options import CompileOptions
    from edgec.codegen.verifier import run_binary as run_threads

    rng = np.random.default_rng(23)
    shape = (1, 32, 48, 48)
    w1, w2 = rng.normal(0, 0.3, (32, 8, 3, 3)), rng.normal(0, 0.3, (8, 32, 1, 1))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], pads=[1] * 4, group=4),
             helper.make_node("Sigmoid", ["h"], ["a"]), helper.make_node("Conv", ["a", "w2"], ["y"])]
    g = helper.make_graph(nodes, "gsig", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v.astype(np.float32), k) for k, v in (("w1", w1), ("w2", w2))])
    src = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), src)
    q = quantize(src, tmp_path / "q.onnx", "x", [rng.normal(0, 1, shape).astype(np.float32) for _ in range(4)])
    x = rng.normal(0, 1, shape).astype(np.float32)
    # GSPC forced: the cost model's pick for this layer differs between ISAs (AVX2: a GEMM per group)
    b = compile_model(q, tmp_path / "out", options=CompileOptions(target="native", threads=2, q8conv="q8-gspc"),
                      build=True, input_shapes={"x": list(shape)})
    grouped = [l for l in b.layers if l["algo"] == "q8-gspc"]
    if not grouped:
        pytest.skip(f"{b.target.name} has no int8 GSPC kernel: no pass after the conv to test")
    assert len(grouped) == 1 and grouped[0]["details"].get("fused_lut"), b.layers
    assert not any(l["algo"] == "q8-lut" for l in b.layers)
    assert "q8_lut_pool(" in (b.dir / "model.c").read_text()
    got = {t: run_threads(b.binaries["runner"], b.target, [x], tmp_path / f"t{t}", threads=t)[0] for t in (1, 2)}
    assert np.array_equal(got[1], got[2])
    assert np.abs(got[1] - exact(q, {"x": x})).max() <= _out_scale(q) * 1.001


def test_depthwise_of_few_channels_runs_the_pixel_lane_kernel(tmp_path):
    """On AVX-512 VNNI an int8 depthwise conv of 8 channels or fewer over rows of 32+ pixels runs the pixel-lane
    kernel (half the channel-lane kernel's 16 lanes would idle); 32 channels run the channel-lane one (quant._emit_dw).
    Code generation only: the kernels' results are checked against the scalar reference in tests/kernels."""
    rng = np.random.default_rng(5)
    shape = (1, 8, 24, 48)
    w1, w2, w3 = rng.normal(0, 0.3, (8, 1, 3, 3)), rng.normal(0, 0.3, (32, 8, 1, 1)), rng.normal(0, 0.3, (32, 1, 3, 3))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1] * 4, group=8),
             helper.make_node("Conv", ["a", "w2"], ["b"]),
             helper.make_node("Conv", ["b", "w3"], ["y"], pads=[1] * 4, group=32)]
    g = helper.make_graph(nodes, "dws", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v.astype(np.float32), k) for k, v in (("w1", w1), ("w2", w2),
                                                                                        ("w3", w3))])
    src = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), src)
    q = quantize(src, tmp_path / "q.onnx", "x", [rng.normal(0, 1, shape).astype(np.float32) for _ in range(4)])
    b = compile_model(q, tmp_path / "out", target="x86_64-avx512-vnni", build=False)
    kernels = [l["details"]["kernel"] for l in b.layers if l["algo"] == "q8-dwconv"]
    assert kernels == ["q8_dwconv__avx512vnni", "q8_dwconv_c16__avx512vnni"], b.layers
