"""Conv / Gemm / MatMul emitters against onnxruntime: random single-op branches (every algorithm,
padding mode, stride, dilation, group count, epilogue) in one model per target, built with
-Wall -Wextra -Werror, run natively or under qemu."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen import build_project, compile_model
from edgec.codegen.targets import get_target

STRICT = "-O2 -Wall -Wextra -Werror"
RNG = np.random.default_rng(7)


class G:
    """Tiny graph builder: inputs, initializers, nodes, outputs."""

    def __init__(self):
        self.nodes, self.inits, self.inputs, self.outputs, self.n = [], [], [], [], 0

    def input(self, name, shape):
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        return name

    def const(self, arr):
        self.n += 1
        self.inits.append(numpy_helper.from_array(arr.astype(np.float32), f"c{self.n}"))
        return f"c{self.n}"

    def node(self, op, ins, **attrs):
        self.n += 1
        out = f"t{self.n}"
        self.nodes.append(helper.make_node(op, ins, [out], name=f"{op}_{self.n}", **attrs))
        return out

    def conv(self, x, cin, cout, k, group=1, bias=True, dims=2, **attrs):
        kk = k if isinstance(k, tuple) else (k,) * dims
        w = self.const(RNG.standard_normal((cout, cin // group, *kk)) / np.sqrt(cin // group * np.prod(kk)))
        ins = [x, w] + ([self.const(RNG.standard_normal(cout))] if bias else [])
        return self.node("Conv", ins, group=group, **attrs)

    def out(self, t):
        vi = helper.make_tensor_value_info(t, TensorProto.FLOAT, [])
        vi.type.tensor_type.ClearField("shape")  # rank unknown: shape inference fills it in
        self.outputs.append(vi)

    def save(self, path):
        def model(outputs):
            m = helper.make_model(helper.make_graph(self.nodes, "g", self.inputs, outputs, self.inits),
                                  opset_imports=[helper.make_opsetid("", 14)])
            m.ir_version = 8
            return m
        known = {vi.name: vi for vi in onnx.shape_inference.infer_shapes(model([])).graph.value_info}
        m = model([known[o.name] for o in self.outputs])
        onnx.save(m, path)
        return path


def conv_model(path):
    g = G()
    x = g.input("x", [1, 16, 11, 13])
    g.out(g.node("Relu", [g.conv(x, 16, 24, 3, pads=[1, 1, 1, 1])]))                       # dense 3x3
    g.out(g.node("Clip", [g.conv(x, 16, 20, 1), g.const(np.array(0.0)), g.const(np.array(6.0))]))  # 1x1
    g.out(g.node("LeakyRelu", [g.conv(x, 16, 16, 3, group=2, strides=[2, 2], pads=[0, 1, 2, 1], dilations=[2, 1])], alpha=0.2))
    g.out(g.node("HardSigmoid", [g.conv(x, 16, 32, 3, group=4, strides=[2, 2], auto_pad="SAME_UPPER")]))
    g.out(g.node("Relu", [g.node("Add", [g.conv(x, 16, 16, 3, group=8, pads=[1, 1, 1, 1]), x])]))  # residual
    g.out(g.node("HardSwish", [g.conv(x, 16, 16, 3, group=16, strides=[2, 2], auto_pad="SAME_LOWER")]))
    g.out(g.node("Sigmoid", [g.conv(x, 16, 16, 5, group=16, pads=[2, 2, 2, 2])]))           # dw 5x5
    g.out(g.node("Tanh", [g.conv(x, 16, 16, (7, 3), group=16, pads=[3, 1, 3, 1], dilations=[1, 2])]))
    c = g.conv(x, 16, 48, 3, group=16, auto_pad="VALID")                                      # Kpg = 3
    g.out(g.node("Mul", [c, g.node("Sigmoid", [c])]))                                        # SiLU
    g.out(g.conv(x, 16, 16, 1, group=2, strides=[2, 2], bias=False))
    g.out(g.node("HardSwish", [g.conv(x, 16, 32, 3, group=2, pads=[1, 1, 1, 1])]))   # Kpg 16: T_O tiles
    g.out(g.conv(x, 16, 33, 5, strides=[1, 2], pads=[2, 0, 1, 3]))
    x2 = g.input("x2", [2, 8, 9, 9])
    g.out(g.node("Relu", [g.conv(x2, 8, 8, 3, group=8, pads=[1, 1, 1, 1])]))
    g.out(g.conv(x2, 8, 12, 3, group=4, strides=[2, 2], pads=[1, 1, 1, 1]))
    g.out(g.node("Add", [g.conv(x2, 8, 8, 3, pads=[1, 1, 1, 1]), x2]))
    x4 = g.input("x4", [1, 8, 6, 40])                                       # wide rows: stride-1 indirect GEMM
    g.out(g.node("Clip", [g.conv(x4, 8, 13, 3, pads=[1, 1, 1, 1]), g.const(np.array(-1.0)), g.const(np.array(1.0))]))
    g.out(g.node("Add", [g.conv(x4, 8, 8, 3, pads=[2, 1, 2, 1], dilations=[2, 1]), x4]))
    g.out(g.node("Relu", [g.node("Add", [g.conv(x4, 8, 8, 3, group=2, pads=[1, 1, 1, 1]), x4])]))  # GSPC along ow
    x5 = g.input("x5", [1, 4, 20, 21])                                       # depthwise, plane kernels
    g.out(g.node("Relu", [g.conv(x5, 4, 4, 3, group=4, pads=[1, 1, 1, 1])]))
    g.out(g.conv(x5, 4, 4, 3, group=4, pads=[1, 1, 1, 1], strides=[2, 1]))          # SH != SW
    g.out(g.node("Add", [g.conv(x5, 4, 4, 3, group=4, pads=[1, 2, 1, 2], dilations=[1, 2], bias=False), x5]))
    x3 = g.input("x3", [1, 6, 29])                                                            # Conv1D
    g.out(g.conv(x3, 6, 10, 3, dims=1, pads=[1, 1], strides=[2], dilations=[2]))
    g.out(g.node("Relu", [g.conv(x3, 6, 6, 5, group=6, dims=1, auto_pad="SAME_UPPER")]))
    return g.save(path)


def gemm_model(path):
    g = G()
    a = g.input("a", [3, 37])
    w = g.const(RNG.standard_normal((19, 37)))
    g.out(g.node("Relu", [g.node("Gemm", [a, w, g.const(RNG.standard_normal(19))], transB=1, alpha=0.5, beta=2.0)]))
    at = g.input("at", [37, 5])
    g.out(g.node("Gemm", [at, g.const(RNG.standard_normal((37, 33))), g.const(RNG.standard_normal((5, 33)))], transA=1))
    g.out(g.node("Gemm", [a, g.const(RNG.standard_normal((37, 7))), g.const(RNG.standard_normal((3, 1)))]))
    b1, b2 = g.input("b1", [2, 3, 7, 17]), g.input("b2", [3, 17, 9])
    g.out(g.node("MatMul", [b1, b2]))                                        # both run-time, broadcast
    b3 = g.input("b3", [2, 5, 40])
    g.out(g.node("MatMul", [b3, g.const(RNG.standard_normal((40, 13)))]))   # shared constant B
    g.out(g.node("MatMul", [g.const(RNG.standard_normal((13, 40))), g.input("b4", [2, 40, 6])]))
    g.out(g.node("MatMul", [g.input("v", [17]), g.const(RNG.standard_normal((17, 4)))]))  # 1-D
    # all-run-time Gemm: alpha/beta and a broadcast C applied after the GEMM, then the fused Relu + residual
    ga, gb, gc, gr = g.input("ga", [6, 11]), g.input("gb", [9, 11]), g.input("gc", [9]), g.input("gr", [6, 9])
    g.out(g.node("Add", [g.node("Relu", [g.node("Gemm", [ga, gb, gc], transB=1, alpha=0.7, beta=-1.5)]), gr]))
    g.out(g.node("Gemm", [ga, gb, g.input("gs", [])], transB=1, alpha=2.0))                 # scalar run-time C
    return g.save(path)


def run_against_ort(model, target_name, tmp_path, threads=1):
    t = get_target(target_name)
    if t.qemu and (shutil.which(t.cc) is None or shutil.which(t.qemu[0]) is None):
        pytest.skip(f"{t.cc} or {t.qemu[0]} is not installed")
    if not t.qemu and not t.runs_natively():
        pytest.skip(f"this CPU cannot run {target_name} ({', '.join(t.features)})")
    b = compile_model(model, tmp_path / "p", target=target_name, threads=threads)
    exe = build_project(b.dir, target_name, cflags=STRICT)["runner"]
    sess = ort.InferenceSession(str(model))
    feeds, files = {}, []
    for i, inp in enumerate(sess.get_inputs()):
        feeds[inp.name] = RNG.standard_normal(inp.shape).astype(np.float32)
        np.save(tmp_path / f"in{i}.npy", feeds[inp.name])
        files.append(str(tmp_path / f"in{i}.npy"))
    r = subprocess.run([*(t.qemu or []), str(exe), *files, "--out", str(tmp_path)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for i, want in enumerate(sess.run(None, feeds)):
        got = np.load(tmp_path / f"output_{i}.npy")
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"output {i} {b.layers}")
    return b


@pytest.mark.parametrize("target", ["native", "x86_64-avx2", "generic", "aarch64-neon",
                                    "armv7-neon"])
def test_conv_emitter_matches_onnxruntime(tmp_path, target):
    if target != "native" and get_target("native").name == target:
        pytest.skip(f"{target} is this CPU's native target: run as native")
    b = run_against_ort(conv_model(tmp_path / "conv.onnx"), target, tmp_path)
    algos = {l["algo"].split("-")[0] for l in b.layers if l["op"] == "Conv"}
    # Winograd may win a small stride-1 layer by the cost estimate; the direct emitters must all still run
    assert {"gemm", "gspc", "dwconv"} <= algos <= {"gemm", "gspc", "dwconv", "winograd"}, b.layers
    assert any("-s1-" in l["algo"] for l in b.layers), b.layers
    if get_target(target).f32_lanes > 1:  # GSPC tiles of one group and of several; both depthwise kernels
        gspc = {l["algo"].split("-")[1] for l in b.layers if l["algo"].startswith("gspc")}
        assert any(t.startswith("o") and t != "ow" for t in gspc), gspc
        assert any(t.startswith("g") for t in gspc), gspc  # Kpg = 2 layers share vectors
        assert {l["algo"].split("-")[1][0] for l in b.layers if l["algo"].startswith("dwconv")} >= {"c", "3"}


# the kernel-table op (codegen/kernels.py) each forced value of a registry family runs on
KERNEL_OP = {("gspc", "tile"): "gspc", ("gspc", "ow"): "gspc_ow", ("gspc", "mg"): "gspc_mg", ("gspc", "gemm"): "gemm",
             ("dw", "plane"): "dwconv", ("dw", "cb"): "dwconv_cb"}


def _family_modes(family: str) -> list[str]:
    """The forced values of a variant registry family (codegen/variants.py): every one must have a kernel op."""
    from edgec.codegen import variants

    modes = [dict(variants.BY_NAME[n].forced)[family] for n in variants.families()[family]]
    assert all((family, m) in KERNEL_OP for m in modes), f"registry {family} variants without a test: {modes}"
    return modes


def _layer_ops(b, field_prefix: str) -> list[str]:
    from edgec.codegen import kernels

    ops = {k.name: k.op for k in kernels.KERNELS}
    return [ops[l["details"]["kernel"]] for l in b.layers if l["algo"].startswith(field_prefix)]


@pytest.mark.parametrize("mode", _family_modes("gspc"))
def test_conv_emitter_gspc_families(tmp_path, monkeypatch, mode):
    """Each GSPC row-kernel family of the registry, forced with EDGEC_GSPC, on every grouped layer it can run;
    gemm: one packed GEMM per group."""
    monkeypatch.setenv("EDGEC_GSPC", mode)
    b = run_against_ort(conv_model(tmp_path / "conv.onnx"), "native", tmp_path)
    ops = _layer_ops(b, "gemm-grouped" if mode == "gemm" else "gspc")
    assert ops.count(KERNEL_OP[("gspc", mode)]) >= 2, ops


@pytest.mark.parametrize("mode", _family_modes("dw"))
def test_conv_emitter_dwconv_families(tmp_path, monkeypatch, mode):
    """Each depthwise kernel family of the registry (plane: 3x3/5x5/kxk, cb: c<lanes>), forced with EDGEC_DW,
    on every depthwise layer, strided ones too."""
    monkeypatch.setenv("EDGEC_DW", mode)
    b = run_against_ort(conv_model(tmp_path / "conv.onnx"), "native", tmp_path)
    ops = _layer_ops(b, "dwconv")
    assert len(ops) >= 5 and set(ops) == {KERNEL_OP[("dw", mode)]}, ops


def test_conv_emitter_threads(tmp_path):
    run_against_ort(conv_model(tmp_path / "conv.onnx"), "native", tmp_path, threads=2)


def pointwise_model(path):
    """NCHW 1x1 convs on the packed-panel driver: few output channels (panels packed by the first strip's kernel)
    and many (copied), maps of several panels with a narrower last one, a group's rows, a residual, batch 2."""
    g = G()
    x = g.input("x", [2, 40, 9, 23])
    g.out(g.node("Relu", [g.conv(x, 40, 37, 1)]))
    g.out(g.node("Add", [g.conv(x, 40, 40, 1), x]))
    g.out(g.node("HardSwish", [g.conv(x, 40, 130, 1)]))
    g.out(g.conv(x, 40, 26, 1, group=2, bias=False))
    return g.save(path)


@pytest.mark.parametrize("target", ["native", "x86_64-avx2", "aarch64-neon", "armv7-neon"])
def test_pointwise_packing_kernel_matches_onnxruntime(tmp_path, monkeypatch, target):
    """The packing twin of the GEMM microkernel (f32-gemm-tmpl.h PACKB) inside the 1x1 driver, against
    onnxruntime: on the layers with up to conv._PACKB_ROWS output channels a group, not on the 130-channel one."""
    monkeypatch.setenv("EDGEC_LAYOUT", "nchw")
    monkeypatch.setenv("EDGEC_GEMM1X1", "pack")
    b = run_against_ort(pointwise_model(tmp_path / "p.onnx"), target, tmp_path, threads=2)
    convs = [l for l in b.layers if l["op"] == "Conv"]
    assert [l["details"].get("packb") for l in convs] == [True, True, False, True], b.layers
    assert (b.dir / "model.c").read_text().count("f32_gemm_packb_ukernel_") == 3


def strided_model(path):
    """Dense strided convs with windows (conv.strided_direct) and grouped strided ones whose groups are several
    vectors wide: tails of a multi-vector T_O tile (70 = 2 x 32 + 6, 40 = 32 + 8, 36 of a 48-lane tile), odd
    rows, asymmetric pads and strides, a residual, batch 2."""
    g = G()
    x = g.input("x", [2, 32, 15, 17])
    g.out(g.node("Relu", [g.conv(x, 32, 70, 3, strides=[2, 2], pads=[1, 1, 1, 1])]))
    g.out(g.node("HardSwish", [g.conv(x, 32, 40, (5, 3), strides=[2, 3], pads=[2, 0, 1, 2])]))
    g.out(g.conv(x, 32, 72, 3, group=2, strides=[2, 2], pads=[0, 1, 1, 0], bias=False))
    y = g.conv(x, 32, 64, 3, strides=[2, 2], pads=[1, 1, 1, 1])
    g.out(g.node("Add", [g.conv(y, 64, 64, 3, group=2, strides=[2, 2], pads=[1, 1, 1, 1]),
                         g.input("r", [2, 64, 4, 5])]))
    return g.save(path)


@pytest.mark.parametrize("target,threads", [("native", 1), ("native", 3), ("x86_64-avx2", 1), ("aarch64-neon", 1),
                                            ("armv7-neon", 1)])
def test_strided_direct_matches_onnxruntime(tmp_path, monkeypatch, target, threads):
    """EDGEC_GSPC=tile: every strided conv with a window on GSPC's row kernels, dense ones as one group, against
    onnxruntime; the wide tiles (several vectors a tile) run where the target has them, with a narrower kernel
    on the last tile of a group (row_tail) where that tile would be mostly padding."""
    from edgec.codegen import kernels

    monkeypatch.setenv("EDGEC_GSPC", "tile")
    b = run_against_ort(strided_model(tmp_path / "s.onnx"), target, tmp_path, threads=threads)
    convs = [l for l in b.layers if l["op"] == "Conv"]
    assert len(convs) == 5 and all(l["algo"].startswith("gspc-o") for l in convs), b.layers
    wide = {k.name for k in kernels.usable(get_target(target), "gspc") if k.params.get("gv", 1) > 1}
    assert not wide or wide & {l["details"]["kernel"] for l in convs}, (wide, b.layers)
    # a group's last tile on a kernel of fewer vectors where the wide tile would be mostly padding (70, 40, 36)
    assert not wide or any("tail" in l["details"] for l in convs), b.layers


def test_strided_direct_by_estimate():
    """Unforced, a dense 3x3 stride-2 conv runs the row kernel where its estimate beats the spatial-pack GEMM's
    (Zen 5, one layer, 1 thread: 128ch 28x28 0.307 ms GEMM, 0.235 the two-zmm tile); 1x1 and stride-1 convs
    never do, and EDGEC_GSPC=gemm keeps the GEMM."""
    from edgec.codegen.options import CompileOptions, using
    from edgec.codegen.ops.conv import strided_direct

    def geom(c, hw, s, k=3):
        ho = (hw + 2 * (k // 2) - k) // s + 1
        return dict(N=1, C=c, H=hw, W=hw, K=c, Ho=ho, Wo=ho, G=1, KH=k, KW=k, SH=s, SW=s, DH=1, DW=1,
                    PT=k // 2, PL=k // 2)

    t = get_target("x86_64-avx512")
    assert strided_direct(t, geom(128, 28, 2)) and strided_direct(t, geom(64, 56, 2))
    # working sets of 3.6-5 L1s: each doubling past L1 adds a fixed share (Zen 5, GEMM -> row kernel: 192ch
    # 28x28 0.640 -> 0.513 ms, 256ch 14x14 0.271 -> 0.232); a share per L1's worth kept both on the GEMM
    assert strided_direct(t, geom(192, 28, 2)) and strided_direct(t, geom(256, 14, 2))
    assert not strided_direct(t, geom(128, 28, 1)) and not strided_direct(t, geom(256, 28, 2, k=1))
    with using(CompileOptions(gspc="gemm")):
        assert not strided_direct(t, geom(128, 28, 2))
    # a tuning database's measured pick wins over the estimate (costmodel.measured)
    import json
    import tempfile
    from edgec.codegen import costmodel
    key = costmodel.layer_key("gspc", C=128, OC=128, g=1, k="3x3", s=2, px=196)
    with tempfile.TemporaryDirectory() as d:
        db = f"{d}/db.json"
        with open(db, "w") as fh:
            json.dump({t.name: {key: "gemm"}}, fh)
        with using(CompileOptions(tuning_db=db)):
            assert not strided_direct(t, geom(128, 28, 2)) and strided_direct(t, geom(64, 56, 2))


def test_gspc_tile_width():
    """The T_O tile: one vector a tile loads a broadcast per FMA, so two vectors win wherever they pad no more
    lanes (Zen 5, stride 2: 1.1-1.25x), and even where they pad a third more (192ch 28x28 g=8, Kpg 24: 0.107 ms
    two zmm against 0.123 one); three where two would pad (Kpg 48)."""
    from edgec.codegen import kernels
    from edgec.codegen.costmodel import gspc_tile_factor

    def tile(target, kpg, wo):
        return kernels.gspc_kernel(get_target(target), kpg, wo)[1]

    assert [tile("x86_64-avx512", k, 14) for k in (8, 16, 24, 32, 48, 64, 128)] == [8, 16, 32, 32, 48, 32, 32]
    assert tile("x86_64-avx2", 64, 28) == 16 and tile("x86_64-avx2", 8, 28) == 8
    assert tile("aarch64-neon", 32, 14) == 8 and tile("aarch64-neon", 4, 14) == 4
    # a block of b pixels and gv vectors: FMA-bound from two vectors on wide rows, latency-bound on short blocks
    assert gspc_tile_factor(14, 14, 28, 1) > 1.1 and gspc_tile_factor(14, 14, 14, 2) == 1.0
    assert gspc_tile_factor(14, 2, 2, 2) > gspc_tile_factor(14, 7, 14, 2)


@pytest.mark.parametrize("target", ["native", "generic", "aarch64-neon"])
def test_gemm_matmul_emitters_match_onnxruntime(tmp_path, target):
    run_against_ort(gemm_model(tmp_path / "gemm.onnx"), target, tmp_path)


def test_gspc_family_is_the_cheapest_estimate():
    """The GSPC row-kernel family is the one costmodel.gspc_estimate ranks first: a full-width T_O tile with no
    idle lanes over the along-ow kernel (measured 2.1x faster: AVX2, Kpg 8), two groups per ymm over a 4-lane
    tile or the along-ow kernel at Kpg 4 (tuning measured 3.2x the along-ow kernel: AVX2, 128ch g=32)."""
    from edgec.codegen import kernels
    from edgec.codegen.ops.conv import gspc_tiles

    def geo(c, k, groups, hw=28):
        return dict(N=1, C=c, H=hw, W=hw, K=k, Ho=hw, Wo=hw, G=groups, KH=3, KW=3, SH=1, SW=1, DH=1, DW=1, PT=1,
                    PL=1)

    def algo(target, c, k, groups):
        return gspc_tiles(get_target(target), geo(c, k, groups))[0].tile

    for target, c, groups in (("x86_64-avx2", 128, 16), ("x86_64-avx2", 64, 16), ("x86_64-avx2", 128, 32),
                              ("x86_64-avx512", 128, 16), ("aarch64-neon", 64, 16)):
        est = kernels._gspc_estimates(get_target(target), geo(c, c, groups))
        fam = {"gspc": "tile", "gspc_ow": "ow", "gspc_mg": "mg"}[gspc_tiles(get_target(target), geo(c, c, groups))[0].op]
        assert est[fam] == min(est.values()), (target, c, groups, est)
    assert algo("x86_64-avx2", 128, 128, 16) == "o8"      # Kpg 8 fills an 8-lane tile
    assert algo("x86_64-avx2", 64, 64, 16) == "g2x4"      # Kpg 4: two groups fill a ymm
    assert algo("x86_64-avx512", 128, 128, 16) != "o8"    # Kpg 8 on a 16-lane ISA: groups share vectors


def test_grouped_3x3_winograd_or_gspc_by_estimate():
    """AVX2, 1 thread, thread CPU time per layer (docs/benchmarks.md): 128ch 28x28 g=8 F(4,3) 0.31 ms against
    GSPC o8 0.45; g=16 GSPC o8 0.29 against F(4,3) 0.48; 256ch 14x14 g=8 F(2,3) 0.27 against F(4,3) 0.28 and
    GSPC 0.41 (F(2,3)'s transforms do about half of F(4,3)'s arithmetic a value)."""
    from edgec.codegen import costmodel, kernels
    from edgec.codegen.ops.conv import direct_path_3x3

    t = get_target("x86_64-avx2")
    gk = kernels.gemm_kernel(t)

    def pick(c, hw, groups):
        g = dict(N=1, C=c, H=hw, W=hw, K=c, Ho=hw, Wo=hw, G=groups, KH=3, KW=3, SH=1, SW=1, DH=1, DW=1, PT=1, PL=1)
        return costmodel.choose_conv3x3(t, g, gk.params["mr"], gk.params["nr"], *direct_path_3x3(t, g)).algo

    assert pick(128, 28, 8) == "winograd-f43"
    assert pick(128, 28, 16) == "direct"
    assert pick(256, 14, 8) == "winograd-f23"


@pytest.mark.parametrize("target", ["aarch64-neon"])
def test_grouped_conv_as_gemm_per_group_matches_onnxruntime(tmp_path, target):
    """EDGEC_GSPC=gemm (a tuning record's gspc-gemm) on a foreign target, batch 2: every grouped conv with a window
    runs one packed GEMM per group, epilogues and residuals fused (native: test_conv_emitter_gspc_families)."""
    t = get_target(target)
    if t.qemu and (shutil.which(t.cc) is None or shutil.which(t.qemu[0]) is None):
        pytest.skip(f"{t.cc} or {t.qemu[0]} is not installed")
    from edgec.codegen.options import CompileOptions

    g = G()
    x = g.input("x", [2, 12, 11, 13])
    g.out(g.node("Relu", [g.conv(x, 12, 18, 3, group=3, strides=[2, 2], pads=[1, 1, 1, 1])]))
    g.out(g.node("Add", [g.conv(x, 12, 12, 3, group=2, pads=[1, 1, 1, 1]), x]))      # stride 1, residual
    g.out(g.conv(x, 12, 8, (3, 5), group=4, strides=[1, 2], pads=[2, 0, 1, 3], dilations=[2, 1]))
    model = g.save(tmp_path / "g.onnx")
    b = compile_model(model, tmp_path / "p", options=CompileOptions(target=target, gspc="gemm"))
    algos = [l["algo"] for l in b.layers if l["op"] == "Conv"]
    assert len(algos) == 3 and all(a.startswith("gemm-grouped-") for a in algos), algos
    exe = build_project(b.dir, target, cflags=STRICT)["runner"]
    sess = ort.InferenceSession(str(model))
    feed = RNG.standard_normal((2, 12, 11, 13)).astype(np.float32)
    np.save(tmp_path / "in.npy", feed)
    r = subprocess.run([*(t.qemu or []), str(exe), str(tmp_path / "in.npy"), "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for i, want in enumerate(sess.run(None, {"x": feed})):
        np.testing.assert_allclose(np.load(tmp_path / f"output_{i}.npy"), want, rtol=1e-4, atol=1e-4)


def test_grouped_conv_gemm_or_gspc_by_estimate():
    """Many channels a group: one GEMM per group where its estimate is lower (Zen 3, 1 thread, thread CPU ms,
    bench_gspc.py --variants: 576ch 14x14 stride 2 g=2 GEMM 2.28 against GSPC 4.01); few: GSPC (64ch 56x56
    stride 2 g=8 GSPC 0.14 against 0.36). Stride 1 with hundreds a group: Winograd over a GSPC whose tile
    outgrows L1 (576ch 14x14 g=2 F(2,3) 5.1 ms a layer against GSPC 10.0)."""
    from edgec.codegen import costmodel, kernels
    from edgec.codegen.ops.conv import direct_path_3x3, grouped_gemm

    def geom(c, hw, s, groups):
        ho = (hw - 1) // s + 1
        return dict(N=1, C=c, H=hw, W=hw, K=c, Ho=ho, Wo=ho, G=groups, KH=3, KW=3, SH=s, SW=s, DH=1, DW=1, PT=1,
                    PL=1)

    for name in ("x86_64-avx2", "native"):
        t = get_target(name)
        if t.isa != "avx2":
            continue
        assert grouped_gemm(t, geom(576, 14, 2, 2))
        assert not grouped_gemm(t, geom(64, 56, 2, 8)) and not grouped_gemm(t, geom(256, 14, 2, 8))
        mr, nr = kernels.gemm_kernel(t).params["mr"], kernels.gemm_kernel(t).params["nr"]
        g = geom(576, 14, 1, 2)
        assert costmodel.choose_conv3x3(t, g, mr, nr, *direct_path_3x3(t, g)).algo.startswith("winograd")
    # two-zmm tiles (AVX-512, 48 KB L1d): the same 576ch g=2 layer on the row kernel (Zen 5, 1 thread: GEMM per
    # group 0.857 ms, o32 0.583), its working set 5.4 L1s; the AVX2 one-vector tile above stays on the GEMM
    assert not grouped_gemm(get_target("x86_64-avx512"), geom(576, 14, 2, 2))


def test_winograd_weight_stream_picks():
    """U streams during the GEMMs (costmodel._WG_BYTE). Forced paths, 4-layer stacks, thread CPU ms on Zen 3
    (docs/benchmarks.md, GSPC section): 512ch 7x7 g=8 F(2,3) 1.38-1.78 against GSPC 1.97-2.54; 576ch 14x14 g=2
    F(2,3) 19.5, F(4,3) 23.8, GSPC 37.9; 256ch 14x14 g=4 F(2,3) 1.63-1.72, F(4,3) 2.25-2.71. Dense 512ch 7x7 (16.8 MB
    of U): F(2,3) in one tile block, U streamed once (winograd.blocking), 3.0 ms a layer in ResNet-50 against 4.1 on
    the transposed GEMM (1 thread). A device's learned wino-byte moves the estimate."""
    from edgec.codegen import costmodel, kernels, options
    from edgec.codegen.ops.conv import direct_path_3x3
    from edgec.codegen.options import CompileOptions

    t = get_target("x86_64-avx2")
    mr, nr = kernels.gemm_kernel(t).params["mr"], kernels.gemm_kernel(t).params["nr"]

    def geom(c, hw, groups):
        return dict(N=1, C=c, H=hw, W=hw, K=c, Ho=hw, Wo=hw, G=groups, KH=3, KW=3, SH=1, SW=1, DH=1, DW=1, PT=1, PL=1)

    def pick(c, hw, groups):
        g = geom(c, hw, groups)
        return costmodel.choose_conv3x3(t, g, mr, nr, *direct_path_3x3(t, g)).algo

    assert pick(512, 7, 8) == "winograd-f23"
    assert pick(576, 14, 2) == "winograd-f23"
    assert pick(256, 14, 4) == "winograd-f23"
    assert pick(512, 7, 1) == "winograd-f23"
    g = geom(256, 14, 1)
    base = costmodel.winograd_estimate(t, g, 4, mr, nr)
    assert base["stream"] > base["gemm"]  # 9.4 MB of U over 18 tile rows: the pass over U bounds the GEMMs
    with options.using(CompileOptions(learned=(("wino-byte", 1.0),))):
        low = costmodel.winograd_estimate(t, g, 4, mr, nr)
    assert low["cost"] < base["cost"] and low["stream"] == pytest.approx(base["stream"] / costmodel._WG_BYTE)


@pytest.mark.parametrize("target", ["x86_64-avx512", "x86_64-avx2", "aarch64-neon"])
def test_winograd_u_passes_on_two_threads(target):
    """At 2 threads the blocked driver's passes over U take 2 ** -0.5 of their time (costmodel._U_THREADS), the
    NCHW driver's all of it. Zen 5, 2 threads, 4-layer stacks, old / new alternating: dense 512ch 7x7 on blocked
    F(2,3) 0.86-0.88x the transposed GEMM's time, dense 128ch 8x8 0.44x the GEMM's; ResNet-50's 14x14 layers on
    F(4,3) (U wholly divided) 1.03x F(2,3)'s model time; grouped 512ch 7x7 g=2 on NCHW F(2,3) 1.11x GSPC's."""
    from edgec.codegen import costmodel, kernels, options
    from edgec.codegen.ops.conv import direct_path_3x3
    from edgec.codegen.options import CompileOptions

    t = get_target(target)
    mr, nr = kernels.gemm_kernel(t).params["mr"], kernels.gemm_kernel(t).params["nr"]

    def pick(c, hw, groups, threads):
        g = dict(N=1, C=c, H=hw, W=hw, K=c, Ho=hw, Wo=hw, G=groups, KH=3, KW=3, SH=1, SW=1, DH=1, DW=1, PT=1, PL=1)
        with options.using(CompileOptions(target=target, threads=threads)):
            return costmodel.choose_conv3x3(t, g, mr, nr, *direct_path_3x3(t, g)).algo

    for threads in (1, 2):
        assert pick(512, 7, 1, threads) == "winograd-f23"
        assert pick(128, 8, 1, threads) == "winograd-f23"
    assert pick(256, 14, 1, 2) == "winograd-f23"  # F(4,3)'s 2.25x the U still costs on two threads
    assert pick(512, 7, 2, 2) == "direct"
    e = costmodel.winograd_estimate(t, dict(N=1, C=512, H=7, W=7, K=512, Ho=7, Wo=7, G=1, KH=3, KW=3, SH=1, SW=1,
                                            DH=1, DW=1, PT=1, PL=1), 2, mr, nr)
    nchw, blocked = costmodel._winograd_at(e, 2), costmodel._winograd_at(e, 2, True)
    assert blocked["cost"] < nchw["cost"] and costmodel._winograd_at(e, 1, True) == e
