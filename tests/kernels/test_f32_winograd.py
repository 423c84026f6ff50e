"""Winograd F(2,3) / F(4,3) / F(6,3) (runtime_c/f32-winograd, codegen/ops/winograd.py).

Kernel level (tests/kernels/c/test_winograd.c): each transform pair of codegen/kernels.py on the driver
and its isa's GEMM microkernel, against a direct convolution and against the portable transforms, on
odd C/K/maps, pads 0/1/2 and asymmetric, groups, N = 2, several tile blocks / K passes / K blocks and
every epilogue: AVX2 natively, NEON under qemu-aarch64 (Cortex-A72) and qemu-arm, AVX-512 where the
CPU has it (built in any case); ASan+UBSan, and TSan over the thread pool. The channel-lane transforms
(inc, outc: tests/kernels/c/test_winograd_lanes.c) against their scalar twins (incb, outcb) call by call, on the
same ISAs and under ASan+UBSan.
Model level: Winograd forced through CompileOptions(conv=...), compiled, built with -Werror and compared
with onnxruntime natively and under qemu; the cost model's choice and its --explain reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen import compile_model, costmodel, kernels, variants, verify
from edgec.codegen.ops import winograd
from edgec.codegen.options import CompileOptions
from edgec.codegen.targets import get_target
from qkit import ISAS, SANITIZE, build, require, run

STRICT = "-O2 -Wall -Wextra -Werror"
ROWS = [k for k in kernels.KERNELS if k.op == "winograd"]
# (kernel row isa, test isa): NEON rows run on aarch64 and on armv7
CASES = [(k, k.isa) for k in ROWS] + [(k, "armv7-neon") for k in ROWS if k.isa == "neon"]
GEMM_TARGET = {"scalar": "generic", "avx2": "x86_64-avx2", "avx512": "x86_64-avx512", "neon": "aarch64-neon",
               "armv7-neon": "armv7-neon"}


def _sources(k: kernels.Kernel, isa: str, tmp: Path, extra=()) -> Path:
    ref = next(o for o in ROWS if o.isa == "scalar" and o.tile == k.tile)
    gk = kernels.gemm_kernel(get_target(GEMM_TARGET[isa]))
    defs = {"T_M": k.params["m"], "T_IN": k.params["in"], "T_OUT": k.params["out"], "T_REF_IN": ref.params["in"],
            "T_REF_OUT": ref.params["out"], "T_UK": gk.name, "T_MR": gk.params["mr"], "T_NR": gk.params["nr"],
            "T_NRV": gk.params["vl"], "T_NRH": gk.params.get("hv", 0)}
    if "outc" in k.params:  # the channel-blocked output transform, on blocks of the isa's vector width
        from edgec.codegen.ops.nchwc import LANES
        defs.update(T_OUTC=k.params["outc"], T_VL=LANES[k.isa], T_INC=f"f32_winograd_inc_{k.tile}__{k.isa}",
                    T_1X1=f"f32_nchwc_conv1x1__{k.isa}")
    srcs = ["test_winograd.c", "ec_threadpool.c", *dict.fromkeys([k.file, ref.file, gk.file])]
    if "outc" in k.params:  # the blocked driver's GEMMs: the blocked 1x1 kernel
        srcs.append(f"f32-nchwc/f32-nchwc-{k.isa}.c")
    return build(ISAS[isa], tmp / f"wg_{k.tile}_{isa}", srcs, {a: str(b) for a, b in defs.items()}, tuple(extra))


def _lane_sources(k: kernels.Kernel, isa: str, tmp: Path, extra=()) -> Path:
    """tests/kernels/c/test_winograd_lanes.c for row k: its inc / outc against the scalar row's incb / outcb."""
    from edgec.codegen.ops.nchwc import LANES
    ref = next(o for o in ROWS if o.isa == "scalar" and o.tile == k.tile)
    defs = {"T_M": k.params["m"], "T_VL": LANES[k.isa], "T_INC": f"f32_winograd_inc_{k.tile}__{k.isa}",
            "T_OUTC": k.params["outc"], "T_INCB": f"f32_winograd_incb_{k.tile}__scalar",
            "T_OUTCB": f"f32_winograd_outcb_{k.tile}__scalar"}
    return build(ISAS[isa], tmp / f"wgl_{k.tile}_{isa}", ["test_winograd_lanes.c", k.file, ref.file],
                 {a: str(b) for a, b in defs.items()}, tuple(extra))


