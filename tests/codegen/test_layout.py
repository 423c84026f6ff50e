"""The channel-blocked layout pass (codegen/layout.py): whole models and graphs built to hit every region edge
case, compiled in both layouts (EDGEC_LAYOUT nchw / nchwc, and the pass's own choice), built with -Werror, run
and compared with onnxruntime; natively and under qemu for the NEON kernels."""

from __future__ import annotations

import dataclasses
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen import compile_model, layout, verify
from edgec.codegen.ir import Tensor
from edgec.codegen.lower import lower_file
from edgec.codegen.options import CompileOptions
from edgec.codegen.targets import get_target
from edgec.errors import EdgecError

STRICT = "-O2 -Wall -Wextra -Werror"
LANES = layout.block_width(get_target("native"))
needs_vectors = pytest.mark.skipif(not LANES, reason="this host has no vector ISA with blocked kernels")


class G:
    """A small ONNX graph under construction: random weights, shapes inferred."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.k = [], [], 0

    def w(self, shape):
        self.k += 1
        fan = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        arr = self.rng.uniform(-1, 1, shape) * np.sqrt(3.0 / fan)
        self.inits.append(numpy_helper.from_array(arr.astype(np.float32), f"w{self.k}"))
        return f"w{self.k}"

    def op(self, op, ins, **attrs):
        self.k += 1
        out = f"t{self.k}"
        self.nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def conv(self, x, cin, cout, k=1, group=1, stride=1, pad=0, dil=1, bias=True):
        ins = [x, self.w([cout, cin // group, k, k])] + ([self.w([cout])] if bias else [])
        return self.op("Conv", ins, group=group, strides=[stride] * 2, pads=[pad] * 4, dilations=[dil] * 2)

    def save(self, path, x_shape, outputs):
        g = helper.make_graph(self.nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        m = onnx.shape_inference.infer_shapes(m)
        onnx.save(m, path)
        return path


def mixed(path, c=13, h=11, w=9, n=1):
    """Every blocked op: depthwise (3x3 s1, 5x5 s2, dilated), 1x1 with bias/activation/residual, standalone
    activations, same-shape Add, squeeze-excite (GAP, 1x1 on a 1x1 map, HardSigmoid, Mul), MaxPool and
    AveragePool; three graph outputs, one of them read inside the region too."""
    g = G()
    t0 = g.conv("x", 3, c, k=3, pad=1)                        # dense: NCHW, the region's input edge
    t1 = g.op("HardSwish", [g.conv(t0, c, c, k=3, group=c, pad=1)])
    t2 = g.op("Relu", [g.conv(t1, c, 20)])
    t3 = g.conv(t2, 20, 20, k=5, group=20, stride=2, pad=2, bias=False)
    t4 = g.op("Add", [g.conv(t3, 20, 20), t3])                 # residual inside the region
    t5 = g.conv(t4, 20, 20, k=3, group=20, pad=2, dil=2)
    se = g.op("HardSigmoid", [g.conv(g.op("Relu", [g.conv(g.op("GlobalAveragePool", [t5]), 20, 5)]), 5, 20)])
    t6 = g.op("Mul", [t5, se])
    y1 = g.op("MaxPool", [t6], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y2 = g.conv(g.op("AveragePool", [t6], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=0), 20, 7)
    y3 = g.op("Sigmoid", [t2])                                 # a region tensor read by a region node and output
    return g.save(path, [n, 3, h, w], [y1, y2, y3])


def shared_edge(path):
    """A region output read both by a blocked consumer (1x1) and an NCHW one (dense 3x3)."""
    g = G(1)
    t1 = g.conv(g.conv("x", 3, 10, k=3, pad=1), 10, 10, k=3, group=10, pad=1)
    a = g.conv(g.conv(t1, 10, 12), 12, 12, k=3, group=12, pad=1)
    b = g.conv(t1, 10, 6, k=3, pad=1)
    return g.save(path, [1, 3, 9, 7], [a, b])


def output_in_region(path):
    """A graph output in the middle of a region (reordered out, the region goes on blocked)."""
    g = G(2)
    t1 = g.conv(g.conv("x", 3, 9, k=3, pad=1), 9, 9, k=3, group=9, pad=1)
    t2 = g.conv(t1, 9, 17)
    y = g.conv(t2, 17, 17, k=3, group=17, stride=2, pad=1)
    return g.save(path, [1, 3, 10, 10], [t1, y])


def residual_edge(path):
    """Residual Add whose skip operand comes from outside the region (reordered in once, read by two nodes)."""
    g = G(3)
    a = g.conv("x", 3, 11, k=3, pad=1)
    b = g.conv(g.conv(a, 11, 11, k=3, group=11, pad=1), 11, 11)
    y = g.op("Relu", [g.op("Add", [b, a])])
    return g.save(path, [1, 3, 8, 12], [y])


def graph_input_in_region(path):
    """The graph input read directly by a depthwise conv, batch 2."""
    g = G(4)
    y = g.conv(g.conv("x", 5, 5, k=3, group=5, pad=1), 5, 21)
    return g.save(path, [2, 5, 6, 7], [y])


def pools_and_pads(path):
    """Pools with ceil_mode cells, count_include_pad, dilation, asymmetric pads; depthwise with auto_pad
    SAME_UPPER and asymmetric pads."""
    g = G(6)
    t = g.conv(g.conv("x", 3, 12, k=3, pad=1), 12, 12, k=3, group=12, pad=1)
    a = g.op("AveragePool", [t], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
             count_include_pad=1)
    b = g.op("MaxPool", [t], kernel_shape=[2, 3], strides=[2, 1], pads=[0, 1, 1, 0], dilations=[1, 2], ceil_mode=1)
    c = g.op("AveragePool", [t], kernel_shape=[3, 2], strides=[3, 2], pads=[1, 0, 0, 1], ceil_mode=1)
    d = g.op("Conv", [t, g.w([12, 1, 4, 3])], group=12, auto_pad="SAME_UPPER", strides=[2, 2])
    e = g.op("Conv", [t, g.w([12, 1, 3, 5])], group=12, pads=[0, 2, 2, 1])
    return g.save(path, [1, 3, 13, 11], [g.conv(a, 12, 5), g.conv(b, 12, 5), g.conv(c, 12, 5), g.conv(d, 12, 5),
                                         g.conv(e, 12, 5)])


def grouped_1x1(path):
    """ShuffleNet-style unit without the shuffle: grouped 1x1 (whole blocks per group; 1 and 3 blocks per group,
    so output-block pairs straddle groups), depthwise, grouped 1x1 with the residual Add and Relu."""
    b = LANES or 4
    g = G(7)
    c = 6 * b
    x = g.conv(g.conv("x", 3, c, k=3, pad=1), c, c, k=1, group=6)
    t = g.conv(g.conv(x, c, c, k=3, group=c, pad=1), c, c, k=1, group=2)
    y = g.op("Relu", [g.op("Add", [t, x])])
    return g.save(path, [1, 3, 9, 11], [y])


def shuffle(g, x, c, groups, hw):
    """ShuffleNet's channel shuffle: Reshape [1,G,C/G,H,W], Transpose [0,2,1,3,4], Reshape [1,C,H,W]."""
    g.k += 1
    s5, s4 = f"s5_{g.k}", f"s4_{g.k}"
    g.inits += [numpy_helper.from_array(np.array([1, groups, c // groups, *hw], np.int64), s5),
                numpy_helper.from_array(np.array([1, c, *hw], np.int64), s4)]
    return g.op("Reshape", [g.op("Transpose", [g.op("Reshape", [x, s5])], perm=[0, 2, 1, 3, 4]), s4])


def shuffle_units(path, b=None):
    """ShuffleNet v1 units on groups that are not whole blocks: a stride-2 unit (grouped 1x1, shuffle, depthwise
    s2, grouped 1x1, concatenated with an AveragePool of its input, Relu) and a stride-1 unit (residual Add),
    channels 3b -> 3b + 4.5b in 3 groups (1.5 blocks a group); odd map."""
    b = b or LANES or 4
    g = G(11)
    c0, c1 = 3 * b, 9 * b // 2  # 3 blocks in, 4.5 blocks from the branch
    x = g.op("Relu", [g.conv("x", 3, c0, k=3, pad=1)])
    t = shuffle(g, g.op("Relu", [g.conv(x, c0, c1, group=3)]), c1, 3, (13, 11))
    t = g.conv(g.conv(t, c1, c1, k=3, group=c1, stride=2, pad=1), c1, c1, group=3)
    p = g.op("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    u = g.op("Relu", [g.op("Concat", [p, t], axis=1)])  # 3 whole blocks first, the partial one last
    c = c0 + c1
    t = shuffle(g, g.op("Relu", [g.conv(u, c, c, group=3)]), c, 3, (7, 6))
    t = g.conv(g.conv(t, c, c, k=3, group=c, pad=1), c, c, group=3)
    return g.save(path, [1, 3, 13, 11], [g.op("Relu", [g.op("Add", [t, u])])])


def winograd_block(path, b):
    """A bottleneck on whole blocks, batch 2, odd map: 1x1, two 3x3 stride-1 convs (the second with the residual
    Add), then a depthwise conv and a 1x1, and a 5-channel 3x3 conv that stays NCHW (not whole blocks)."""
    g = G(12)
    c, d = 2 * b, 3 * b
    x = g.op("Relu", [g.conv("x", 3, c, k=3, pad=1)])
    t = g.op("Relu", [g.conv(g.op("Relu", [g.conv(x, c, c)]), c, d, k=3, pad=1)])
    y = g.op("Relu", [g.op("Add", [g.conv(t, d, c, k=3, pad=1), x])])
    return g.save(path, [2, 3, 13, 11], [g.conv(g.conv(y, c, c, k=3, group=c, pad=1), c, c), g.conv(y, c, 5, k=3)])


@needs_vectors
@pytest.mark.parametrize("conv,threads", [("winograd-f23", 2), ("winograd-f43", 1), ("winograd-f43", 2),
                                          ("winograd-f63", 1)])
def test_winograd_reads_and_writes_blocks(conv, threads, tmp_path):
    """Winograd convs on whole blocks join the region (runtime_c/f32-winograd/f32-winograd-nchwc.h: channel-lane
    transforms read and write the blocks), the residual one included: no reorder around them."""
    model = winograd_block(tmp_path / "m.onnx", LANES)
    opts = CompileOptions(layout="nchwc", conv=conv, threads=threads)
    r = verify(model, out_dir=tmp_path / "p", cflags=STRICT, rtol=1e-4, atol=1e-4, options=opts)
    assert r.ok, r.outputs
    layers = compile_model(model, tmp_path / "c", options=opts).layers
    wino = [la for la in layers if la["algo"].startswith("winograd")]
    # the 3-channel stem and the 5-channel conv stay NCHW (not whole blocks)
    assert [la["details"].get("layout", "nchw") != "nchw" for la in wino] == [False, True, True, False], wino
    at = [i for i, la in enumerate(layers) if la in wino[1:3]]
    between = [la["op"] for la in layers[at[0] - 1:at[1] + 1]]  # the 1x1 before them to the residual one
    assert between == ["Conv"] * 3, between


@needs_vectors
def test_winograd_blocked_wide_rows(tmp_path):
    """Rows wider than the NCHW driver's packing buffer (1024) run blocked too: the channel-lane transforms read
    the pixels where they are."""
    g = G(13)
    x = g.op("Relu", [g.conv("x", LANES, LANES)])
    path = g.save(tmp_path / "m.onnx", [1, LANES, 5, 1030], [g.op("Relu", [g.conv(x, LANES, LANES, k=3, pad=1)])])
    opts = CompileOptions(layout="nchwc", conv="winograd-f43")
    r = verify(path, out_dir=tmp_path / "p", cflags=STRICT, rtol=1e-4, atol=1e-4, options=opts)
    assert r.ok, r.outputs
    wino = [la for la in compile_model(path, tmp_path / "c", options=opts).layers if la["algo"].startswith("winograd")]
    assert len(wino) == 1 and wino[0]["details"]["layout"] != "nchw", wino


@pytest.mark.parametrize("target", ["aarch64-neon", "armv7-neon"])
def test_winograd_blocked_neon_under_qemu(target, tmp_path):
    import shutil
    t = get_target(target)
    if shutil.which(t.cc) is None or shutil.which(t.qemu[0]) is None:
        pytest.skip(f"{t.cc} or {t.qemu[0]} is not installed")
    model = winograd_block(tmp_path / "m.onnx", 4)
    r = verify(model, out_dir=tmp_path / "p", cflags=STRICT, rtol=1e-4, atol=1e-4,
               options=CompileOptions(target=target, layout="nchwc", conv="winograd-f43"))
    assert r.ok, r.outputs
    assert "f32_winograd_outc_f43__neon" in (tmp_path / "p" / "model.c").read_text()


def strided_1x1(path):
    """ResNet's downsampling: a 1x1 stride-2 shortcut (odd map: 13x11 -> 7x6) added to a branch of a depthwise conv
    and a dense 3x3 stride-2 one; a dense 5x5 stride-2 dilated conv on the sum; all blocked (im2col)."""
    b = LANES or 4
    c = 2 * b
    g = G(13)
    x = g.op("Relu", [g.conv("x", 3, c, k=3, pad=1)])
    t = g.conv(g.conv(x, c, c, k=3, group=c, pad=1), c, 3 * b, k=3, stride=2, pad=1)
    y = g.op("Relu", [g.op("Add", [g.conv(x, c, 3 * b, stride=2), t])])
    return g.save(path, [1, 3, 13, 11], [g.conv(y, 3 * b, b, k=5, stride=2, pad=3, dil=2)])


CASES = {"mixed": mixed, "strided_1x1": strided_1x1, "grouped_1x1": grouped_1x1, "shuffle_units": shuffle_units, "pools_and_pads": pools_and_pads, "shared_edge": shared_edge,
         "output_in_region": output_in_region,
         "residual_edge": residual_edge, "graph_input_in_region": graph_input_in_region}


def _layers(model, tmp_path, **opts):
    return compile_model(model, tmp_path / "c", options=CompileOptions(**opts)).layers


def _blocked(layers):
    return [l for l in layers if l.get("details", {}).get("layout", "nchw") != "nchw"]


@needs_vectors
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("mode", ["nchw", "nchwc", "auto"])
def test_graphs_match_onnxruntime_in_both_layouts(case, mode, tmp_path):
    model = CASES[case](tmp_path / "m.onnx")
    r = verify(model, out_dir=tmp_path / "p", cflags=STRICT, rtol=1e-4, atol=1e-5,
               options=CompileOptions(layout=mode))
    assert r.ok, r.outputs
    blocked = _blocked(_layers(model, tmp_path, layout=mode))
    if mode == "nchw":
        assert not blocked
    if mode == "nchwc":
        assert any(l["op"] == "Conv" and l["algo"].startswith("dwconv-nchwc") for l in blocked)
        assert any(l["op"] == "LayoutReorder" for l in blocked)
        if case == "strided_1x1":  # each strided conv: the blocked im2col, then the 1x1 kernel
            assert sorted(l["algo"].rsplit("-", 1)[1] for l in blocked if "-im2col" in l["algo"]) == \
                ["im2col1x1s2x2", "im2col3x3s2x2", "im2col5x5s2x2"]
        if case == "grouped_1x1":
            assert sum(l["algo"].startswith("conv1x1-nchwc") and "-g" in l["algo"] for l in blocked) == 2
        if case == "shuffle_units":  # one region: shuffles, partial-block groups and the Concat all blocked
            # each shuffle folded into the depthwise conv after it and the 1x1 after that
            assert not any(l["op"] == "ChannelShuffle" for l in blocked)
            g3 = [l["algo"] for l in blocked if l["algo"].startswith("conv1x1-nchwc") and "-g3" in l["algo"]]
            assert len(g3) == 4 and sum(a.endswith("-shuffled3") for a in g3) == 2
            # both inputs (whole blocks first, the partial one last) written into their place in the output
            assert any(l["op"] == "Concat" and l["algo"] == "in-place" for l in blocked)
            # one way in (a reorder, or the stem conv writing blocks where the cost model gives it the direct
            # small-C kernel) and one way out
            edges = [l["details"]["layout"] for l in blocked if "->" in l["details"]["layout"]]
            assert sorted(e.startswith("nchw ->") for e in edges) == [False, True], edges


def test_shuffle_fused_where_its_inner_tensors_are_private(tmp_path):
    """Reshape, Transpose, Reshape become one ChannelShuffle node; not where a graph output or a second reader
    needs an inner tensor. The NCHW plane copies (a region that stays NCHW) match onnxruntime."""
    def model(path, leak):
        g = G(12)
        t = g.conv("x", 3, 12, k=3, pad=1)
        s = shuffle(g, t, 12, 4, (5, 7))
        y = g.conv(s, 12, 6, k=3, pad=1)
        if leak:  # the transposed 5-D tensor read by a second node
            return g.save(path, [1, 3, 5, 7], [y, g.op("Relu", [g.nodes[-3].output[0]])])
        return g.save(path, [1, 3, 5, 7], [y])

    def ops(path):
        g = layout.fuse_shuffles(lower_file(path))
        return [n.op for n in g.nodes]

    fused = ops(model(tmp_path / "a.onnx", False))
    assert fused.count("ChannelShuffle") == 1 and "Transpose" not in fused and "Reshape" not in fused
    assert "ChannelShuffle" not in ops(model(tmp_path / "b.onnx", True))
    for mode, algo in (("auto", "shuffle-g4"), ("nchwc", "shuffle-nchwc-g4")):  # auto: a lone shuffle stays NCHW
        r = verify(tmp_path / "a.onnx", out_dir=tmp_path / f"p{mode}", cflags=STRICT, rtol=1e-4, atol=1e-5,
                   options=CompileOptions(layout=mode))
        assert r.ok, r.outputs
        algos = [l["algo"] for l in _layers(tmp_path / "a.onnx", tmp_path / mode, layout=mode)]
        assert sum(a.startswith(algo) for a in algos) == 1


def test_partial_groups_and_concat_edges(tmp_path):
    """A grouped 1x1 whose groups are narrower than half a block (straddling blocks would read 2.5x its MACs)
    and a Concat whose first input is not whole blocks stay region edges."""
    g = G(13)
    t = g.conv(g.conv("x", 3, 16, k=3, pad=1), 16, 16, k=3, group=16, pad=1)
    a = g.conv(t, 16, 24, group=8)                 # 2 -> 3 channels a group
    c = g.op("Concat", [g.conv(t, 16, 5), t], axis=1)
    gr = lower_file(g.save(tmp_path / "m.onnx", [1, 3, 6, 6], [a, c]))
    kinds = {n.op: layout.kind(n, ZEN3) for n in gr.nodes if n.op == "Concat" or n.attr("group", 1) == 8}
    assert kinds == {"Conv": None, "Concat": None}
    assert layout.straddle({"C": 16, "K": 24, "G": 8}, 8) > layout.MAX_STRADDLE
    for cpg, kpg, want in ((28, 28, 16 / 14), (34, 34, 20 / 17), (68, 68, 36 / 34)):  # ShuffleNet's
        assert layout.straddle({"C": 4 * cpg, "K": 4 * kpg, "G": 4}, 8) == pytest.approx(want)


@needs_vectors
def test_region_edges(tmp_path):
    """One reorder per edge tensor: into the region once however many nodes read it, out of it once for
    all NCHW readers and graph outputs."""
    def reorders(case):
        g = lower_file(CASES[case](tmp_path / f"{case}.onnx"))
        layout.assign(g, get_target("native"), "nchwc")
        return [(n.inputs[0].name, n.attrs["to"]) for n in g.nodes if n.op == "LayoutReorder"]

    assert len(reorders("residual_edge")) == 2  # a in (dw and the residual read it), y out
    out = reorders("shared_edge")
    assert sum(1 for _, to in out if to == "nchw") == 2  # t1 for the dense conv, the last dw's output
    assert sum(1 for _, to in out if to == "nchwc") == 1
    out = reorders("output_in_region")
    # in (unless the dense 3->9 conv is a stem on the direct kernel: it writes the region blocked), the
    # mid-region output, the final one
    first = lower_file(output_in_region(tmp_path / "o.onnx")).nodes[0]
    stem = layout.kind(first, get_target("native")) == "stem"
    assert [to for _, to in out] == ([] if stem else ["nchwc"]) + ["nchw", "nchw"]
    assert reorders("graph_input_in_region")[0] == ("x", "nchwc")


# the AVX2 target with the caches of the Zen 3 host the layout costs were measured on: choices independent of the host
ZEN3 = dataclasses.replace(get_target("x86_64-avx2"), l1d_bytes=32 << 10, l2_bytes=512 << 10)


def chain(path, c, hw):
    """Depthwise 3x3 C -> 1x1 C->2C + ReLU -> depthwise 3x3 2C -> 1x1 2C->2C (docs/benchmarks.md)."""
    g = G(8)
    t = g.op("Relu", [g.conv(g.conv("x", c, c, k=3, group=c, pad=1), c, 2 * c)])
    return g.save(path, [1, c, hw, hw], [g.conv(g.conv(t, 2 * c, 2 * c, k=3, group=2 * c, pad=1), 2 * c, 2 * c)])


def lcnet_like(path):
    """PP-LCNet's pattern on a 48x192 input: 3x3 and 5x5 depthwise, 1x1 with HardSwish, squeeze-excite."""
    g = G(9)
    t = g.op("HardSwish", [g.conv("x", 3, 16, k=3, stride=2, pad=1)])
    for cin, cout, k, s in ((16, 32, 3, 1), (32, 64, 3, 2), (64, 64, 3, 1), (64, 128, 5, 2), (128, 128, 5, 1)):
        t = g.op("HardSwish", [g.conv(g.op("HardSwish", [g.conv(t, cin, cin, k=k, group=cin, stride=s, pad=k // 2)]),
                                      cin, cout)])
    se = g.op("HardSigmoid", [g.conv(g.op("Relu", [g.conv(g.op("GlobalAveragePool", [t]), 128, 32)]), 32, 128)])
    return g.save(path, [1, 3, 48, 192], [g.op("Mul", [t, se])])


def lone_dw(path, c, hw):
    """One depthwise conv between two dense 3x3 convs that stay NCHW (3 input and 5 output channels: not whole
    blocks, which a Winograd conv needs to join): a region of one node and two reorders."""
    g = G(10)
    t = g.conv(g.conv("x", 3, c, k=3, pad=1), c, c, k=3, group=c, pad=1)
    return g.save(path, [1, 3, hw, hw], [g.conv(t, c, 5, k=3, pad=1)])


def _choices(model):
    return _choices_of(lower_file(model))


def _choices_of(g):
    out = []
    for r in layout.regions(g, ZEN3):
        nchw, blocked = layout.estimate(g, r, ZEN3)
        assert nchw > 0 and blocked > 0
        out.append((len(r), layout.pays(g, r, ZEN3)))
    return out


@pytest.mark.parametrize("c,hw,blocked", [(128, 28, True), (256, 14, True), (512, 7, True)])
def test_auto_picks_the_measured_layout_for_chains(c, hw, blocked, tmp_path):
    """The chains measured in docs/benchmarks.md (CPU ms, blocked vs NCHW): 2.22 vs 2.31 at 28x28 (2.33 vs 2.06
    while the blocked 1x1 read its input once per output block pair), 2.06 vs 2.29 at 14x14, 2.05 vs 2.37 at 7x7."""
    assert _choices(chain(tmp_path / "m.onnx", c, hw)) == [(4, blocked)]


def test_auto_keeps_nchw_where_the_blocked_1x1_is_slower(tmp_path):
    """With the blocked 1x1 at the rate it had before its pixel chunks (0.0262 ns/MAC at 28x28, measured) the
    28x28 chain is NCHW: the estimate weighs the 1x1 time against the depthwise gain and the reorders."""
    from edgec.codegen import options
    model = chain(tmp_path / "m.onnx", 128, 28)
    with options.using(CompileOptions(learned=(("layout-nchwc_mac", 0.0262),))):
        assert _choices(model) == [(4, False)]


def test_auto_blocks_lcnet_pattern_and_not_a_lone_wide_dw(tmp_path):
    big = max(_choices(lcnet_like(tmp_path / "l.onnx")))
    assert big[0] >= 14 and big[1]  # activations fused: 5 dw, 5 1x1, SE (GAP, two 1x1, Mul)
    # a lone 3x3 dw at 28x28 stays NCHW since the plane kernel's aligned stride-1 path (before it, Zen 3: plane
    # 82.1 us, reorders + blocked 65.0; estimates 82.2 and 66.2): the model ran 0.99-1.01x either way on Zen 5,
    # estimates 48.7 and 66.2 us; at 14x14 the NCHW path transposes into blocks and back in the layer anyway
    assert _choices(lone_dw(tmp_path / "a.onnx", 96, 28)) == [(1, False)]
    assert _choices(lone_dw(tmp_path / "b.onnx", 96, 14)) == [(1, True)]


def test_auto_estimate_follows_learned_constants(tmp_path):
    """The constants are one named table a device's fitted values override (CompileOptions.learned)."""
    from edgec.codegen import options
    model = chain(tmp_path / "m.onnx", 256, 14)
    assert _choices(model) == [(4, True)]
    with options.using(CompileOptions(learned=(("layout-nchwc_mac", 0.03),))):
        assert _choices(model) == [(4, False)]


@needs_vectors
def test_auto_leaves_small_regions_nchw(tmp_path):
    single = lower_file(residual_edge(tmp_path / "r.onnx"))  # dw + 1x1 on 11 channels, two edges
    target = get_target("native")
    assert not any(layout.pays(single, r, target) for r in layout.regions(single, target))
    layout.assign(single, target, "auto")
    assert all(n.op != "LayoutReorder" for n in single.nodes)


def test_generic_target_stays_nchw(tmp_path):
    g = lower_file(mixed(tmp_path / "m.onnx"))
    layout.assign(g, get_target("generic"), "nchwc")
    assert all(not t.block for n in g.nodes for t in n.outputs if t is not None)


def test_blocked_tensor_bytes_are_padded():
    t = Tensor("t", (2, 13, 5, 3), np.float32, block=8)
    assert t.size == 2 * 13 * 15 and t.nbytes == 2 * 16 * 15 * 4 and t.layout == "nchw8c"
    assert Tensor("u", (1, 16, 2, 2), np.float32).nbytes == 16 * 4 * 4


def test_layout_option_checked():
    with pytest.raises(EdgecError, match="EDGEC_LAYOUT='blocked' is not one of auto, nchw, nchwc"):
        CompileOptions.from_env({"EDGEC_LAYOUT": "blocked"})
    assert CompileOptions.from_env({"EDGEC_LAYOUT": "nchwc"}).layout == "nchwc"
    assert CompileOptions(layout="nchw").cache_key() != CompileOptions(layout="nchwc").cache_key()


@needs_vectors
def test_explain_shows_layout_per_layer(tmp_path):
    from rich.console import Console
    from edgec.codegen.costmodel import explain_table
    layers = _layers(mixed(tmp_path / "m.onnx"), tmp_path, layout="nchwc")
    console = Console(width=250, record=True)
    console.print(explain_table(layers))
    text = console.export_text()
    assert "layout" in text and f"nchw{LANES}c" in text and "nchw -> " in text


@needs_vectors
def test_threads_split_blocked_layers(tmp_path):
    r = verify(mixed(tmp_path / "m.onnx", c=37, h=23, w=19), out_dir=tmp_path / "p", cflags=STRICT, threads=2,
               rtol=1e-4, atol=1e-5, options=CompileOptions(layout="nchwc", threads=2))
    assert r.ok, r.outputs
    r = verify(shuffle_units(tmp_path / "s.onnx"), out_dir=tmp_path / "q", cflags=STRICT, threads=2,
               rtol=1e-4, atol=1e-5, options=CompileOptions(layout="nchwc", threads=2))
    assert r.ok, r.outputs
    r = verify(strided_1x1(tmp_path / "t.onnx"), out_dir=tmp_path / "r", cflags=STRICT, threads=2,
               rtol=1e-4, atol=1e-5, options=CompileOptions(layout="nchwc", threads=2))  # the im2col shared out
    assert r.ok, r.outputs


def test_pass_channels_keep_k_whole_while_a_tiles_weights_fit_half_of_l2():
    from edgec.codegen.ops.nchwc import pass_channels
    t = dataclasses.replace(get_target("x86_64-avx512"), l2_bytes=1 << 20)
    assert pass_channels(t, 4, 2048, 16) == 2048  # 4 x 16 floats a channel: 512 KB, half of L2
    assert pass_channels(t, 4, 2304, 16) == 768  # 576 KB: 3 equal passes within a quarter, whole blocks
    assert pass_channels(t, 4, 4608, 16) == 928 and 928 % 16 == 0 and 928 * 256 <= (1 << 20) // 4
    assert pass_channels(t, 4, 4608, 16, "kc-whole") == 4608
    assert pass_channels(t, 4, 960, 16, "kc-half") == 480
    assert pass_channels(t, 4, 24, 16, "kc-half") == 16 and pass_channels(t, 2, 7, 8, "kc-half") == 7


@needs_vectors
def test_blocked_1x1_passes_match_onnxruntime(tmp_path):
    """EDGEC_BLK=kc-half: the blocked 1x1s (and the im2col ones) in several passes over their input channels, the
    partial sums in the output between them, at 2 threads."""
    for case in ("mixed", "strided_1x1"):
        model = CASES[case](tmp_path / f"{case}.onnx")
        opts = CompileOptions(layout="nchwc", threads=2, blk="kc-half")
        r = verify(model, out_dir=tmp_path / f"p{case}", cflags=STRICT, threads=2, rtol=1e-4, atol=1e-5, options=opts)
        assert r.ok, (case, r.outputs)
        kc = [{l["name"]: l["details"].get("kc", 1) for l in _layers(model, tmp_path / f"{case}-{blk}",
                                                                      **dataclasses.asdict(opts.with_(blk=blk)))
               if l["algo"].startswith("conv1x1-nchwc")} for blk in ("auto", "kc-half")]
        assert kc[0].keys() == kc[1].keys() and any(v > LANES for v in kc[0].values()), kc
        # whole K by default at these sizes; halved, in passes of whole blocks (one block: no split)
        assert all(kc[1][n] < kc[0][n] and kc[1][n] % LANES == 0 for n in kc[0] if kc[0][n] > LANES), kc


@needs_vectors
def test_a_region_record_sets_its_1x1_passes(tmp_path):
    """A region's tuning record `layout=nchwc;blk=kc-half` (what edgec tune records when the region ran faster so):
    that region's blocked 1x1s run in passes half as long (their algorithm named .../kc-half, --explain saying
    the record), the output still onnxruntime's; without the record, the default passes."""
    from edgec.codegen.project import emit_model
    model = strided_1x1(tmp_path / "m.onnx")
    opts = CompileOptions(layout="nchwc")
    regs = [r for r in emit_model(model, opts, "p").graph.layout_regions if r["blocked"]]
    assert len(regs) == 1, regs
    rec = opts.with_(tuned=((regs[0]["signature"], "layout=nchwc;blk=kc-half", "region measured"),))
    kc = [{l["name"]: (l["algo"], l["details"].get("kc", 1))
           for l in _layers(model, tmp_path / k, **dataclasses.asdict(o)) if l["algo"].startswith("conv1x1-nchwc")}
          for k, o in (("a", opts), ("b", rec))]
    split = [n for n, (a, v) in kc[0].items() if v > LANES]
    assert split, kc
    for n in split:
        assert kc[1][n][1] < kc[0][n][1] and kc[1][n][0] == kc[0][n][0] + "/kc-half", kc
    r = verify(model, out_dir=tmp_path / "p", cflags=STRICT, rtol=1e-4, atol=1e-5, options=rec)
    assert r.ok, r.outputs


@pytest.mark.parametrize("target", ["aarch64-neon", "armv7-neon"])
@pytest.mark.parametrize("case", ["mixed", "residual_edge", "shuffle_units", "strided_1x1"])
def test_neon_under_qemu(target, case, tmp_path):
    import shutil
    t = get_target(target)
    if shutil.which(t.cc) is None or shutil.which(t.qemu[0]) is None:
        pytest.skip(f"{t.cc} or {t.qemu[0]} is not installed")
    r = verify(CASES[case](tmp_path / "m.onnx"), out_dir=tmp_path / "p", cflags=STRICT, rtol=1e-4, atol=1e-5,
               options=CompileOptions(target=target, layout="nchwc"))
    assert r.ok, r.outputs
    assert "f32_nchwc_dwconv__neon" in (tmp_path / "p" / "model.c").read_text()


def _randomized(onnx_light, name, tmp_path):
    from tests.codegen.test_e2e import randomized
    return randomized(onnx_light(name), tmp_path / f"{name}.onnx")


PPOCR = {"x": [1, 3, 48, 192]}


@needs_vectors
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["nchw", "nchwc", "auto"])
def test_ppocr_cls_both_layouts(ppocr_cls, mode, tmp_path):
    """PP-LCNet: depthwise + 1x1 + HardSwish + squeeze-excite."""
    r = verify(ppocr_cls, input_shapes=PPOCR, out_dir=tmp_path / "p", cflags=STRICT, rtol=1e-3, atol=1e-5,
               options=CompileOptions(layout=mode))
    assert r.ok, r.outputs
    assert r.outputs[0]["cosine"] > 0.99999 and r.outputs[0]["argmax_agreement"] == 1.0
    blocked = _blocked(compile_model(ppocr_cls, tmp_path / "c", input_shapes=PPOCR,
                                     options=CompileOptions(layout=mode)).layers)
    assert bool(blocked) == (mode != "nchw")
    if mode == "nchwc":
        algos = {l["algo"].split("-")[0] for l in blocked}
        assert {"dwconv", "conv1x1", "gavgpool", "scale", "reorder"} <= algos


@needs_vectors
@pytest.mark.slow
@pytest.mark.parametrize("name", ["shufflenet", "squeezenet"])
@pytest.mark.parametrize("mode", ["nchw", "nchwc", "auto"])
def test_light_models_both_layouts(onnx_light, name, mode, tmp_path):
    model = _randomized(onnx_light, name, tmp_path)
    r = verify(model, out_dir=tmp_path / "p", cflags=STRICT, rtol=1e-3, atol=1e-5, options=CompileOptions(layout=mode))
    assert r.ok, r.outputs
    assert r.outputs[0]["cosine"] > 0.99999 and r.outputs[0]["argmax_agreement"] == 1.0
    layers = _layers(model, tmp_path, layout=mode)
    blocked = _blocked(layers)
    # auto: SqueezeNet's region holds no depthwise conv; its 3x3 convs on the Winograd path (where the cost model
    # picks it) make it one region, blocked where the estimate says so; its 3x3 convs then run blocked, the
    # reorders only at the stem and the classifier
    if mode == "auto" and name == "squeezenet":
        g, t = lower_file(model), get_target("native")
        want = any(layout.pays(g, layout.trim_edges(g, r, t), t) for r in layout.regions(g, t))
        assert bool(blocked) == want
    else:
        assert bool(blocked) == (mode == "nchwc" or mode == "auto" and name == "shufflenet")
    if name == "squeezenet" and blocked:
        assert sum(la["algo"].startswith("winograd") for la in blocked) == 8
        assert sum(la["op"] == "LayoutReorder" for la in blocked) <= 2
    if name == "shufflenet" and mode != "nchw" and LANES == 8:  # one region from the stem to the last AveragePool
        # the 3->24 stem (direct kernel) writes it blocked: one reorder, out of it
        assert {l["op"] for l in layers if l not in blocked} == {"Reshape", "Gemm", "Softmax"}
        assert "-nchw8c-" in layers[0]["algo"] and sum(l["op"] == "LayoutReorder" for l in blocked) == 1
        assert not any(l["op"] == "ChannelShuffle" for l in layers)  # all 16 folded into their 1x1 convs
        assert sum(l["algo"].endswith("-shuffled4") for l in blocked) == 16


def test_auto_blocks_shufflenet_whole(onnx_light):
    """ShuffleNet v1 (g=4): with the shuffle fused and blocked, groups of 28, 34 and 68 channels (straddling
    blocks) and the channel Concats joining regions, the layers from the stem to the last AveragePool are one
    region, which the estimate blocks (measured: docs/benchmarks.md)."""
    g = layout.fuse_shuffles(lower_file(onnx_light("shufflenet")))
    assert _choices_of(g) == [(76, True)]
    # the stem writing the region blocked saves its reorder: nothing is trimmed (before stems joined regions,
    # the stem's MaxPool stayed out, 24x56x56 reordered in rather than 24x112x112)
    (region,) = layout.regions(g, ZEN3)
    assert layout.kind(region[0], ZEN3) == "stem"
    trimmed = layout.trim_edges(g, region, ZEN3)
    assert trimmed == region and layout.pays(g, trimmed, ZEN3)
    # without the stem (a GEMM stem keeps NCHW output) the MaxPool still leaves the region
    rest = trimmed[1:]
    assert [n.op for n in rest if n not in layout.trim_edges(g, rest, ZEN3)] == ["MaxPool"]


@needs_vectors
def test_sparse_1x1_stays_outside_regions(tmp_path):
    """A 1x1 conv the sparse kernels run (they read NCHW) is not blocked; the rest of the region still is."""
    g = G(5)
    t = g.conv(g.conv(g.conv("x", 3, 16, k=3, pad=1), 16, 16, k=3, group=16, pad=1), 16, 16, k=3, group=16, pad=1)
    y = g.conv(t, 16, 32)
    model = tmp_path / "m.onnx"
    g.save(model, [1, 3, 9, 9], [y])
    m = onnx.load(model)
    for init in m.graph.initializer:  # the 1x1's weights 90% zeros
        arr = numpy_helper.to_array(init)
        if arr.shape == (32, 16, 1, 1):
            arr = np.where(np.random.default_rng(0).random(arr.shape) < 0.9, 0, arr).astype(np.float32)
            init.CopyFrom(numpy_helper.from_array(arr, init.name))
    onnx.save(m, model)
    opts = CompileOptions(layout="nchwc", sparse="sparse-1x1")
    r = verify(model, out_dir=tmp_path / "p", cflags=STRICT, rtol=1e-4, atol=1e-5, options=opts)
    assert r.ok, r.outputs
    layers = compile_model(model, tmp_path / "c", options=opts).layers
    assert [l["algo"].split("-")[0] for l in layers if l["op"] == "Conv"][-1] == "spmm"
    assert sum(l["algo"].startswith("dwconv-nchwc") for l in layers) == 2


def test_reorder_op_in_a_model_is_refused(tmp_path):
    """LayoutReorder exists only between layouts edgec chose; a model naming it gets one clear error."""
    node = helper.make_node("LayoutReorder", ["x"], ["y"], to="nchwc")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 2, 2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    with pytest.raises(EdgecError) as e:
        compile_model(tmp_path / "m.onnx", tmp_path / "c")
    assert "LayoutReorder" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "c" / "model.c").exists()


def test_avx512_blocked_project_builds(tmp_path):
    """The 16-lane blocks, built with -Werror (run only on AVX-512 hosts: the graph tests cover it there)."""
    from edgec.codegen import build_project
    b = compile_model(mixed(tmp_path / "m.onnx"), tmp_path / "c",
                      options=CompileOptions(target="x86_64-avx512", layout="nchwc"))
    assert any(l.get("details", {}).get("layout") == "nchw16c" for l in b.layers)
    build_project(tmp_path / "c", "x86_64-avx512", cflags=STRICT)
    assert (tmp_path / "c" / "runner").exists()
    b = compile_model(shuffle_units(tmp_path / "s.onnx", b=16), tmp_path / "s",
                      options=CompileOptions(target="x86_64-avx512", layout="nchwc"))
    assert any(l["algo"].endswith("-shuffled3") for l in b.layers)
    # compiled (not linked): its generated code and the runtime kernels the first project did not build
    from edgec.codegen.targets import get_target
    s, c = tmp_path / "s", tmp_path / "c"
    new = [f for f in s.rglob("*.c") if f.parent == s or not (c / f.relative_to(s)).exists()]
    assert s / "model.c" in new
    for f in new:
        r = subprocess.run(["gcc", "-c", *STRICT.split(), *get_target("x86_64-avx512").cflags, f"-I{s}",
                            f"-I{s / 'runtime'}", str(f), "-o", str(tmp_path / "x.o")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


@needs_vectors
def test_tuned_layer_keeps_its_measured_variant(tmp_path):
    """A conv with a tuning record stays NCHW and runs the recorded variant; its neighbours stay blocked."""
    from edgec.codegen import variants
    model = mixed(tmp_path / "m.onnx")
    dw = next(n for n in lower_file(model).nodes if n.op == "Conv" and n.attr("group", 1) > 1)
    opts = CompileOptions(layout="nchwc", tuned=((variants.signature(dw, 1), "dw=plane", "measured here"),))
    layers = compile_model(model, tmp_path / "c", options=opts).layers
    tuned = [l for l in layers if l.get("details", {}).get("tuned")]
    assert len(tuned) == 1 and tuned[0]["algo"].startswith("dwconv-3x3") and "layout" not in tuned[0]["details"]
    assert any(l["algo"].startswith("dwconv-nchwc") for l in layers)
    r = verify(model, out_dir=tmp_path / "p", cflags=STRICT, rtol=1e-4, atol=1e-5, options=opts)
    assert r.ok, r.outputs


def test_a_winograd_conv_that_spoils_its_region_runs_nchw(digits_cnn):
    """The digits CNN on AVX-512 (1 thread): its 32ch 8x8 g=2 conv could run the blocked Winograd and joins the
    stem / depthwise / 1x1 chain's region; its output then needs reorders and the whole region does not pay. The
    region is decided again without it: the chain blocked, the grouped conv NCHW (as before that conv could join,
    1.03x faster than all NCHW on a Zen 5 core)."""
    from edgec.codegen import options
    t = get_target("x86_64-avx512-vnni")
    with options.using(CompileOptions(target="x86_64-avx512-vnni", threads=1)):
        g = lower_file(digits_cnn.model)
        first = layout.regions(g, t)[0]
        kinds = [layout.kind(n, t) for n in first]
        assert "wino" in kinds and "dw" in kinds and not layout.pays(g, first, t)
        wino = next(n for n in first if layout.kind(n, t) == "wino")
        layout.assign(g, t, "auto")
    blocked = {n.name for n in g.nodes if n.op == "Conv" and n.outputs[0].block}
    assert blocked == {n.name for n in first if layout.kind(n, t) in ("stem", "dw", "1x1")}
    assert wino.name not in blocked and not wino.inputs[0].block
    assert sum(n.op == "LayoutReorder" for n in g.nodes) == 1  # the 1x1's output, back to NCHW
