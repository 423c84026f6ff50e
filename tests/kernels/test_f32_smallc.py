"""Direct few-input-channel conv (runtime_c/f32-conv/f32-conv-smallc*): every SIMD variant against the scalar
reference, and the reference against a plain conv of the unpacked weights (tests/kernels/c/test_smallc.c: C 1..4,
kernels 1/3/5/7 and 2x5, strides 1-3, pads, odd maps, output channels off the block, NCHW and blocked outputs,
every epilogue), NEON under qemu, AVX2 under ASan/UBSan; whole models with such layers against onnxruntime."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper, save

from edgec.codegen import build_project, compile_model
from edgec.codegen.options import CompileOptions
from edgec.codegen.targets import get_target
from edgec.runtime_c import root as runtime_root
from qkit import SAN, build_for_target

C_TEST = Path(__file__).with_name("c") / "test_smallc.c"
TARGETS = {"x86_64-avx2": ("avx2", 8), "x86_64-avx512": ("avx512", 16), "aarch64-neon": ("neon", 4), "armv7-neon": ("neon", 4)}
SRC = "f32-conv/f32-conv-smallc"


def build(target: str, out: Path, opt=("-O2",), rt: Path | None = None) -> list[str] | None:
    return build_for_target(target, *TARGETS[target], C_TEST, SRC, out, opt, rt)


@pytest.mark.parametrize("target", list(TARGETS))
def test_smallc_kernels_match_scalar_reference(target, tmp_path):
    run = build(target, tmp_path / "t")
    if run is None:
        pytest.skip(f"built; this CPU cannot run {TARGETS[target][0]}")
    r = subprocess.run([*run, *(["quick"] if len(run) > 1 else [])], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cases ok, 0 failed" in r.stdout and "FAIL" not in r.stdout


def test_smallc_kernels_sanitizers(tmp_path):
    """ASan + UBSan over the AVX2 kernel and the reference, threaded through the run helper."""
    run = build("x86_64-avx2", tmp_path / "t", SAN)
    if run is None:
        pytest.skip("this CPU cannot run avx2")
    r = subprocess.run([*run, "quick"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("bug", ["edge", "tile"])
def test_reference_catches_a_wrong_kernel(tmp_path, bug):
    """The comparison is live: a SIMD kernel whose edge pixels drop their last window column, or whose tiles
    drop their last window row, fails it."""
    src = (runtime_root() / f"{SRC}-tmpl.h").read_text()
    tile_rows = "for (size_t kh = kh0; kh < kh1; kh++) {\n      const float *xr = x + (c * H"
    bad = src.replace("for (size_t kw = kw0; kw < kw1; kw++", "for (size_t kw = kw0; kw + 1 < kw1; kw++") \
        if bug == "edge" else src.replace(tile_rows, tile_rows.replace("kh < kh1", "kh + 1 < kh1"))
    assert bad != src
    rt = tmp_path / "rt"
    shutil.copytree(runtime_root(), rt, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (rt / f"{SRC}-tmpl.h").write_text(bad)
    run = build("x86_64-avx2", tmp_path / "t", rt=rt)
    if run is None:
        pytest.skip("this CPU cannot run avx2")
    r = subprocess.run([*run, "quick"], capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 and "FAIL smallc" in r.stdout


# -- whole models against onnxruntime ---------------------------------------------------------------------

def stem_model(path: Path) -> Path:
    """The two stems (reduced maps) and odd few-channel layers: 1-D, a residual, asymmetric pads, SH != SW."""
    rng = np.random.default_rng(3)
    inits, nodes, outs = [], [], []

    def const(a):
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), f"c{len(inits)}"))
        return inits[-1].name

    def conv(x, cin, cout, k, **attrs):
        k = k if isinstance(k, tuple) else (k, k)
        w = const(rng.standard_normal((cout, cin, *k)) / np.sqrt(cin * k[0] * k[1]))
        out = f"t{len(nodes)}"
        nodes.append(helper.make_node("Conv", [x, w, const(rng.standard_normal(cout))], [out], name=out, **attrs))
        return out

    def node(op, ins, **attrs):
        out = f"t{len(nodes)}"
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    s1 = node("Relu", [conv("x", 3, 64, 3, strides=[2, 2])])                          # SqueezeNet 1.1
    outs.append(node("MaxPool", [s1], kernel_shape=[3, 3], strides=[2, 2]))
    outs.append(node("Relu", [conv("x", 3, 64, 7, strides=[2, 2], pads=[3, 3, 3, 3])]))  # ResNet-50
    outs.append(node("Clip", [conv("x", 3, 19, (5, 3), strides=[2, 1], pads=[2, 0, 1, 1]), const(-1.0), const(1.0)]))
    outs.append(node("Add", [conv("x4", 4, 4, 3, pads=[1, 1, 1, 1]), "x4"]))               # residual, K = C = 4
    outs.append(node("HardSwish", [conv("x1", 1, 10, 5, strides=[1, 1], pads=[2, 2, 2, 2])]))
    outs.append(node("Sigmoid", [conv("x1d", 2, 9, (1, 7), strides=[1, 2], pads=[0, 3, 0, 2])]))
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 45, 47]),
           helper.make_tensor_value_info("x4", TensorProto.FLOAT, [1, 4, 13, 35]),
           helper.make_tensor_value_info("x1", TensorProto.FLOAT, [1, 1, 28, 28]),
           helper.make_tensor_value_info("x1d", TensorProto.FLOAT, [1, 2, 1, 61])]
    def model(outputs):
        return helper.make_model(helper.make_graph(nodes, "stems", ins, outputs, inits),
                                 opset_imports=[helper.make_opsetid("", 14)])
    known = {vi.name: vi for vi in onnx.shape_inference.infer_shapes(model([])).graph.value_info}
    save(model([known[o] for o in outs]), str(path))
    return path


def run_model(model: Path, target: str, tmp: Path, options: CompileOptions):
    t = get_target(target)
    if t.qemu and (shutil.which(t.cc) is None or shutil.which(t.qemu[0]) is None):
        pytest.skip(f"{t.cc} or {t.qemu[0]} is not installed")
    if not t.qemu and not t.runs_natively():
        pytest.skip(f"this CPU cannot run {target}")
    b = compile_model(model, tmp / "p", options=options)
    exe = build_project(b.dir, target, cflags="-O2 -Wall -Wextra -Werror")["runner"]
    sess = ort.InferenceSession(str(model))
    rng = np.random.default_rng(5)
    feeds, files = {}, []
    for i, inp in enumerate(sess.get_inputs()):
        feeds[inp.name] = rng.standard_normal(inp.shape).astype(np.float32)
        np.save(tmp / f"in{i}.npy", feeds[inp.name])
        files.append(str(tmp / f"in{i}.npy"))
    r = subprocess.run([*(t.qemu or []), str(exe), *files, "--out", str(tmp)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    for i, want in enumerate(sess.run(None, feeds)):
        np.testing.assert_allclose(np.load(tmp / f"output_{i}.npy"), want, rtol=1e-4, atol=1e-4,
                                   err_msg=f"output {i} {b.layers}")
    return b


@pytest.mark.parametrize("target,threads", [("native", 1), ("native", 2), ("aarch64-neon", 1), ("armv7-neon", 2)])
def test_stems_direct_match_onnxruntime(tmp_path, target, threads):
    """Every few-channel layer forced onto the direct kernel (EDGEC_SMALLC=direct), split over threads too."""
    if target != "native" and get_target("native").name == target:
        pytest.skip(f"{target} is this CPU's native target: run as native")
    b = run_model(stem_model(tmp_path / "m.onnx"), target, tmp_path,
                  CompileOptions(target=target, threads=threads, smallc="direct"))
    convs = [l["algo"] for l in b.layers if l["op"] == "Conv"]
    assert len(convs) == 6 and all(a.startswith("direct-smallc-") for a in convs), convs
    from edgec.codegen.ops.conv import SMALLC_KERNELS
    from edgec.codegen.ops.elementwise import vector_isa
    lanes = SMALLC_KERNELS[vector_isa(get_target(target))][2]  # the kernel's vector
    assert {a.split("-")[2] for a in convs} == {str(lanes), str(2 * lanes)}, convs  # K <= lanes: one vector


def test_stems_gemm_and_auto_match_onnxruntime(tmp_path):
    """The GEMM path forced back (EDGEC_SMALLC=gemm: none direct) and the cost model's picks both stay correct."""
    b = run_model(stem_model(tmp_path / "m.onnx"), "native", tmp_path, CompileOptions(smallc="gemm"))
    assert not any(l["algo"].startswith("direct-smallc") for l in b.layers), b.layers
    (tmp_path / "a").mkdir()
    run_model(stem_model(tmp_path / "a" / "m.onnx"), "native", tmp_path / "a", CompileOptions())


def test_generic_target_keeps_the_gemm_path():
    """No vectors, no direct kernel: the generic build never picks it (its scalar file is the test reference)."""
    from edgec.codegen.ops.conv import smallc_kernel
    g = dict(N=1, C=3, H=224, W=224, K=64, Ho=111, Wo=111, G=1, KH=3, KW=3, SH=2, SW=2, DH=1, DW=1, PT=0, PL=0)
    assert smallc_kernel(get_target("generic"), g) is None
    assert smallc_kernel(get_target("x86_64-avx2"), g) is not None
    assert smallc_kernel(get_target("x86_64-avx2"), dict(g, C=5)) is None
    assert smallc_kernel(get_target("x86_64-avx2"), dict(g, DH=2)) is None