def _ok(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    done = re.search(r"(\d+)/(\d+) cases ok", r.stdout)
    assert done and done.group(1) == done.group(2) and int(done.group(2)) > 20, r.stdout[-2000:]


def _built(isa, build):
    """The test program build() makes for isa; where the CPU lacks AVX-512 its sources are still compiled
    warning-free, then the test skips with the reason."""
    if isa == "avx512" and ISAS["avx512"].skip_reason():
        require(ISAS["scalar"])
        build()
        pytest.skip(f"built; not run: {ISAS['avx512'].skip_reason()}")
    require(ISAS[isa])
    return build()


@pytest.mark.parametrize("k,isa", CASES, ids=[f"{k.tile}-{isa}" for k, isa in CASES])
def test_kernels_match_direct_and_reference(k, isa, tmp_path):
    exe = _built(isa, lambda: _sources(k, isa, tmp_path))
    emulated = bool(ISAS[isa].run)
    _ok(run(ISAS[isa], exe, *(["quick"] if emulated else []), timeout=600))


LANE_CASES = [(k, isa) for k, isa in CASES if "outc" in k.params]


@pytest.mark.parametrize("k,isa", LANE_CASES, ids=[f"{k.tile}-{isa}" for k, isa in LANE_CASES])
def test_channel_lane_transforms_match_scalar(k, isa, tmp_path):
    """inc / outc (channels in the lanes) against their portable twins incb / outcb, call by call."""
    _ok(run(ISAS[isa], _built(isa, lambda: _lane_sources(k, isa, tmp_path)), timeout=600))


@pytest.mark.parametrize("tile", ["f23", "f43", "f63"])
def test_channel_lane_transforms_sanitized(tile, tmp_path):
    """The same under ASan + UBSan: inc's border loads and outc's clipped stores stay in their buffers."""
    require(ISAS["avx2"])
    k = next(o for o in ROWS if o.tile == tile and o.isa == "avx2")
    _ok(run(ISAS["avx2"], _lane_sources(k, "avx2", tmp_path, SANITIZE), timeout=600))


@pytest.mark.parametrize("tile,isa", [("f43", "avx2"), ("f63", "scalar"), ("f23", "avx2")])
def test_sanitizers(tile, isa, tmp_path):
    """ASan + UBSan over packing, the blocked driver, the transforms' whole-vector stores into pads."""
    require(ISAS[isa])
    k = next(o for o in ROWS if o.tile == tile and o.isa == isa)
    _ok(run(ISAS[isa], _sources(k, isa, tmp_path, SANITIZE), "quick", timeout=600))


@pytest.mark.parametrize("sanitizer", ["thread", "address,undefined"])
def test_thread_pool(sanitizer, tmp_path):
    """Whole layers through f32_winograd_run on 3 threads (per-thread V/M slices, phase packing)."""
    require(ISAS["avx2"])
    k = next(o for o in ROWS if o.tile == "f43" and o.isa == "avx2")
    exe = _sources(k, "avx2", tmp_path, ("-O1", "-g", f"-fsanitize={sanitizer}"))
    _ok(run(ISAS["avx2"], exe, "pool", timeout=600))


@pytest.mark.parametrize("m", winograd.MATRICES)
def test_matrices_are_exact(m):
    """A^T [(G g) . (B^T d)] is the correlation of d with g, exactly (rational arithmetic)."""
    bt, g, at = winograd.MATRICES[m]
    rng = np.random.default_rng(m)
    d = [Fraction(int(v)) for v in rng.integers(-9, 9, m + 2)]
    w = [Fraction(int(v)) for v in rng.integers(-9, 9, 3)]
    gg = [sum(Fraction(g[i][j]) * w[j] for j in range(3)) for i in range(m + 2)]
    bd = [sum(Fraction(bt[i][j]) * d[j] for j in range(m + 2)) for i in range(m + 2)]
    y = [sum(Fraction(at[r][i]) * gg[i] * bd[i] for i in range(m + 2)) for r in range(m)]
    assert y == [sum(d[r + j] * w[j] for j in range(3)) for r in range(m)]


# -- model level ----------------------------------------------------------------------------------
def _model(path: Path, seed: int = 0) -> Path:
    """3x3 stride-1 layers of every kind Winograd takes: odd channels (13 -> 19), a 11x9 map, pads 1
    and 0 and asymmetric, bias and none, groups (2 x 8 channels), a residual Add and several activations
    fused into the epilogue, batch 2; one strided 3x3 that must stay direct."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def w(name, shape):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:])))
                                             .astype(np.float32), name))
        return name

    def conv(x, y, cin, cout, pads, group=1, bias=True, strides=(1, 1)):
        ins = [x, w(y + "_w", (cout, cin // group, 3, 3))] + ([w(y + "_b", (cout,))] if bias else [])
        nodes.append(helper.make_node("Conv", ins, [y], pads=pads, group=group, strides=list(strides), name=y))

    conv("x", "c1", 13, 19, [1, 1, 1, 1])
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"]))
    conv("r1", "c2", 19, 16, [0, 1, 2, 1], bias=False)  # 11x9 -> 11x9 with asymmetric pads
    nodes.append(helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"]))
    inits += [numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
              numpy_helper.from_array(np.array(0.5, np.float32), "hi")]
    conv("r2", "c3", 16, 16, [1, 1, 1, 1], group=2)
    nodes.append(helper.make_node("Add", ["c3", "r2"], ["a3"]))  # residual
    nodes.append(helper.make_node("Sigmoid", ["a3"], ["r3"]))
    conv("r3", "c4", 16, 21, [0, 0, 0, 0])                      # 11x9 -> 9x7, no padding
    conv("c4", "c5", 21, 8, [1, 1, 1, 1], strides=(2, 2))        # stride 2: direct
    g = helper.make_graph(nodes, "wg", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 13, 11, 9])],
                          [helper.make_tensor_value_info("c4", TensorProto.FLOAT, [2, 21, 9, 7]),
                           helper.make_tensor_value_info("c5", TensorProto.FLOAT, [2, 8, 5, 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("mode", [m for m in (dict(variants.BY_NAME[n].forced)["conv"]  # the registry's F(m,3)
                                            for n in variants.families()["conv3x3"]) if m.startswith("winograd-")])
def test_model_matches_onnxruntime(mode, tmp_path):
    model = _model(tmp_path / "m.onnx")
    r = verify(model, out_dir=tmp_path / "p", cflags=STRICT, options=CompileOptions(conv=mode, threads=2))
    assert r.ok, r.outputs
    b = compile_model(model, tmp_path / "c", options=CompileOptions(conv=mode))
    algos = {l["name"]: l["algo"] for l in b.layers}
    wg = [a for a in algos.values() if a.startswith(f"winograd-{mode.split('-')[1]}")]
    assert len(wg) == 4, algos  # every stride-1 3x3; the strided one direct
    assert not any(a.startswith("winograd") for n, a in algos.items() if "c5" in n), algos


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.parametrize("target", ["aarch64-neon", "armv7-neon"])
def test_model_under_qemu(target, tmp_path):
    t = get_target(target)
    require(ISAS["neon" if target == "aarch64-neon" else "armv7-neon"])
    model = _model(tmp_path / "m.onnx", seed=1)
    for mode in ("winograd-f43", "winograd-f63"):
        r = verify(model, target=target, out_dir=tmp_path / mode, cflags=STRICT, options=CompileOptions(target=t.name,
                                                                                                       conv=mode))
        assert r.ok, (mode, r.outputs)


def _g(c, k, h, groups=1, n=1):
    return dict(N=n, C=c, H=h, W=h, K=k, Ho=h, Wo=h, G=groups, KH=3, KW=3, SH=1, SW=1, DH=1, DW=1, PT=1, PL=1)


def test_cost_model_choices():
    t = get_target("x86_64-avx2")

    def pick(g):
        nr = kernels.igemm_kernel(t).params["nr"]
        cols = -(-((g["Ho"] - 1) * (g["Wo"] + 2) + g["Wo"]) // nr) * nr
        return winograd.choose(t, g, cols, "s1")

    dense = pick(_g(128, 128, 28))
    assert dense.algo == "winograd-f43" and "F(4,3)" in dense.why and "faster than direct" in dense.why
    assert pick(_g(64, 64, 56)).algo == "winograd-f43"
    first = pick(_g(3, 16, 64))  # an RGB input layer: the transforms would dominate
    assert first.algo == "direct" and "not winograd" in first.why
    forced = costmodel.choose_conv3x3(t, _g(3, 16, 64), 6, 16, 1024, "s1", "winograd-f63")
    assert forced.algo == "winograd-f63"
    assert costmodel.choose_conv3x3(t, _g(128, 128, 28), 6, 16, 848, "s1", "direct").algo == "direct"


def _dense_stack(path: Path, c: int = 128, h: int = 28) -> Path:
    """Two 3x3 conv + ReLU layers, c channels at h x h (the dense stack of docs/benchmarks.md)."""
    rng = np.random.default_rng(0)
    inits, nodes, x = [], [], "x"
    for i in range(2):
        inits.append(numpy_helper.from_array((rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32),
                                             f"w{i}"))
        nodes += [helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1], name=f"conv{i}"),
                  helper.make_node("Relu", [f"c{i}"], [f"y{i}"])]
        x = f"y{i}"
    g = helper.make_graph(nodes, "stack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, c, h, h])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def test_explain_names_winograd(tmp_path):
    """`edgec compile --explain` on AVX2: the cost model's F(4,3) and its reason; EDGEC_CONV=direct turns it off."""
    model = _dense_stack(tmp_path / "m.onnx")
    env = {**os.environ, "COLUMNS": "300"}
    env.pop("EDGEC_CONV", None)
    r = subprocess.run([sys.executable, "-m", "edgec", "compile", str(model), "-o", str(tmp_path / "p"), "--target",
                        "x86_64-avx2", "--explain"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "winograd-f43" in r.stdout and "winograd F(4,3):" in r.stdout and "fewer multiplies" in r.stdout, r.stdout
    r = subprocess.run([sys.executable, "-m", "edgec", "compile", str(model), "-o", str(tmp_path / "d"), "--target",
                        "x86_64-avx2", "--explain"], capture_output=True, text=True,
                       env={**env, "EDGEC_CONV": "direct"}, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "gemm-s1" in r.stdout and "EDGEC_CONV=direct" in r.stdout and "winograd-f" not in r.stdout, r.stdout
    r = subprocess.run([sys.executable, "-m", "edgec", "compile", str(model), "-o", str(tmp_path / "e")],
                       capture_output=True, text=True, env={**env, "EDGEC_CONV": "fast"}, timeout=300)
    assert r.returncode != 0 and "EDGEC_CONV='fast' is not one of" in r.stderr + r.stdout
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_resnet50_forced_winograd(onnx_light, tmp_path):
    """ResNet-50 (the onnx wheel's light model, random variance-preserving weights as in test_e2e) with
    every 3x3 stride-1 conv on F(4,3): within the e2e tolerance of onnxruntime."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
    from test_e2e import randomized

    model = randomized(onnx_light("resnet50"), tmp_path / "r50.onnx")
    r = verify(model, out_dir=tmp_path / "p", cflags=STRICT, rtol=1e-3, atol=1e-5,
               options=CompileOptions(conv="winograd-f43"))
    assert r.ok, r.outputs
    assert r.outputs[0]["cosine"] > 0.99999 and r.outputs[0]["argmax_agreement"] == 1.0
