"""Vector activations (runtime_c/ec_simd_act.h), their scalar twins in ec_epi_row, the f32-vact and
f32-softmax kernels: tests/kernels/c/test_act.c against libm in double precision on a dense sweep,
special values and odd lengths, per ISA (natively, under qemu-aarch64 / qemu-arm, and with ASan +
UBSan); then models with these activations compiled by edgec against onnxruntime."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen import build_project, compile_model
from edgec.codegen.targets import get_target
from edgec.runtime_c import root as runtime_root
from qkit import compile_link

CDIR = Path(__file__).with_name("c")
WFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror"]
SAN = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]

# name: (target whose cflags/cc/qemu build it, vocabulary, kernel isa or None, sweep step)
ISAS = {
    "avx2": ("x86_64-avx2", "avx2", "avx2", 64),
    "sse": ("x86_64-avx2", "sse", None, 256),
    "avx512": ("x86_64-avx512", "avx512", "avx512", 64),
    "neon-aarch64": ("aarch64-neon", "neon", "neon", 2048),
    "neon-armv7": ("armv7-neon", "neon", "neon", 2048),
}
LINE = re.compile(r"^(\w+) ([\d.]+) (\S+) (\S+) (\S+) ([\d.]+)( +FAIL)?$", re.M)


def _build_act(name: str, out, extra=(), opt="-O2"):
    tname, vocab, kisa, step = ISAS[name]
    t = get_target(tname)
    cc = t.cc if t.arch not in ("x86_64", "any") else "gcc"
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed")
    if t.qemu and shutil.which(t.qemu[0]) is None:
        pytest.skip(f"{t.qemu[0]} is not installed")
    rt = runtime_root()
    defs = {"T_HEADER": f'"ec_simd_{vocab}.h"'}
    srcs = [CDIR / "test_act.c"]
    if kisa:
        defs |= {"T_VACT": f"f32_vact__{kisa}", "T_SOFTMAX": f"f32_softmax__{kisa}"}
        srcs += [rt / f"f32-vact/f32-vact-{kisa}.c", rt / f"f32-softmax/f32-softmax-{kisa}.c"]
    compile_link(cc, [opt, *WFLAGS, *t.cflags, *(["-static"] if t.qemu else []), *extra, f"-I{rt}"], srcs, out, defs)
    if not t.qemu and not t.runs_natively():  # built (-Werror) but not run
        pytest.skip(f"built; this CPU lacks {', '.join(t.features)}")
    return [*(t.qemu or []), str(out)], step


def _run(cmd, step):
    r = subprocess.run([*cmd, str(step)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("OK"), r.stdout + r.stderr
    return {m[0]: (float(m[1]), float(m[2])) for m in LINE.findall(r.stdout)}, r.stdout


@pytest.mark.parametrize("name", list(ISAS))
def test_vector_activations_match_libm(name, tmp_path):
    cmd, step = _build_act(name, tmp_path / "t")
    stats, out = _run(cmd, step)
    assert set(stats) == {"exp", "sigmoid", "silu", "tanh", "erf", "gelu", "gelu_tanh"}, out
    # the figures docs/kernels.md quotes, with the armv7 divide's slack
    slack = 1.5 if name == "neon-armv7" else 0.0
    assert stats["exp"][0] <= 1.0 + slack and stats["sigmoid"][0] <= 3.0 + slack, out
    assert stats["tanh"][0] <= 2.0 + slack and stats["erf"][0] <= 3.0 + slack, out
    assert all(stats[f][1] < 1e-6 for f in ("exp", "sigmoid", "silu", "tanh", "erf", "gelu")), out
    if ISAS[name][2]:
        assert "f32_vact kernel: 0 failures" in out and "f32_softmax kernel: 0 failures" in out, out
    if name != "neon-armv7":  # same operations lane by lane: the same bits
        assert re.search(r"twins checked on \d+ values: 0 differ", out), out


def test_vector_activations_sanitizers(tmp_path):
    """ASan + UBSan over the vector functions, the scalar twins and both kernels (AVX2)."""
    cmd, _ = _build_act("avx2", tmp_path / "t", SAN, opt="-O1")
    _run(cmd, 4096)


# --- emitters: models compiled by edgec against onnxruntime ---------------------------------------

RNG = np.random.default_rng(11)


def _model(path, opset=14, gelu_op=False):
    """Conv+SiLU as torch exports it (Sigmoid, Mul), Conv+Sigmoid, Conv+Tanh, the Erf form of GELU,
    standalone Sigmoid / Tanh / Exp / Erf after a Transpose (no producer to fuse into), Softmax and
    LogSoftmax on the inner and on a strided axis, and with gelu_op the Gelu op (both forms)."""
    nodes, inits, n = [], [], [0]

    def const(a):
        n[0] += 1
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), f"c{n[0]}"))
        return f"c{n[0]}"

    def iconst(a):
        n[0] += 1
        inits.append(numpy_helper.from_array(np.asarray(a, np.int64), f"c{n[0]}"))
        return f"c{n[0]}"

    def node(op, ins, **attrs):
        n[0] += 1
        nodes.append(helper.make_node(op, ins, [f"t{n[0]}"], name=f"{op}_{n[0]}", **attrs))
        return f"t{n[0]}"

    def conv(x, cin, cout, k, **attrs):
        w = RNG.standard_normal((cout, cin, k, k)) * (3.0 / np.sqrt(cin * k * k))  # wide range of pre-activations
        return node("Conv", [x, const(w), const(RNG.standard_normal(cout))], **attrs)

    outs = []
    x = "x"
    c1 = conv(x, 3, 16, 3, strides=[2, 2], pads=[1, 1, 1, 1])           # YOLO-style stem + SiLU
    outs.append(node("Mul", [c1, node("Sigmoid", [c1])]))
    c2 = conv(x, 3, 8, 1)                                                 # 1x1 + SiLU (x * sigmoid(x))
    outs.append(node("Mul", [node("Sigmoid", [c2]), c2]))
    c3 = conv(x, 3, 8, 3, pads=[1, 1, 1, 1])                              # stride-1 3x3 + SiLU: the s1 path
    outs.append(node("Mul", [c3, node("Sigmoid", [c3])]))
    outs.append(node("Sigmoid", [conv(x, 3, 8, 3, pads=[1, 1, 1, 1])]))
    outs.append(node("Tanh", [conv(x, 3, 5, 3, strides=[2, 2])]))
    c4 = conv(x, 3, 8, 1)                                                 # GELU as torch < 2.1 exports it
    erf = node("Erf", [node("Div", [c4, const(1.4142135381698608)])])
    outs.append(node("Mul", [node("Mul", [c4, node("Add", [erf, const(1.0)])]), const(0.5)]))
    tr = node("Transpose", [x], perm=[0, 2, 3, 1])                         # [1, 20, 64, 3]
    big = node("Mul", [tr, const(12.0)])                                   # spans the exp range
    for op in ("Sigmoid", "Tanh", "Exp", "Erf"):
        outs.append(node(op, [big if op != "Exp" else tr]))
    outs.append(node("Softmax", [big], axis=-1))
    outs.append(node("Softmax", [c1], axis=1))                            # strided: 16 channels of 10x32
    outs.append(node("LogSoftmax", [node("Reshape", [c1, iconst([1, 16, 320])])], axis=2))
    if gelu_op:
        outs.append(node("Gelu", [conv(x, 3, 8, 3, pads=[1, 1, 1, 1])]))
        outs.append(node("Gelu", [big], approximate="tanh"))
    g = helper.make_graph(nodes, "acts", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 20, 64])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    m = onnx.shape_inference.infer_shapes(m)
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return path


def _run_model(model, target_name, tmp_path):
    t = get_target(target_name)
    if t.qemu and (shutil.which(t.cc) is None or shutil.which(t.qemu[0]) is None):
        pytest.skip(f"{t.cc} or {t.qemu[0]} is not installed")
    if not t.qemu and not t.runs_natively():
        pytest.skip(f"this CPU cannot run {target_name} ({', '.join(t.features)})")
    b = compile_model(model, tmp_path / "p", target=target_name)
    exe = build_project(b.dir, target_name, cflags="-O2 -Wall -Wextra -Werror")["runner"]
    sess = ort.InferenceSession(str(model))
    xin = RNG.standard_normal((1, 3, 20, 64)).astype(np.float32)
    np.save(tmp_path / "in0.npy", xin)
    r = subprocess.run([*(t.qemu or []), str(exe), str(tmp_path / "in0.npy"), "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for i, want in enumerate(sess.run(None, {"x": xin})):
        got = np.load(tmp_path / f"output_{i}.npy")
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=f"output {i} {b.layers}")
    return b


@pytest.mark.parametrize("target", ["x86_64-avx2", "generic", "aarch64-neon", "armv7-neon"])
def test_activation_models_match_onnxruntime(tmp_path, monkeypatch, target):
    monkeypatch.setenv("EDGEC_CONV", "direct")  # the GEMM paths' epilogues, not a transform's error
    monkeypatch.setenv("EDGEC_SMALLC", "gemm")  # its few-channel convs too (the direct kernel's: test_f32_smallc)
    b = _run_model(_model(tmp_path / "acts.onnx"), target, tmp_path)
    algos, ops = [layer["algo"] for layer in b.layers], [layer["op"] for layer in b.layers]
    # the three SiLU, the Sigmoid and the Tanh after convolutions are fused into them
    # SiLU, Sigmoid, Tanh and the Erf form of GELU fuse into their convolutions, except the SiLU of
    # the stem, whose output also feeds the softmaxes
    assert ops.count("Sigmoid") == 2 and ops.count("Tanh") == 1 and ops.count("Erf") == 1, ops
    assert any("-s1-" in a for a in algos), algos  # the stride-1 path applies its epilogue in ec_epi_row
    isa = {"x86_64-avx2": "avx2", "aarch64-neon": "neon", "armv7-neon": "neon"}.get(target)
    if isa:  # standalone transcendental ops and softmax run on the vector kernels
        assert sum(a == f"vact-{isa}" for a in algos) == 5, algos
        assert sum(a == f"softmax-{isa}" for a in algos) == 3, algos
    else:
        assert "softmax" in algos and not any(a.startswith("vact") for a in algos), algos


def test_gelu_op_models_match_onnxruntime(tmp_path, monkeypatch):
    """Opset 20 Gelu (erf form fused into the conv, tanh form standalone), natively."""
    if tuple(int(v) for v in ort.__version__.split(".")[:2]) < (1, 17):
        pytest.skip("onnxruntime < 1.17 has no opset-20 Gelu")
    monkeypatch.setenv("EDGEC_CONV", "direct")
    b = _run_model(_model(tmp_path / "gelu.onnx", opset=20, gelu_op=True), "native", tmp_path)
    assert any(layer["algo"].startswith("vact-") for layer in b.layers), b.layers
