"""Layout pass: NCHW or channel-blocked NCHWc per region of the lowered graph.

A region is a connected set of float32 4-D nodes that have a blocked kernel (runtime_c/f32-nchwc):
depthwise convs (any window, stride, pad, dilation), 3x3 stride-1 convs on the Winograd path (whole blocks of
channels a group, or groups merged into whole blocks by merge_groups; one dense conv per group: runtime_c/f32-winograd
reads and writes blocks), strided dense convs on whole blocks of input
channels (a blocked im2col, then the 1x1 kernel over its taps' channels), 1x1 stride-1 convs, dense or grouped (a block straddling
a group edge reads both groups, up to MAX_STRADDLE times the conv's MACs; fused epilogue and residual
included), MaxPool/AveragePool, GlobalAveragePool, same-shape Add/Mul, the squeeze-excite Mul by an [N,C,1,1]
tensor, standalone activations, channel shuffles (fuse_shuffles; inside a region folded into the depthwise and
1x1 convs after them where they can be, _fold_shuffles) and channel Concats whose inputs but the last are whole
blocks. A dense conv with at most 4 input channels that the direct kernel runs (a stem) is a region's edge layer:
its input stays NCHW and the kernel writes its output blocked, so no reorder follows it. Inside a
chosen region every tensor is blocked (c = the target's f32 vector lanes); each region edge gets one
LayoutReorder node: into the region for every NCHW tensor it reads, out of it for every tensor read
outside it or returned by the graph. Graph inputs and outputs stay NCHW.

Whether a region is blocked (layout=auto): its estimated time blocked (the blocked kernels plus one reorder
per edge tensor) is below its time in NCHW (the kernels the NCHW emitters pick: depthwise planes with row tails
or per-layer transposes, the 1x1 GEMM path); estimate() with constants from codegen/costmodel.py,
the blocked side scaled by the device's learned `layout-scale` (fit_scale, from tuned regions). A tuning record of
the region's signature (region_signature; `edgec tune` measures a region both ways) wins over the estimate.
layout=nchwc blocks every region (tests, benchmarks), layout=nchw none. The generic target (1-lane vectors)
stays NCHW, and so do convs a tuning record covers (their variant was measured in NCHW).
"""

from __future__ import annotations

import re

import numpy as np

from edgec.codegen.ir import Graph, Node, Tensor
from edgec.errors import EdgecError

LAYOUT_MODES = ("auto", "nchw", "nchwc")
WINO_TILES = ("f23", "f43")  # what a region record may force on its blocked Winograd convs (wino=...)
WINO_SPEC = re.compile(r"\d+x\d+x\d+x\d+g\d+:(f23|f43)")  # one entry of it: wino_shape, then the tile
ACT_OPS = ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Clip")


def block_width(target) -> int:
    """Channels per block on this target (0: no blocked kernels)."""
    from edgec.codegen.ops.nchwc import isa_lanes
    il = isa_lanes(target)
    return il[1] if il else 0


def _f32_4d(*ts: Tensor | None) -> bool:
    return all(t is not None and not t.is_const and t.dtype == np.float32 and len(t.shape) == 4 for t in ts)


