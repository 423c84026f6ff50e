"""Int8 GSPC (grouped convolution without im2col) on AVX-512 VNNI, AVX2 and NEON (qemu cortex-a72) vs
the direct scalar reference, bit-exact, with 1 and 2 threads; then the compiled model against the exact
QLinearConv (qkit.exact_int8, not onnxruntime's CPU-dependent int8 kernels), within 1 LSB."""

from __future__ import annotations

import subprocess

import numpy as np
import onnx
import pytest

from edgec.codegen.project import compile_model
from qkit import ISAS, SANITIZE, build, exact_int8, require, run
from test_q8_conv import _model_and_data

VARIANTS = {  # isa -> (function, file, T_O, T_I)
    "avx512vnni": ("q8_gspc_o16__avx512vnni", "q8-gspc/q8-gspc-o16-avx512vnni.c", 16, 4),
    "avx512vnni-o8": ("q8_gspc_o8__avx512vnni", "q8-gspc/q8-gspc-o16-avx512vnni.c", 8, 4),
    "avx2": ("q8_gspc_o8__avx2", "q8-gspc/q8-gspc-o8-avx2.c", 8, 2),
    "avx2-maddubs": ("q8_gspc_o8__avx2_maddubs", "q8-gspc/q8-gspc-o8-avx2-maddubs.c", 8, 4),
    "avxvnni": ("q8_gspc_o8__avxvnni", "q8-gspc/q8-gspc-o8-avxvnni.c", 8, 4),
    "neon": ("q8_gspc_o8__neon", "q8-gspc/q8-gspc-o8-neon.c", 8, 1),
}


@pytest.mark.parametrize("name,extra", [("avx512vnni", ()), ("avx512vnni", SANITIZE), ("avx512vnni-o8", ()),
                                        ("avx512vnni-o8", SANITIZE), ("avx2", ()), ("avx2", SANITIZE),
                                        ("avx2-maddubs", ()), ("avx2-maddubs", SANITIZE), ("neon", ()),
                                        ("avxvnni", ()), ("avxvnni", SANITIZE)],
                         ids=["vnni", "vnni-asan-ubsan", "vnni-o8", "vnni-o8-asan-ubsan", "avx2", "avx2-asan-ubsan",
                              "avx2-maddubs", "avx2-maddubs-asan-ubsan", "neon-a72", "avxvnni", "avxvnni-asan-ubsan"])
def test_q8_gspc_matches_reference(name, extra, tmp_path):
    isa = ISAS[name.split("-")[0]]
    require(isa)
    fn, src, t_o, t_i = VARIANTS[name]
    files = ["q8_gspc_test.c", "q8-gspc/q8-gspc-scalar.c", src, "ec_threadpool.c"]
    defs = {"KERNEL": fn, "KERNEL_NAME": f'"{name}"', "TO": str(t_o), "TI": str(t_i)}
    if "maddubs" in name:
        defs["W7"] = "1"  # exact only on weights that pass qpack.maddubs_exact
    r = run(isa, build(isa, tmp_path / "gspc", files, defs, extra), timeout=300)
    assert r.returncode == 0 and "90/90 cases match" in r.stdout, r.stdout + r.stderr[-3000:]


@pytest.mark.parametrize("name,extra", [("avx512vnni", ()), ("avx512vnni", SANITIZE), ("avx512vnni-o8", ())],
                         ids=["vnni", "vnni-asan-ubsan", "vnni-o8"])
def test_q8_gspc_fp32_requant_matches_reference(name, extra, tmp_path):
    """p.scale set: the VNNI kernels' per-lane fp32 requantization bit-exact against the scalar reference's."""
    isa = ISAS[name.split("-")[0]]
    require(isa)
    fn, src, t_o, t_i = VARIANTS[name]
    files = ["q8_gspc_test.c", "q8-gspc/q8-gspc-scalar.c", src, "ec_threadpool.c"]
    defs = {"KERNEL": fn, "KERNEL_NAME": f'"{name}-fp32"', "TO": str(t_o), "TI": str(t_i), "FP32_RQ": "1"}
    r = run(isa, build(isa, tmp_path / "gspcf", files, defs, extra), timeout=300)
    assert r.returncode == 0 and "90/90 cases match" in r.stdout, r.stdout + r.stderr[-3000:]


@pytest.mark.parametrize("target,isa,w7,kernel", [
    ("x86_64-avx512-vnni", "avx512vnni", False, None), ("x86_64-avx2", "avx2", False, "q8_gspc_o8__avx2"),
    ("x86_64-avx2", "avx2", True, "q8_gspc_o8__avx2_maddubs"),
    ("x86_64-avx2-vnni", "avxvnni", False, "q8_gspc_o8__avxvnni")], ids=["vnni", "avx2", "avx2-7bit", "avxvnni"])
