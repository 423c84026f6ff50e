"""Ops split among threads (EmitContext.parallel, codegen/ops/_par.py): one model with every such op on
odd shapes above the size threshold, built with -Werror, run at 1, 2 and 3 threads: the same bits at
every thread count, equal to onnxruntime, and each op really emitted as a split layer. Also a
ThreadSanitizer build of it, and a tiny op staying serial."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen import build_project, compile_model
from edgec.codegen.targets import get_target
from edgec.codegen.verifier import onnxruntime_outputs, run_binary

STRICT = "-O2 -Wall -Wextra -Werror"
RNG = np.random.default_rng(12)
X = [1, 7, 61, 67]  # 28609 floats: above the hand-off threshold (ops/_par.py), no dimension a power of two

# ops that must come out as split layers (graph below)
SPLIT_OPS = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Add", "Mul", "Sigmoid", "Exp",
             "Relu", "Softmax", "LayerNormalization", "InstanceNormalization", "BatchNormalization", "Concat",
             "Split", "Transpose", "Slice", "ReduceMean", "ArgMax", "Resize", "Cast", "Pad", "Tile"}


def threads_model(path):
    nodes, inits, outs = [], [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(op, ins, n_out=1, **attrs):
        names = [f"{op.lower()}{len(nodes)}_{k}" for k in range(n_out)]
        nodes.append(helper.make_node(op, ins, names, name=f"{op}_{len(nodes)}", **attrs))
        for n in names:
            outs.append(n)
        return names if n_out > 1 else names[0]

    c = X[1]
    node("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    node("AveragePool", ["x"], kernel_shape=[3, 2], strides=[1, 2], pads=[1, 0, 1, 1], count_include_pad=0)
    node("GlobalAveragePool", ["x"])
    node("GlobalMaxPool", ["x"])
    node("Add", ["x", const("bias", RNG.standard_normal((1, c, 1, 1)).astype(np.float32))])
    node("Mul", ["x", "x"])
    node("Sigmoid", ["x"])
    node("Exp", ["x"])
    node("Relu", ["x"])
    node("Softmax", ["x"], axis=-1)
    node("LayerNormalization", ["x", const("ln_s", RNG.standard_normal(X[3]).astype(np.float32)),
                                const("ln_b", RNG.standard_normal(X[3]).astype(np.float32))], axis=-1)
    node("InstanceNormalization", ["x", const("in_s", RNG.standard_normal(c).astype(np.float32)),
                                   const("in_b", RNG.standard_normal(c).astype(np.float32))])
    node("BatchNormalization", ["x", *(const(f"bn{i}", (RNG.random(c) + 0.5).astype(np.float32)) for i in range(4))])
    node("Concat", ["x", "x"], axis=1)
    node("Split", ["x", const("split", np.array([3, 4], np.int64))], n_out=2, axis=1)
    node("Transpose", ["x"], perm=[0, 2, 3, 1])
    node("Slice", ["x", const("st", np.array([1, 2], np.int64)), const("en", np.array([60, 66], np.int64)),
                   const("ax", np.array([2, 3], np.int64)), const("sp", np.array([1, 2], np.int64))])
    node("ReduceMean", ["x"], axes=[1], keepdims=1)
    node("ArgMax", ["x"], axis=3)
    node("Resize", ["x", "", const("scales", np.array([1, 1, 1.5, 0.75], np.float32))], mode="linear")
    node("Cast", ["x"], to=TensorProto.INT32)
    node("Pad", ["x", const("pads", np.array([0, 0, 2, 1, 0, 1, 1, 3], np.int64))], mode="reflect")
    node("Tile", ["x", const("reps", np.array([1, 2, 1, 1], np.int64))])
    g = helper.make_graph(nodes, "threads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, X)],
                          [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    m = onnx.shape_inference.infer_shapes(m)
    del m.graph.output[:]
    m.graph.output.extend(v for v in m.graph.value_info if v.name in outs)
    onnx.save(m, path)
    return path


def split_ops(model_c: str) -> set[str]:
    """Ops of the layers the printer emitted as split (range) functions."""
    ops = set()
    for _, op in re.findall(r"/\* layer (\d+): (\w+)[^*]*\*/\nstatic void \w+_layer_\d+_range", model_c):
        ops.add(op)
    return ops


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("threads")
    path = threads_model(tmp / "threads.onnx")
    b = compile_model(path, tmp / "p", threads=3)
    bins = build_project(b.dir, "native", cflags=STRICT, jobs=2)
    x = RNG.standard_normal(X).astype(np.float32)
    return path, b, bins, x, tmp


def test_split_ops_match_onnxruntime_at_every_thread_count(built):
    path, b, bins, x, tmp = built
    assert SPLIT_OPS <= split_ops((b.dir / "model.c").read_text())
    _, want = onnxruntime_outputs(path, {"x": x})
    got = {t: run_binary(bins["runner"], b.target, [x], tmp / f"run{t}", threads=t) for t in (1, 2, 3)}
    for t in (2, 3):
        for a, c in zip(got[t], got[1]):
            assert np.array_equal(a, c), f"{t} threads differ from 1"
    for name, g, w in zip((o.name for o in onnx.load(str(path)).graph.output), got[1], want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5, err_msg=name)


@pytest.mark.slow
def test_split_ops_thread_sanitizer(built):
    """ThreadSanitizer: no two threads touch the same output element, scratch slices are per thread."""
    path, b, _, x, tmp = built
    bins = build_project(b.dir, "native", cflags="-O1 -g -fsanitize=thread " + STRICT, ldflags="-fsanitize=thread",
                         jobs=2)
    _, want = onnxruntime_outputs(path, {"x": x})
    got = run_binary(bins["runner"], b.target, [x], tmp / "tsan", threads=3)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


def test_small_op_stays_serial(tmp_path):
    """Below the hand-off cost the layer is one plain function (handing out chunks would cost more)."""
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "small",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 17, 19])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 17, 19])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "small.onnx")
    b = compile_model(tmp_path / "small.onnx", tmp_path / "p", threads=2)
    assert "_range(" not in (b.dir / "model.c").read_text()


def tiny_conv_model(path):
    """Digits-sized convs (8x8 maps, 16-32 channels): a few microseconds each, below the pool's hand-off."""
    rng = np.random.default_rng(15)
    nodes, inits, h = [], [], "x"
    for i, (cin, cout, g) in enumerate([(8, 16, 1), (16, 16, 16), (16, 32, 1), (32, 32, 4)]):
        inits.append(numpy_helper.from_array((rng.standard_normal((cout, cin // g, 3, 3)) * 0.2).astype(np.float32),
                                             f"w{i}"))
        inits.append(numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"b{i}"))
        nodes.append(helper.make_node("Conv", [h, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}", pads=[1] * 4,
                                      group=g))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        h = f"r{i}"
    g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                          [helper.make_tensor_value_info(h, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(onnx.shape_inference.infer_shapes(m), path)
    return path


def test_tiny_conv_layers_run_on_one_thread(tmp_path):
    """Layers whose estimated work is below the pool's hand-off cost (Target.pool_job_us) hand their drivers no
    pool, and --explain says so; a device whose tuned layers put the hand-off at 0 (learned constant
    pool-job-us) gets them split. Both builds: the same bits at 1, 2 and 3 threads, equal to onnxruntime."""
    from edgec.codegen import variants
    from edgec.codegen.options import CompileOptions

    path = tiny_conv_model(tmp_path / "tiny.onnx")
    x = np.random.default_rng(16).standard_normal((1, 8, 8, 8)).astype(np.float32)
    want = onnxruntime_outputs(path, {"x": x})[1][0]
    opts = CompileOptions(target="native", threads=3)
    base = compile_model(path, tmp_path / "base", options=opts)
    free = compile_model(path, tmp_path / "free", options=opts.with_(learned=(("pool-job-us", 0.0),)))
    convs = [l for l in base.layers if l["op"] == "Conv"]
    assert len(convs) == 4 and all(l["details"]["threads"].startswith("one: est.") for l in convs), convs
    assert not any("threads" in l.get("details", {}) for l in free.layers)
    src, src_free = ((b.dir / "model.c").read_text() for b in (base, free))
    assert re.search(r"_run\(&S, &A, model_pool\)", src) is None and variants.SERIAL_POOL in src
    assert len(re.findall(r"_run\(&S, &A, model_pool\)", src_free)) == 4
    for b in (base, free):
        runner = build_project(b.dir, "native", cflags=STRICT, jobs=2)["runner"]
        got = {t: run_binary(runner, b.target, [x], tmp_path / f"{b.dir.name}{t}", threads=t)[0] for t in (1, 2, 3)}
        for t in (2, 3):
            assert np.array_equal(got[t], got[1]), f"{b.dir.name}: {t} threads differ from 1"
        np.testing.assert_allclose(got[1], want, rtol=1e-4, atol=1e-4)


def test_int8_layers_timed_at_the_int8_rate():
    """An int8 layer's split decision uses the target's int8 MAC rate and counts its bytes, not elements as
    floats: ppocr cls's int8 1x1 conv (32 -> 200 channels over 2x96 pixels, 1.2 M MACs: ~6 us on a VNNI core)
    stays on one thread where the same conv in fp32 is split (2 threads of the int8 build ran ppocr cls 1.6x
    slower than one, every such layer handed to the pool)."""
    from edgec.codegen.emit import LayerInfo
    from edgec.codegen.ir import Node, Tensor
    from edgec.codegen.ops import _par
    from edgec.codegen.targets import get_target

    t = get_target("x86_64-avx512-vnni")
    assert t.q8_macs_per_us > t.f32_macs_per_us
    assert get_target("generic").q8_macs_per_us in (0, get_target("generic").f32_macs_per_us)

    def layer(dtype):
        x, y = Tensor("x", (1, 32, 2, 96), dtype), Tensor("y", (1, 200, 2, 96), dtype)
        return LayerInfo(Node("c", "QLinearConv" if dtype != np.float32 else "Conv", [x], [y]), macs=32 * 200 * 192)

    q8, f32 = layer(np.uint8), layer(np.float32)
    assert not _par.driver_pooled(t, q8, 2) and q8.details["threads"].startswith("one: est.")
    assert _par.driver_pooled(t, f32, 2)
    assert _par.layer_us(t, 10 ** 6, 0, int8=True) < _par.layer_us(t, 10 ** 6, 0)


def test_hand_off_cost_fitted_to_tuned_layers():
    """edgec tune's records of layers timed on one thread and split fit the hand-off: kept where they agree with
    the target's value, moved to the value that contradicts them least where they do not."""
    from edgec.codegen.ops import _par
    from edgec.codegen.options import CompileOptions, using
    from edgec.codegen.targets import get_target
    from edgec.devices.tune import fit_pool_job
    from edgec.devices.tuningdb import Record

    tgt = get_target("x86_64-avx2")

    def rec(sig, serial_ms, cols_ms):
        trials = [{"variant": "default", "algo": "gemm-6x16-avx2", "ms": cols_ms},
                  {"variant": "par-serial", "algo": "gemm-6x16-avx2/serial", "ms": serial_ms},
                  {"variant": "par-cols", "algo": "gemm-6x16-avx2/cols", "ms": cols_ms}]
        return Record("fp", sig, "conv3x3s1", "par-cols", "", "gemm-6x16-avx2/cols", cols_ms, "gemm-6x16-avx2",
                      cols_ms, "measured", "m.onnx", "local", "2026-11-24", False, {}, trials)

    sig = "conv3x3s1:N1C16H8W8K16G1k3x3s1x1d1x1p1x1o8x8:f32:t2"
    agree = [rec(sig, 0.004, 0.006), rec(sig.replace("K16", "K64"), 0.05, 0.03)]  # 1 us lost, 12.5 us won
    assert fit_pool_job(agree, tgt) == {}
    # a layer of 16 us on one thread (4 us saved a hand-off) won when split: this device hands off faster
    got = fit_pool_job(agree + [rec(sig.replace("K16", "K32"), 0.016, 0.010)], tgt)
    assert got == {"pool-job-us": pytest.approx(3.75)}
    # a 1-thread record has nothing split to compare
    assert fit_pool_job([rec(sig.replace(":t2", ":t1"), 0.016, 0.010)], tgt) == {}
    us = 16.0
    with using(CompileOptions(threads=2)):
        assert not _par.worth_splitting(tgt, us, _par.DRIVER_JOBS)
    with using(CompileOptions(threads=2, learned=tuple(got.items()))):
        assert _par.worth_splitting(tgt, us, _par.DRIVER_JOBS)


# -- work partitioning as a tuning knob (codegen/variants.py, family par) ------------------------------

def conv_model(path):
    """Convs on odd shapes through every partitioned driver: packed GEMM (stride 2, 1x1, 3x3 on a small map),
    the in-place 1x1 (8x8: output-channel chunks by default), depthwise, GSPC."""
    rng = np.random.default_rng(5)
    nodes, inits = [], []

    def conv(x, cin, cout, k, s=1, g=1, pad=None, act=True):
        i = len(nodes)
        inits.append(numpy_helper.from_array((rng.standard_normal((cout, cin // g, k, k)) * 0.2).astype(np.float32),
                                             f"w{i}"))
        inits.append(numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"b{i}"))
        p = k // 2 if pad is None else pad
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}", pads=[p] * 4,
                                      strides=[s, s], group=g))
        if not act:
            return f"c{i}"
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        return f"r{i}"

    h = conv("x", X[1], 24, 3, s=2)   # 31x34
    h = conv(h, 24, 40, 1)
    h = conv(h, 40, 40, 3, g=40)
    h = conv(h, 40, 40, 3, g=5)
    h = conv(h, 40, 26, 3, s=4, pad=0)  # 8x8
    h = conv(h, 26, 30, 3)
    h = conv(h, 30, 20, 1, act=False)
    g = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, X)],
                          [helper.make_tensor_value_info(h, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(onnx.shape_inference.infer_shapes(m), path)
    return path


def _records(layers, variant):
    from edgec.codegen import variants

    v = variants.BY_NAME[variant]
    sigs = {l["details"]["signature"] for l in layers if "signature" in l.get("details", {})}
    return tuple((s, v.forced_str({}), f"tuned: {variant}") for s in sorted(sigs))


def test_partitioning_variants_give_the_default_bits(tmp_path):
    """Each par variant forced on every layer: built with -Werror, run at 1, 2 and 3 threads, the same bits
    as the cost model's partitioning; each variant changes the code of the layers it applies to."""
    from edgec.codegen import variants
    from edgec.codegen.options import CompileOptions

    path = conv_model(tmp_path / "convs.onnx")
    x = np.random.default_rng(6).standard_normal(X).astype(np.float32)
    # NCHW: a record keeps its layer out of blocked regions, which would change its neighbours' kernels too
    # 1x1s in place: that driver splits output-channel chunks by default, so par-cols changes it
    opts = CompileOptions(target="native", threads=3, layout="nchw", gemm1x1="inplace")
    base = compile_model(path, tmp_path / "base", options=opts)
    want = run_binary(build_project(base.dir, "native", cflags=STRICT, jobs=2)["runner"], base.target, [x],
                      tmp_path / "run-base", threads=1)[0]
    np.testing.assert_allclose(want, onnxruntime_outputs(path, {"x": x})[1][0], rtol=1e-4, atol=1e-4)
    for name in variants.families()["par"]:
        b = compile_model(path, tmp_path / name, options=opts.with_(tuned=_records(base.layers, name)))
        mode = dict(variants.BY_NAME[name].forced)["par"]
        changed = [l["name"] for l in b.layers if l["algo"].endswith(f"/{mode}")]
        assert changed, f"{name} changed no layer"
        if mode == "serial":  # the drivers of the serial layers are handed no pool
            assert variants.SERIAL_POOL in (b.dir / "model.c").read_text()
        runner = build_project(b.dir, "native", cflags=STRICT, jobs=2)["runner"]
        for t in (1, 2, 3):
            got = run_binary(runner, b.target, [x], tmp_path / f"run-{name}-{t}", threads=t)[0]
            assert np.array_equal(got, want), f"{name} at {t} threads differs from the default partitioning"


def test_partitioning_record_forces_its_layer_only(tmp_path):
    from edgec.codegen.options import CompileOptions

    path = conv_model(tmp_path / "convs.onnx")
    # NCHW: a record keeps its layer out of blocked regions, which would change its neighbours' kernels too
    opts = CompileOptions(target="native", threads=3, layout="nchw")
    base = compile_model(path, tmp_path / "base", options=opts).layers
    last = base[-1]["details"]["signature"]
    rec = next(r for r in _records(base, "par-rows") if r[0] == last)
    got = compile_model(path, tmp_path / "one", options=opts.with_(tuned=(rec,))).layers
    assert got[-1]["algo"] == base[-1]["algo"] + "/rows" and got[-1]["details"]["tuned"] == "tuned: par-rows"
    assert [l["algo"] for l in got[:-1]] == [l["algo"] for l in base[:-1]]
    # EDGEC_PAR forces one partitioning on every covered layer, as the other switches do
    every = compile_model(path, tmp_path / "all", options=opts.with_(par="serial")).layers
    assert [l["algo"] for l in every] == [l["algo"] + "/serial" for l in base]
    # a 1-thread build has nothing to partition: the variants emit the default's code
    one = CompileOptions(target="native", threads=1, layout="nchw")
    b1 = compile_model(path, tmp_path / "b1", options=one).layers
    for name in ("par-serial", "par-cols", "par-rows"):
        t1 = compile_model(path, tmp_path / f"t1-{name}", options=one.with_(tuned=_records(b1, name))).layers
        assert [l["algo"] for l in t1] == [l["algo"] for l in b1]


def test_record_holds_a_kernel_variant_and_a_partitioning(tmp_path):
    """With threads, a tune measures each kernel variant under each partitioning too; such a record forces
    both on its layer (a Winograd tile other than the cost model's pick, run on one thread), and the build
    still matches onnxruntime at 1, 2 and 3 threads."""
    from edgec.codegen import variants
    from edgec.codegen.options import CompileOptions
    from edgec.codegen.targets import get_target

    path = conv_model(tmp_path / "convs.onnx")
    opts = CompileOptions(target="native", threads=3, layout="nchw")
    base = compile_model(path, tmp_path / "base", options=opts)
    i, lay = next((i, l) for i, l in enumerate(base.layers) if l["details"]["signature"].startswith("conv3x3s1"))
    sig = lay["details"]["signature"]
    node = next(n for n in base.graph.nodes if n.op == "Conv" and variants.signature(n, 3) == sig)
    tgt = get_target("native")
    names = dict(variants.forcings(variants.candidates(node, tgt), variants.facts(node), 3))
    tile = "f43" if lay["algo"].startswith("winograd-f23") else "f23"
    assert names[f"winograd-{tile}+par-serial"] == f"conv=winograd-{tile};sparse=dense;par=serial"
    assert not any("+" in n for n, _ in variants.forcings(variants.candidates(node, tgt), variants.facts(node), 1))
    rec = (sig, names[f"winograd-{tile}+par-serial"], f"tuned: winograd-{tile}+par-serial")
    b = compile_model(path, tmp_path / "both", options=opts.with_(tuned=(rec,)))
    got = b.layers[i]
    assert got["algo"].startswith(f"winograd-{tile}") and got["algo"].endswith("/serial"), got["algo"]
    assert [l["algo"] for j, l in enumerate(b.layers) if j != i] == \
        [l["algo"] for j, l in enumerate(base.layers) if j != i]
    x = np.random.default_rng(3).standard_normal(X).astype(np.float32)
    want = onnxruntime_outputs(path, {"x": x})[1][0]
    runner = build_project(b.dir, "native", cflags=STRICT, jobs=2)["runner"]
    for t in (1, 2, 3):
        out = run_binary(runner, b.target, [x], tmp_path / f"run-{t}", threads=t)[0]
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


# -- Winograd's phase-parallel split (runtime_c/f32-winograd: strips that do not share out as blocks) ----------

def winograd_model(path):
    """3x3 stride-1 convs whose tile strips (MR tiles) number 9 at 28x28 F(4,3), 3 at 13x11: odd for 2
    threads or 3; one grouped, one whose output channels end inside a panel."""
    rng = np.random.default_rng(8)
    shapes = [(20, 40, 1), (40, 33, 1), (33, 24, 3)]  # (in, out, groups)
    nodes, inits, h = [], [], "x"
    for i, (cin, cout, g) in enumerate(shapes):
        inits.append(numpy_helper.from_array((rng.standard_normal((cout, cin // g, 3, 3)) * 0.15)
                                             .astype(np.float32), f"w{i}"))
        inits.append(numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"b{i}"))
        nodes.append(helper.make_node("Conv", [h, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}", pads=[1] * 4,
                                      group=g))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        h = f"r{i}"
    g = helper.make_graph(nodes, "wino", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 20, 28, 28])],
                          [helper.make_tensor_value_info(h, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(onnx.shape_inference.infer_shapes(m), path)
    return path


@pytest.mark.parametrize("algo", ["winograd-f23", "winograd-f43", "winograd-f63"])
def test_winograd_phase_split_same_bits(algo, tmp_path):
    """Winograd layers built for 3 threads (V of every tile in the arena) run at 1, 2, 3 threads: the same bits,
    equal to onnxruntime; and a ThreadSanitizer build at 2 threads (the strips' transforms, then the GEMM
    items reading every strip) with the same bits."""
    from edgec.codegen.options import CompileOptions

    path = winograd_model(tmp_path / "wino.onnx")
    x = np.random.default_rng(9).standard_normal((1, 20, 28, 28)).astype(np.float32)
    b = compile_model(path, tmp_path / "p", options=CompileOptions(target="native", threads=3, conv=algo))
    assert all(l["algo"].startswith(algo) for l in b.layers if l["op"] == "Conv"), [l["algo"] for l in b.layers]
    # PHASE = 1, the shape's field before NRV and NRH
    assert len(re.findall(r", 1u, \d+u, \d+u\};\n    const f32_winograd_args", (b.dir / "model.c").read_text())) == 3
    runner = build_project(b.dir, "native", cflags=STRICT, jobs=2)["runner"]
    got = {t: run_binary(runner, b.target, [x], tmp_path / f"run{t}", threads=t)[0] for t in (1, 2, 3)}
    for t in (2, 3):
        assert np.array_equal(got[t], got[1]), f"{algo}: {t} threads differ from 1"
    np.testing.assert_allclose(got[1], onnxruntime_outputs(path, {"x": x})[1][0], rtol=1e-3, atol=1e-3)
    tsan = build_project(b.dir, "native", cflags="-O1 -g -fsanitize=thread " + STRICT, ldflags="-fsanitize=thread",
                         jobs=2)["runner"]
    assert np.array_equal(run_binary(tsan, b.target, [x], tmp_path / "tsan", threads=2)[0], got[1])


def test_transposed_gemm_conv_splits_pixels_same_bits(tmp_path, monkeypatch):
    """A conv on the transposed GEMM (f32-convt.h) with one image and one channel block (a squeeze 1x1 to 16
    channels on a 17x19 map: 323 pixels pad to 336 columns of AVX2's 16-wide tiles, 324 rows of its 6-row
    ones), then a direct 3x3 with padding: split into pixel-strip blocks on threads, the same bits at 1, 2 and
    3 threads, equal to onnxruntime; ThreadSanitizer at 3 threads."""
    if not get_target("x86_64-avx2").runs_natively():
        pytest.skip("this CPU lacks AVX2")
    monkeypatch.setenv("EDGEC_CONV", "direct")  # the 3x3 would otherwise be Winograd's
    rng = np.random.default_rng(10)
    nodes, inits, h = [], [], "x"
    for i, (cin, cout, k) in enumerate([(64, 16, 1), (16, 16, 3)]):
        inits.append(numpy_helper.from_array((rng.standard_normal((cout, cin, k, k)) * 0.2).astype(np.float32),
                                             f"w{i}"))
        inits.append(numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"b{i}"))
        nodes.append(helper.make_node("Conv", [h, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}", pads=[k // 2] * 4))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        h = f"r{i}"
    g = helper.make_graph(nodes, "convt", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 17, 19])],
                          [helper.make_tensor_value_info(h, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "convt.onnx"
    onnx.save(onnx.shape_inference.infer_shapes(m), path)
    x = np.random.default_rng(11).standard_normal((1, 64, 17, 19)).astype(np.float32)
    b = compile_model(path, tmp_path / "p", target="x86_64-avx2", threads=3)
    assert b.layers[0]["algo"] == "gemm-t-6x16-avx2", [l["algo"] for l in b.layers]
    src = (b.dir / "model.c").read_text()
    assert "f32_convt_run(" in src and "f32_convt_run(&S, &A, ((ec_pool *)0));" not in src  # split on the pool
    runner = build_project(b.dir, b.target, cflags=STRICT, jobs=2)["runner"]
    got = {t: run_binary(runner, b.target, [x], tmp_path / f"run{t}", threads=t)[0] for t in (1, 2, 3)}
    for t in (2, 3):
        assert np.array_equal(got[t], got[1]), f"{t} threads differ from 1"
    np.testing.assert_allclose(got[1], onnxruntime_outputs(path, {"x": x})[1][0], rtol=1e-4, atol=1e-4)
    tsan = build_project(b.dir, b.target, cflags="-O1 -g -fsanitize=thread " + STRICT, ldflags="-fsanitize=thread",
                         jobs=2)["runner"]
    assert np.array_equal(run_binary(tsan, b.target, [x], tmp_path / "tsan", threads=3)[0], got[1])


def test_wide_gemm_conv_adds_row_chunks_same_bits(tmp_path):
    """A 1x1 conv with many output channels on a 13x13 map (SqueezeNet's classifier shape): its 11 column
    panels cannot share out on two threads, so f32-conv.h adds row chunks at run time; the same bits at 1, 2
    and 3 threads, equal to onnxruntime."""
    rng = np.random.default_rng(13)
    w = numpy_helper.from_array((rng.standard_normal((600, 128, 1, 1)) * 0.1).astype(np.float32), "w")
    bias = numpy_helper.from_array((rng.standard_normal(600) * 0.1).astype(np.float32), "b")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["y"], name="cls")], "wide",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128, 13, 13])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, bias])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "wide.onnx"
    onnx.save(onnx.shape_inference.infer_shapes(m), path)
    x = np.random.default_rng(14).standard_normal((1, 128, 13, 13)).astype(np.float32)
    b = compile_model(path, tmp_path / "p", threads=3)
    assert "f32_conv_run(" in (b.dir / "model.c").read_text(), [l["algo"] for l in b.layers]
    runner = build_project(b.dir, "native", cflags=STRICT, jobs=2)["runner"]
    got = {t: run_binary(runner, b.target, [x], tmp_path / f"run{t}", threads=t)[0] for t in (1, 2, 3)}
    for t in (2, 3):
        assert np.array_equal(got[t], got[1]), f"{t} threads differ from 1"
    np.testing.assert_allclose(got[1], onnxruntime_outputs(path, {"x": x})[1][0], rtol=1e-4, atol=1e-4)