def kind(n: Node, target=None) -> str | None:
    """What blocked kernel would run node n: dw | 1x1 | wino | im2col | stem | pool | gap | eltwise | scale | act | shuffle |
    concat, or None. With a target, a 1x1 conv the sparse kernels would run stays out (they read NCHW), and a
    few-channel conv the direct kernel runs is a stem (NCHW input, blocked output)."""
    outs = [t for t in n.outputs if t is not None]
    if len(outs) != 1:
        return None
    y = outs[0]
    if n.op == "Conv":
        x, w = n.input(0), n.input(1)
        b = n.input(2)
        if not _f32_4d(x, y) or w is None or not w.is_const or (b is not None and not b.is_const):
            return None
        if n.epilogue.residual is not None and not _f32_4d(n.epilogue.residual):
            return None
        if n.attr("ec_f16_weights"):  # fp16-stored weights: their own kernels and conversions
            return None
        if _tuned(n):  # a device measured this layer's variants (in NCHW): keep what it chose
            return None
        from edgec.codegen.ops.conv import geometry
        try:
            g = geometry(n)
        except EdgecError:
            return None
        if g["G"] == g["C"] == g["K"]:
            from edgec.codegen import options
            # EDGEC_DW=plane|cb names an NCHW depthwise family: honour it rather than block the layer
            return None if options.active().dw != "auto" else "dw"
        from edgec.codegen.ops.nchwc import strided_dense
        c = block_width(target) if target is not None else 0
        if c and strided_dense(g, c) and not _stem(n, g, target):  # c: a target with blocked kernels
            # strided dense: the blocked im2col (a 1x1's pixels copied dense), then the 1x1 kernel
            return None if (g["KH"], g["KW"]) == (1, 1) and _sparse(n, g, target) else "im2col"
        if g["KH"] == g["KW"] == 1 and g["SH"] == g["SW"] == 1 and g["PT"] == g["PL"] == 0 \
                and (g["Ho"], g["Wo"]) == (g["H"], g["W"]):
            if g["G"] == 1:
                return None if _sparse(n, g, target) else "1x1"
            # grouped: blocks straddling a group edge read both groups (zero weights for the other's lanes)
            c = block_width(target) if target is not None else 0
            return "1x1" if c and straddle(g, c) <= MAX_STRADDLE else None
        if target is not None and _stem(n, g, target):
            return "stem"
        if n.attr("ec_merged_groups"):  # merge_groups rewrote it for the blocked Winograd driver
            return "wino"
        return "wino" if target is not None and _wino(g, target) and not _sparse(n, g, target) else None
    if n.op == SHUFFLE_OP:
        return "shuffle" if _f32_4d(n.input(0), y) else None
    if n.op == "Concat":
        c = block_width(target) if target is not None else 0
        xs = [t for t in n.inputs if t is not None]
        if not c or not xs or not _f32_4d(*xs, y) or n.attr("axis", 1) % 4 != 1:
            return None
        if any(t.shape[0] != y.shape[0] or t.shape[2:] != y.shape[2:] or not t.size for t in xs):
            return None
        return "concat" if all(t.shape[1] % c == 0 for t in xs[:-1]) else None
    if n.op in ("MaxPool", "AveragePool"):
        x = n.input(0)
        if not _f32_4d(x, y) or len(n.attr("kernel_shape", [])) != 2 or not n.epilogue.empty:
            return None
        if n.op == "MaxPool" and int(n.attr("storage_order", 0)) != 0:
            return None
        return "pool"
    if n.op == "GlobalAveragePool":
        return "gap" if _f32_4d(n.input(0), y) and n.epilogue.empty else None
    if n.op in ("Add", "Mul") and len(n.inputs) == 2:
        a, b = n.inputs
        if not _f32_4d(a, b, y):
            return None
        if a.shape == b.shape == y.shape:
            return "eltwise"
        if n.op == "Mul" and n.epilogue.empty and scale_operands(n) is not None:
            return "scale"
        return None
    if n.op in ACT_OPS and _f32_4d(n.input(0), y) and n.input(0).shape == y.shape:
        from edgec.codegen.fuse import activation_of
        return "act" if activation_of(n) is not None and n.epilogue.empty else None
    return None


# A grouped 1x1 whose groups are not whole blocks joins a region while its blocked MACs (straddling blocks read
# two groups) are at most this many times its own: ShuffleNet's 28, 34 and 68 channels per group give 1.14, 1.18
# and 1.06; a group narrower than half a block would multiply them.
MAX_STRADDLE = 1.5