@pytest.mark.parametrize("case", [(16, 9, 9, 32, 3, 1, 1, 1, 4, np.uint8), (12, 8, 11, 6, 3, 2, 1, 1, 2, np.int8),
                                  (18, 7, 13, 30, 3, 1, 2, 2, 3, np.uint8)])
def test_q8_gspc_model_vs_exact_qlinearconv(case, target, isa, w7, kernel, tmp_path, monkeypatch):
    require(ISAS[isa])
    if kernel == "q8_gspc_o8__avx2":  # 8-bit weights on AVX2 take the GEMM above 64 pixels (choose_int8_conv)
        monkeypatch.setenv("EDGEC_Q8CONV", "q8-gspc")
    model, x, _ = _model_and_data(case, np.random.default_rng(11))
    g = model.graph
    if w7:  # onnxruntime reduce_range / edgec optimize --target x86_64-avx2 weights: |w| <= 64 (vpmaddubsw exact)
        wi = [i for i in g.initializer if i.name == "w"][0]
        w = np.clip(onnx.numpy_helper.to_array(wi).astype(np.int16) // 2, -64, 64).astype(np.int8)
        w[0, :2, 0, 0], w[1, :2, 1, 1] = (64, 64), (-64, -64)  # channel pairs at the bound: 255 * 128 = 32640
        wi.CopyFrom(onnx.numpy_helper.from_array(w, "w"))
    # float graph around the int8 conv: x -> QuantizeLinear -> QLinearConv -> DequantizeLinear
    g.node.insert(0, onnx.helper.make_node("QuantizeLinear", ["xf", "xs", "xz"], ["x"]))
    g.node.append(onnx.helper.make_node("DequantizeLinear", ["y", "ys", "yz"], ["yf"]))
    del g.input[:]
    g.input.append(onnx.helper.make_tensor_value_info("xf", onnx.TensorProto.FLOAT, list(x.shape)))
    del g.output[:]
    g.output.append(onnx.helper.make_tensor_value_info("yf", onnx.TensorProto.FLOAT, None))
    path = tmp_path / "g.onnx"
    model = onnx.shape_inference.infer_shapes(model)
    onnx.save(model, path)
    xf = np.random.default_rng(2).normal(0, 1, x.shape).astype(np.float32)
    ref = exact_int8(model, {"xf": xf})[0]
    b = compile_model(path, tmp_path / "out", target=target, build=True, threads=2)
    assert [l["algo"] for l in b.layers].count("q8-gspc") == 1
    if kernel:
        assert [l["details"]["kernel"] for l in b.layers if l["algo"] == "q8-gspc"] == [kernel]
    np.save(tmp_path / "in.npy", xf)
    r = subprocess.run([str(b.binaries["runner"]), str(tmp_path / "in.npy"), "--out", str(tmp_path)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "output_0.npy")
    ys = float(onnx.numpy_helper.to_array([i for i in g.initializer if i.name == "ys"][0]))
    assert np.abs(y - ref).max() <= ys * 1.001


def test_choose_int8_conv_avx2_gspc_kernels():
    """The vpmaddwd GSPC kernel (8-bit weights) gives way to the packed GEMM above 64 output pixels; the
    vpmaddubsw one (7-bit weights) keeps GSPC; EDGEC_Q8CONV still forces either path."""
    from edgec.codegen import costmodel
    from edgec.codegen.options import CompileOptions, using
    from edgec.codegen.targets import get_target

    t = get_target("x86_64-avx2")
    pick = (lambda px, kern: costmodel.choose_int8_conv(t, 32, 32, 2, (3, 3), px, gspc=True, gspc_kernel=kern).algo)
    assert pick(64, "q8_gspc_o8__avx2") == "q8-gspc" and pick(81, "q8_gspc_o8__avx2") == "q8-gemm"
    assert pick(3136, "q8_gspc_o8__avx2_maddubs") == "q8-gspc" and pick(3136, None) == "q8-gspc"
    with using(CompileOptions(q8conv="q8-gspc")):
        assert pick(3136, "q8_gspc_o8__avx2") == "q8-gspc"
    with using(CompileOptions(q8conv="q8-gemm")):
        assert pick(16, "q8_gspc_o8__avx2_maddubs") == "q8-gemm"
    # AVX-VNNI: its vpdpbusd GSPC kernel at any size, whatever the weights
    from edgec.codegen.ops.quant import _gspc_variant
    v = get_target("x86_64-avx2-vnni")
    assert _gspc_variant(v, 8, np.zeros((8, 4, 3, 3), np.int8))[0] == "q8_gspc_o8__avxvnni"
    assert costmodel.choose_int8_conv(v, 32, 32, 2, (3, 3), 3136, gspc=True,
                                      gspc_kernel="q8_gspc_o8__avxvnni").algo == "q8-gspc"