def straddle(g: dict, c: int) -> float:
    """Blocked 1x1 MACs over the conv's own (1 for dense convs and whole-block groups)."""
    from edgec.codegen.ops.nchwc import ranges_1x1
    rng = ranges_1x1(g["C"], g["K"], g["G"], c)
    return sum(hi - lo for lo, hi in rng) * c / (g["K"] * (g["C"] // g["G"]))


SHUFFLE_OP = "ChannelShuffle"


def fuse_shuffles(g: Graph) -> Graph:
    """The channel shuffle, Reshape [N,C,H,W] -> [N,G,C/G,H,W], Transpose perm [0,2,1,3,4], Reshape back to
    [N,C,H,W], as one ChannelShuffle node (attribute ec_shuffle_groups): a channel permutation that has an NCHW
    plane-copy emitter and a blocked kernel, so it no longer ends a blocked region. Only where the two inner
    tensors are read by the next node alone."""
    prod, users = g.producers(), g.consumers()
    outs = {id(t) for t in g.outputs}

    def only_user(t: Tensor) -> Node | None:
        us = users.get(id(t), [])
        return us[0] if len(us) == 1 and id(t) not in outs else None

    drop: dict[int, Node] = {}
    for t in g.nodes:
        if t.op != "Transpose" or list(t.attr("perm") or []) != [0, 2, 1, 3, 4]:
            continue
        r1, mid = prod.get(id(t.inputs[0])), t.outputs[0]
        r2 = only_user(mid)
        if r1 is None or r2 is None or r1.op != "Reshape" or r2.op != "Reshape" or only_user(t.inputs[0]) is not t:
            continue
        x, y = r1.inputs[0], r2.outputs[0]
        if not _f32_4d(x, y) or x.shape != y.shape or len(mid.shape) != 5:
            continue
        n, c = x.shape[:2]
        grp = mid.shape[2]  # [N, C/G, G, H, W] after the transpose
        if c % grp or mid.shape != (n, c // grp, grp, *x.shape[2:]):
            continue
        fused = Node(r2.name, SHUFFLE_OP, [x], [y], {"ec_shuffle_groups": grp},
                     onnx_names=r1.onnx_names + t.onnx_names + r2.onnx_names)
        drop[id(r1)], drop[id(t)], drop[id(r2)] = None, None, fused
    if drop:
        g.nodes = [drop[id(n)] if id(n) in drop else n for n in g.nodes if drop.get(id(n), n) is not None]
    return g


MAX_FOLDED_GROUPS = 16  # NCHWC_MAX_RUNS in f32-nchwc.h: one run of input channels per shuffle group


def _fold_shuffles(g: Graph, chosen: set[int], target) -> None:
    """Inside blocked regions, a ChannelShuffle read only by a depthwise conv whose output only a 1x1 conv reads
    costs no pass of its own: the depthwise runs on the unshuffled channels (its per-channel weights and bias
    permuted along), and the 1x1 reads its input channels shuffle group by shuffle group (ec_in_shuffle;
    f32_nchwc_1x1_blocks). ShuffleNet's shuffles were ~8% of its blocked time as copies."""
    users = g.consumers()
    outs = {id(t) for t in g.outputs}

    def sole(t: Tensor) -> Node | None:
        us = users.get(id(t), [])
        return us[0] if len(us) == 1 and id(t) not in outs and id(us[0]) in chosen else None

    drop: set[int] = set()
    for s in g.nodes:
        grp = s.attr("ec_shuffle_groups")
        if s.op != SHUFFLE_OP or id(s) not in chosen or not isinstance(grp, int) or not 1 < grp <= MAX_FOLDED_GROUPS:
            continue
        dw = sole(s.outputs[0])
        if dw is None or kind(dw, target) != "dw" or dw.inputs[0] is not s.outputs[0] \
                or dw.epilogue.residual is not None:
            continue
        pw = sole(dw.outputs[0])
        if pw is None or kind(pw, target) != "1x1" or pw.inputs[0] is not dw.outputs[0] \
                or pw.epilogue.residual is dw.outputs[0] or pw.attr("ec_in_shuffle"):
            continue
        c = s.inputs[0].shape[1]
        cs = c // grp
        src = np.arange(c) % cs * grp + np.arange(c) // cs  # unshuffled channel i*cs + j is shuffled j*grp + i
        for i in (1, 2):
            t = dw.input(i)
            if t is not None:
                dw.inputs[i] = Tensor(t.name + "__unshuffled", t.shape, t.dtype, const=t.const[src])
        dw.inputs[0] = s.inputs[0]
        pw.attrs = {**pw.attrs, "ec_in_shuffle": grp}
        dw.onnx_names = s.onnx_names + dw.onnx_names
        drop.add(id(s))
    if drop:
        g.nodes = [n for n in g.nodes if id(n) not in drop]
        chosen.difference_update(drop)


def _stem(n: Node, g: dict, target) -> bool:
    """Whether the direct few-channel kernel runs conv n (where it loses to the GEMM path, or EDGEC_SMALLC=gemm,
    the layer keeps its NCHW output). A residual would have to be read blocked: such a conv stays out."""
    from edgec.codegen.ops.conv import smallc_kernel, smallc_pick
    k = smallc_kernel(target, g)
    if k is None or block_width(target) % k[2] or n.epilogue.residual is not None:
        return False
    choice = smallc_pick(target, g)
    return choice is not None and choice.algo == "direct"


def merged_groups(g: dict, c: int) -> int:
    """The groups a grouped conv runs as on blocks of c channels: its own when they are whole blocks, else the
    fewest of its groups that make whole blocks merged into one (block-diagonal weights), where that merged group
    is at most 3 blocks wide and the blocked 1x1 running its GEMMs reads at most twice the channels the groups'
    own would (band_reads), else 0. Measured on a Zen 4 core (16-channel blocks, 4-layer stacks, 1 thread):
    merged into 48 channels, 192ch 28x28 g=8 (pairs of 24) ran at 0.79x its time as dense block-diagonal GEMMs
    and g=16 (fours of 12) at 0.60x GSPC's; merged into 144, the maps' few tiles stream each merged group's larger
    U once per chunk: 576ch 14x14 g=8 / 16 took 1.33x / 1.17x the NCHW F(2,3)'s time, 144ch 56x56 g=2 / 4 / 8
    1.22x / 1.10x / 1.10x the NCHW F(4,3)'s. Zen 5, dense pairs: 8- and 24-channel groups blocked 1.15-1.45x
    faster than on the NCHW paths."""
    G, cpg, kpg = g["G"], g["C"] // g["G"], g["K"] // g["G"]
    if cpg % c == 0 and kpg % c == 0:
        return G
    s = next((s for s in range(2, G + 1) if G % s == 0 and s * cpg % c == 0 and s * kpg % c == 0), 0)
    if not s or s * max(cpg, kpg) > 3 * c:
        return 0
    return G // s if band_reads(cpg, kpg, s, c) <= 2 else 0


def band_reads(cpg: int, kpg: int, s: int, c: int) -> float:
    """The input channels the blocked 1x1 reads for s merged groups (cpg in, kpg out each) on blocks of c lanes,
    over the ones their own groups hold: a block reads every channel of the groups its lanes belong to
    (nchwc.ranges_1x1), so a block straddling two groups reads both. 24-channel groups on 16-lane blocks: 4/3."""
    from edgec.codegen.ops.nchwc import ranges_1x1
    return sum(hi - lo for lo, hi in ranges_1x1(s * cpg, s * kpg, s, c)) * c / (s * kpg * cpg)


def _wino_choice(g: dict, target):
    """winograd.choose_blocked's Choice for a conv the blocked Winograd driver could run (whole blocks a group,
    or groups merged into whole blocks: merged_groups), None where it cannot. Merged groups on maps of fewer
    than 14x14 stay out: twice the MACs over few tiles (128ch 8x8 g=16, 4-layer stack: 0.057 ms against GSPC's
    0.036; Zen 5). Whole-block groups there run it since the blocked GEMMs prefetch the next U block range
    (512ch 7x7 g=2 / 8 / 16 1.99 / 0.486 / 0.268 -> 1.43 / 0.384 / 0.231 ms, 960ch g=2 / 4 7.18 / 3.27 -> 4.79 /
    2.92; 512ch g=4 0.70 -> 0.76; before the prefetch blocked F(2,3) ran 1.04-1.17x the NCHW grouped driver at
    960ch 7x7 g=2 / 4)."""
    from edgec.codegen.ops import winograd
    from edgec.codegen.ops.conv import direct_path_3x3
    c = block_width(target)
    if not c or not winograd.eligible(g):
        return None
    groups = merged_groups(g, c)
    if not groups or (groups != g["G"] and g["Ho"] * g["Wo"] < 196):
        return None
    cols, path = direct_path_3x3(target, g)
    return winograd.choose_blocked(target, g, cols, path, groups)


def _wino(g: dict, target) -> bool:
    """Whether the Winograd path runs this conv and can read and write it blocked (f32-winograd-nchwc.h): each
    group (or merged group) then runs as an image of a dense conv."""
    ch = _wino_choice(g, target)
    return ch is not None and ch.algo != "direct"


def merge_groups(n: Node, target) -> None:
    """Rewrite a blocked Winograd conv whose groups are not whole blocks as merged_groups' fewer groups:
    block-diagonal weights (a merged group's output channels read only their own group's inputs), the same
    results. ec_blocked_wino records the algorithm the layout chose, or kept from the region's record (the
    emitter runs it)."""
    from edgec.codegen.ops.conv import geometry
    g = geometry(n)
    groups = merged_groups(g, block_width(target))
    if groups == g["G"]:
        return
    G, s, cpg, kpg = g["G"], g["G"] // groups, g["C"] // g["G"], g["K"] // g["G"]
    w = n.inputs[1]
    src = w.const.reshape(G, kpg, cpg, g["KH"], g["KW"])
    out = np.zeros((G, kpg, s * cpg, g["KH"], g["KW"]), w.dtype)
    for j in range(G):
        out[j, :, (j % s) * cpg:(j % s + 1) * cpg] = src[j]
    algo = n.attr("ec_blocked_wino") or _wino_choice(g, target).algo
    n.inputs[1] = Tensor(f"{w.name}__merged{s}", (g["K"], s * cpg, g["KH"], g["KW"]), w.dtype, const=out)
    n.attrs = {**n.attrs, "group": groups, "ec_merged_groups": G, "ec_blocked_wino": algo}


def _tuned(n: Node) -> bool:
    """Whether a tuning record of the compile in progress forces this layer's variant."""
    from edgec.codegen import options, variants
    opts = options.active()
    if not opts.tuned:
        return False
    sig = variants.signature(n, opts.threads)
    rec = opts.tuned_for(sig) if sig is not None else None
    return rec is not None and bool(rec[0])  # a record that kept the cost model's pick forces nothing


def _sparse(n: Node, g: dict, target) -> bool:
    """Whether the sparse path (codegen/ops/sparse.py) would take this dense conv."""
    from edgec.codegen import costmodel, options
    mode = options.active().sparse
    if mode == "dense":
        return False
    if mode != "auto" or target is None:
        return mode != "auto"
    w2d = n.inputs[1].const.reshape(g["K"], -1).astype(np.float32, copy=False)
    return costmodel.choose_sparse(target, w2d, g["Ho"] * g["Wo"]).algo != "dense"


def scale_operands(n: Node) -> tuple[Tensor, Tensor] | None:
    """(x, s) of a Mul x * s with s of shape [N,C,1,1] and x of the output's shape, either order."""
    y = n.outputs[0]
    for x, s in ((n.inputs[0], n.inputs[1]), (n.inputs[1], n.inputs[0])):
        if x.shape == y.shape and tuple(s.shape) == (y.shape[0], y.shape[1], 1, 1) and s.shape != y.shape:
            return x, s
    return None


def _operands(n: Node, k: str | None = None) -> list[Tensor]:
    """Activations node n reads (what must be blocked when n is; nothing for a stem, k its kind())."""
    return [] if k == "stem" else [t for t in n.operands() if not t.is_const]


def regions(g: Graph, target=None) -> list[list[Node]]:
    """Connected sets of nodes with a blocked kernel, in graph order. A stem joins the region of its output's
    readers, not its input's producer; a region of stems alone is none."""
    kinds = {id(n): kind(n, target) for n in g.nodes}
    parent: dict[int, int] = {id(n): id(n) for n in g.nodes if kinds[id(n)]}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    prod = g.producers()
    for n in g.nodes:
        if id(n) not in parent:
            continue
        for t in _operands(n, kinds[id(n)]):
            p = prod.get(id(t))
            if p is not None and id(p) in parent:
                parent[root(id(n))] = root(id(p))
    groups: dict[int, list[Node]] = {}
    for n in g.nodes:
        if id(n) in parent:
            groups.setdefault(root(id(n)), []).append(n)
    return [r for r in groups.values() if any(kinds[id(n)] != "stem" for n in r)]


def edges(g: Graph, region: list[Node], target=None) -> tuple[list[Tensor], list[Tensor]]:
    """(tensors reordered into the region, tensors reordered out of it). With a target, a stem reads its input
    as it is (NCHW) and counts as an NCHW reader of a tensor made in the region."""
    kinds = {id(n): kind(n, target) for n in region} if target is not None else {}
    members = {id(n) for n in region if kinds.get(id(n)) != "stem"}
    prod, users = g.producers(), g.consumers()
    outs = {id(t) for t in g.outputs}
    inbound, outbound, seen = [], [], set()
    for n in region:
        for t in _operands(n, kinds.get(id(n))):
            p = prod.get(id(t))
            if (p is None or id(p) not in members and kinds.get(id(p)) != "stem") and id(t) not in seen:
                seen.add(id(t))
                inbound.append(t)
        for t in n.outputs:
            if t is not None and (id(t) in outs or any(id(u) not in members for u in users.get(id(t), []))):
                outbound.append(t)
    return inbound, outbound


def estimate(g: Graph, region: list[Node], target) -> tuple[float, float]:
    """(NCHW ns, blocked ns) of a region: its layers on the kernels each layout runs, plus one reorder per
    edge tensor when blocked (the target's layout_cost in codegen/targets.yaml, measured per kernel)."""
    from edgec.codegen import costmodel
    nchw = blocked = 0.0
    for n in region:
        a, b = node_cost(n, target)
        nchw, blocked = nchw + a, blocked + b
    ins, outs = edges(g, region, target)
    blocked += sum(costmodel.layout_reorder_cost(target, 4 * t.size) for t in ins + outs)
    return nchw, blocked


def node_cost(n: Node, target) -> tuple[float, float]:
    """(NCHW ns, blocked ns) of one node of a region (costmodel.layout_node_cost; a stem's here)."""
    from edgec.codegen import costmodel
    from edgec.codegen.ops.conv import geometry
    c = block_width(target)
    k = kind(n, target)
    if k == "stem":
        return stem_cost(target, geometry(n))
    if k == "im2col":  # as the 1x1 over KH*KW*C channels both ways (the NCHW GEMM packs the same im2col)
        g = geometry(n)
        taps = g["KH"] * g["KW"]
        return costmodel.layout_node_cost(target, "1x1", c, g=dict(g, C=taps * g["C"], H=g["Ho"], W=g["Wo"], KH=1,
                                                                   KW=1, SH=1, SW=1, PT=0, PL=0))
    if k == "wino":  # NCHW: priced at the GEMM rate over F(4,3)'s ~2x fewer MACs; blocked: the same GEMMs with
        # no phase packing and channel-lane transforms (f32-winograd-nchwc.h), a fraction of that
        g = geometry(n)
        t = g["N"] * g["K"] * g["C"] // g["G"] * 9 * g["Ho"] * g["Wo"] * costmodel._lc(target, "gemm_mac") / 2
        # merged narrow groups at the same share: they measured faster than the NCHW paths despite reading up to
        # twice the channels (merged_groups)
        return t, t * costmodel._lc(target, "wino_nchwc")
    if k in ("dw", "1x1"):
        return costmodel.layout_node_cost(target, k, c, g=geometry(n))
    return costmodel.layout_node_cost(target, k, c, y_shape=n.outputs[0].shape)


def stem_cost(target, g: dict) -> tuple[float, float]:
    """(NCHW ns, blocked ns) of a stem on the direct kernel: costmodel.smallc_estimate's MAC units at the GEMM
    path's ns per MAC (its rate unit), the same both ways. The blocked store skips the NCHW store's transposes,
    left unpriced: the region gains the reorder its output would need, which edges() no longer counts."""
    from edgec.codegen import costmodel
    from edgec.codegen.ops.conv import smallc_kernel
    t = costmodel.smallc_estimate(target, g, smallc_kernel(target, g)[2]) * costmodel._lc(target, "gemm_mac")
    return t, t


def trim_edges(g: Graph, region: list[Node], target) -> list[Node]:
    """The region without the stems and pools at its input edge that are cheaper outside it: a strided pool
    reading an NCHW tensor lets the reorder move past it to its output, stride^2 times smaller (ShuffleNet's
    stem MaxPool: 24x112x112 reordered in, or 24x56x56 after it). A stem writing the region blocked saves the
    reorder altogether and stays where the estimate says so; without it, its pool may leave next."""
    prod = g.producers()
    members = list(region)
    while len(members) > 1:
        ids = {id(n) for n in members}
        _, whole = estimate(g, members, target)
        for n in members:
            k = kind(n, target)
            if k not in ("pool", "stem") or any(id(prod[id(t)]) in ids for t in _operands(n, k) if id(t) in prod):
                continue
            rest = [m for m in members if m is not n]
            if all(kind(m, target) == "stem" for m in rest):
                continue
            nchw, _ = node_cost(n, target)
            if estimate(g, rest, target)[1] + nchw < whole:
                members = rest
                break
        else:
            return members
    return members


def pays(g: Graph, region: list[Node], target) -> bool:
    """layout=auto: the region holds a depthwise or a Winograd conv and its estimated time blocked, reorders
    included, is below its NCHW time. Regions of 1x1 convs and pools alone stay NCHW: where the estimate blocked
    SqueezeNet's fire modules, each with its 3x3 conv outside (two reorders a module), they ran 1.46x slower in
    wall time. With the 3x3 convs blocked too SqueezeNet is one region and ran 0.85x its NCHW time (Xeon Emerald
    Rapids, 1 thread, 12 interleaved rounds), ResNet-50 0.99x.
    The blocked estimate is scaled by the device's learned `layout-scale` (fit_scale) where its records give one."""
    if not any(kind(n, target) in ("dw", "wino") for n in region):
        return False
    nchw, blocked = estimate(g, region, target)
    return blocked * learned_scale() < nchw


def learned_scale() -> float:
    """The blocked estimate's scale fitted to this device's tuned regions (1: none)."""
    from edgec.codegen import costmodel
    return costmodel.learned_value("layout-scale", 1.0)


def fit_scale(samples: list[tuple[float, float]]) -> dict[str, float]:
    """`layout-scale` from tuned regions: (measured blocked / NCHW time, estimated blocked / NCHW time) per region
    that timed both layouts. The geometric mean of measured over estimated ratio, clamped to [1/4, 4]: the factor
    that makes the estimate's blocked time agree with the device on average (nothing without samples, nor where
    the records agree with the estimate within 5%)."""
    logs = [np.log(m / e) for m, e in samples if m > 0 and e > 0 and np.isfinite(m / e)]
    scale = float(np.clip(np.exp(np.mean(logs)), 0.25, 4.0)) if logs else 1.0
    return {} if abs(np.log(scale)) < np.log(1.05) else {"layout-scale": scale}


def region_class(region: list[Node], target=None, kinds: dict | None = None) -> str:
    """What a region holds, without sizes: its conv classes (no epilogues) and other kinds, e.g.
    region[1x1,dwconv3x3s1,dwconv3x3s2]. Transfer-tuning moves a region's record within its class.
    kinds: kind() of the nodes by id, where the caller has them (kind() of a 1x1 conv weighs its sparsity)."""
    from edgec.codegen import variants
    parts = set()
    for n in region:
        k = kinds[id(n)] if kinds is not None else kind(n, target)
        if k == "dw":
            f = variants.facts(n)
            parts.add(f"dwconv{f['KH']}x{f['KW']}s{f['SH']}")
        elif k:
            parts.add(k)
    return "region[" + ",".join(sorted(parts)) + "]"


def region_signature(g: Graph, region: list[Node], target, threads: int) -> str:
    """Stable description of a region with every size: its nodes in order (layer signatures for convs, op,
    shapes, attributes and epilogue for the rest), how they connect and its edge tensors, hashed. Equal
    signatures compile to the same region code; the class prefix keeps it readable."""
    import hashlib
    import json

    from edgec.codegen import variants
    pos = {id(n): i for i, n in enumerate(region)}
    prod = g.producers()
    ins, outs = edges(g, region, target)
    edge = {id(t): i for i, t in enumerate(ins)}
    desc = []
    for n in region:
        f = variants.facts(n) if n.op == "Conv" else None
        sig = variants.signature(n, threads, f) if f is not None else None
        ep = n.epilogue
        srcs = [f"n{pos[id(prod[id(t)])]}" if id(t) in prod and id(prod[id(t)]) in pos else f"e{edge.get(id(t), '?')}"
                for t in _operands(n)]  # a stem's input too: an NCHW edge, not a reorder
        attrs = sorted((k, repr(v)) for k, v in n.attrs.items() if not k.startswith("ec_") or k == "ec_shuffle_groups")
        desc.append([n.op, sig or "", [list(t.shape) for t in n.outputs if t is not None], attrs, ep.act or "",
                     sorted((k, repr(v)) for k, v in ep.act_params.items()), ep.residual_before_act, srcs])
    desc.append([[list(t.shape) for t in ins], [list(t.shape) for t in outs]])
    h = hashlib.sha256(json.dumps(desc).encode()).hexdigest()[:16]
    return f"{region_class(region, target)}:{h}:t{threads}"


def _snapshot(region: list[Node]) -> list[Node]:
    """The region's nodes as they read before blocking rewrites them (inputs, attributes, epilogue): what
    edgec tune extracts a region model from."""
    import copy
    return [Node(n.name, n.op, list(n.inputs), list(n.outputs), dict(n.attrs), copy.copy(n.epilogue),
                 list(n.onnx_names)) for n in region]


def _decide(g: Graph, region: list[Node], target, mode: str) -> dict:
    """Whether a region is blocked, and why: layout=nchwc / nchw, a tuning record of the region's signature for
    this device (its measured choice wins over the estimate), else the estimate (pays)."""
    from edgec.codegen import options
    opts = options.active()
    kinds = {id(n): kind(n, target) for n in region}
    info = {"signature": region_signature(g, region, target, opts.threads),
            "class": region_class(region, target, kinds), "nodes": _snapshot(region),
            "has_dw": any(k == "dw" for k in kinds.values()), "has_wino": any(k == "wino" for k in kinds.values())}
    info["edges"] = edges(g, region, target)
    info["estimate"] = estimate(g, region, target)  # edgec tune records it beside each layout it times
    rec = opts.tuned_for(info["signature"]) if opts.tuned else None
    forced = rec[0].get("layout") if rec is not None else None
    info["wino_forced"] = wino_forced(rec[0].get("wino", "") if rec is not None else "")
    # the blocked 1x1 kernels' passes (nchwc.pass_channels) a record measured faster for this region's layers
    info["blk"] = rec[0].get("blk", "") if rec is not None else ""
    if mode in ("nchw", "nchwc"):
        info["blocked"] = mode == "nchwc"
    elif forced in ("nchw", "nchwc"):
        info["blocked"], info["tuned"] = forced == "nchwc", rec[1]
    elif not info["has_dw"] and not info["has_wino"]:  # pays(): regions of 1x1 convs and pools alone stay NCHW
        info["blocked"] = False
    else:
        info["blocked"] = pays(g, region, target)
        if learned_scale() != 1.0:
            nchw, blocked = info["estimate"]
            info["learned"] = f"layout-scale {learned_scale():.2f} (default 1): blocked estimate " \
                              f"{blocked * learned_scale() / 1e3:.1f} us vs NCHW {nchw / 1e3:.1f} us"
    # (shape, algorithm) of each Winograd conv blocked (edgec tune times the other tile per shape and tells its
    # candidates' code apart by them)
    info["wino"] = []
    for n in region:
        if kinds[id(n)] == "wino":
            g_n = _geometry(n)
            shape = wino_shape(g_n)
            info["wino"].append((shape, info["wino_forced"].get(shape) or _wino_choice(g_n, target).algo))
    return info


def _without_wino(g: Graph, region: list[Node], target, info: dict) -> tuple[list[Node], dict]:
    """A region that does not pay blocked, again without its Winograd convs (they run NCHW as well), where the
    rest still holds a depthwise conv: each blocked Winograd conv at the region's edge costs reorders of its own
    output. The digits CNN (Zen 5, AVX-512): its 32ch 8x8 g=2 conv joined the stem / depthwise / 1x1 chain and
    took it NCHW with it (1.03x the time of the chain blocked, the conv NCHW)."""
    rest = [n for n in region if kind(n, target) != "wino"]
    if len(rest) == len(region) or not any(kind(n, target) == "dw" for n in rest):
        return region, info
    rest = trim_edges(g, rest, target)
    alt = _decide(g, rest, target, "auto")
    return (rest, alt) if alt["blocked"] else (region, info)


def _geometry(n: Node) -> dict:
    from edgec.codegen.ops.conv import geometry
    return geometry(n)


def wino_shape(g: dict) -> str:
    """A blocked Winograd conv's shape (its geometry) as a region record names it (wino=<shape>:f23,...)."""
    return f"{g['C']}x{g['K']}x{g['H']}x{g['W']}g{g['G']}"


def wino_forced(spec: str) -> dict[str, str]:
    """A region record's wino field ("<shape>:f23,<shape>:f43"): shape -> the Winograd algorithm its blocked
    convs run (F(2,3) and F(4,3) only: the blocked driver's tiles); a malformed entry forces nothing."""
    out = {}
    for item in filter(None, spec.split(",")):
        shape, _, tile = item.rpartition(":")
        if shape and tile in WINO_TILES:
            out[shape] = f"winograd-{tile}"
    return out


def assign(g: Graph, target, mode: str = "auto") -> Graph:
    """Block the regions that pay (mode auto), all of them (nchwc) or none (nchw); inserts the reorders."""
    if mode not in LAYOUT_MODES:
        raise EdgecError(f"layout {mode!r} is not one of {', '.join(LAYOUT_MODES)}")
    c = block_width(target)
    if mode == "nchw" or not c or any(t.block for n in g.nodes for t in n.outputs if t is not None):
        return g
    fuse_shuffles(g)
    chosen: set[int] = set()
    found = []  # every region and its choice (edgec tune extracts and measures them: devices/tune.py)
    wino: dict[int, dict] = {}  # id(node) -> its region record's Winograd tiles (wino_forced)
    for r in regions(g, target):
        if mode == "auto":
            r = trim_edges(g, r, target)
        info = _decide(g, r, target, mode)
        if mode == "auto" and not info["blocked"] and "tuned" not in info:
            r, info = _without_wino(g, r, target, info)
        found.append(info)
        if info["blocked"]:
            chosen.update(id(n) for n in r)
            wino.update((id(n), info["wino_forced"]) for n in r if info["wino_forced"])
            for n in r:  # variants.emit scopes it to each such layer
                if info["blk"] and kind(n, target) in ("1x1", "im2col", "wino"):
                    n.attrs = {**n.attrs, "ec_blk": info["blk"]}
        note = info.get("tuned") or (f"layout: {info['learned']}" if "learned" in info else None)
        for n in r:  # --explain: where a device's record or learned constant made the region's choice
            if note:
                n.attrs = {**n.attrs, "ec_layout_note": note}
    g.layout_regions = found
    if not chosen:
        return g
    _fold_shuffles(g, chosen, target)
    for n in g.nodes:
        if id(n) in chosen and n.op == "Conv" and kind(n, target) == "wino":
            tile = wino.get(id(n), {}).get(wino_shape(_geometry(n))) if wino else None
            if tile:  # a region record's tile (edgec tune timed F(2,3) and F(4,3) in the region)
                n.attrs = {**n.attrs, "ec_blocked_wino": tile, "ec_wino_tuned": 1}
            merge_groups(n, target)
    stems = {id(n) for n in g.nodes if id(n) in chosen and kind(n, target) == "stem"}  # read NCHW, write blocked
    users = g.consumers()
    outs = {id(t) for t in g.outputs}
    twin: dict[int, Tensor] = {}  # id(NCHW tensor) -> its blocked form

    def blocked(t: Tensor) -> Tensor:
        b = Tensor(t.name + "__nchwc", t.shape, t.dtype, block=c)
        twin[id(t)] = b
        return b

    def reorder(src: Tensor, dst: Tensor) -> Node:
        return Node(f"reorder:{src.name}", "LayoutReorder", [src], [dst], {"to": "nchwc" if dst.block else "nchw"})

    def read_blocked(t: Tensor) -> bool:
        return any(id(u) in chosen and id(u) not in stems for u in users.get(id(t), []))

    nodes: list[Node] = [reorder(t, blocked(t)) for t in g.inputs if read_blocked(t)]
    for n in g.nodes:
        if id(n) not in chosen:
            nodes.append(n)
            nodes += [reorder(t, blocked(t)) for t in n.outputs if t is not None and read_blocked(t)]
            continue
        if id(n) not in stems:
            n.inputs = [twin[id(t)] if t is not None and not t.is_const else t for t in n.inputs]
        if n.epilogue.residual is not None:
            n.epilogue.residual = twin[id(n.epilogue.residual)]
        nodes.append(n)
        for i, t in enumerate(n.outputs):
            if t is None:
                continue
            n.outputs[i] = b = blocked(t)
            if id(t) in outs or any(id(u) not in chosen or id(u) in stems for u in users.get(id(t), [])):
                nodes.append(reorder(b, t))
    g.nodes = nodes
    return g
