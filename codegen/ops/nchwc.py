"""Emitters of the channel-blocked (NCHWc) layout chosen by codegen/layout.py: the reorders at region
edges, and the blocked forms of the ops a region may hold (runtime_c/f32-nchwc). The op emitters of
conv.py, pool.py and elementwise.py hand a layer here when its output tensor is blocked.

Blocked tensors are [N][ceil(C/c)][H][W][c]; constant weights and bias are zero-padded to whole
blocks, so padded channels stay finite (act(0)) and never reach a real channel.
"""

from __future__ import annotations

import numpy as np

from edgec.codegen import options
from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node, Tensor
from edgec.codegen.ops import _par
from edgec.codegen.ops._util import act_expr, block, epilogue_lines
from edgec.codegen.registry import register
from edgec.errors import EdgecError

HEADER = "f32-nchwc/f32-nchwc.h"
PT = 6  # pixels per 1x1 tile (NCHWC_PT in f32-nchwc-tmpl.h): 2*PT accumulators + 2 weights + 1 broadcast
REORDER_OP = "LayoutReorder"


LANES = {"avx512": 16, "avx2": 8, "neon": 4}  # f32 lanes of a vector ISA: its channel block


def isa_lanes(target) -> tuple[str, int] | None:
    """(vector ISA, f32 lanes) of the target's blocked kernels, None where it has none (generic)."""
    from edgec.codegen.ops.elementwise import vector_isa
    isa = vector_isa(target)
    return None if isa is None else (isa, LANES[isa])


def _kernels(ctx: EmitContext, block_: int) -> str:
    il = isa_lanes(ctx.target)
    if il is None or il[1] != block_:
        raise EdgecError(f"internal: a {block_}-channel blocked layer on target {ctx.target.name}, "
                         f"whose vectors hold {il[1] if il else 1}")
    ctx.require(HEADER, f"f32-nchwc/f32-nchwc-{il[0]}.c")
    return il[0]


def _blocks(c: int, b: int) -> int:
    return -(-c // b)


def _pad_vec(v: np.ndarray | None, n: int, b: int) -> np.ndarray:
    out = np.zeros(_blocks(n, b) * b, np.float32)
    if v is not None:
        out[:n] = v.reshape(-1)[:n]
    return out


def _spatial(t: Tensor) -> int:
    return int(np.prod(t.shape[2:], dtype=np.int64))


def ranges_1x1(C: int, K: int, G: int, b: int) -> list[tuple[int, int]]:
    """Per output block of a blocked 1x1 conv, the input channels [lo, hi) it reads: the groups of its first and
    last real lanes (f32_nchwc_1x1_range). A block straddling a group edge reads both groups."""
    cpg, kpg = C // G, K // G
    return [(k * b // kpg * cpg, ((min(K, (k + 1) * b) - 1) // kpg + 1) * cpg) for k in range(_blocks(K, b))]


def _pack_1x1(w: np.ndarray, C: int, K: int, G: int, b: int) -> np.ndarray:
    """Weights [K][C/G] -> [ceil(K/b)][WS][b]: block k's row c - lo for input channel c, zero where the lane's
    group does not read c (and on pad lanes)."""
    cpg, kpg = C // G, K // G
    rng = ranges_1x1(C, K, G, b)
    wp = np.zeros((len(rng), max(hi - lo for lo, hi in rng), b), np.float32)
    w2 = w.reshape(K, cpg)
    for ch in range(K):
        k, lane = divmod(ch, b)
        r0 = ch // kpg * cpg - rng[k][0]
        wp[k, r0:r0 + cpg, lane] = w2[ch]
    return wp


@register(REORDER_OP)
def emit_reorder(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    if node.attr("to") not in ("nchwc", "nchw") or len(x.shape) != 4 or x.shape != y.shape \
            or x.dtype != np.float32 or bool(x.block) == bool(y.block):
        raise EdgecError(f"node {node.name} ({node.op}): not an ONNX op; edgec inserts it between layouts only")
    b = x.block or y.block
    isa = _kernels(ctx, b)
    to = "to_blocked" if y.block else "from_blocked"
    ctx.note(algo=f"reorder-{'nchw-to-' + y.layout if y.block else x.layout + '-to-nchw'}-{isa}", macs=0,
             layout=f"{x.layout} -> {y.layout}")
    return (f"static const f32_nchwc_reorder_shape S = {{{x.shape[0]}u, {x.shape[1]}u, {_spatial(x)}u, {b}u}};\n"
            f"f32_nchwc_reorder_run(&S, f32_nchwc_{to}__{isa}, {ctx.ptr(x)}, {ctx.ptr(y)}, {ctx.pool});\n")


IM2COL_MAX_BYTES = 32 << 20  # largest blocked im2col row of a strided dense conv (its scratch: whole rows)


def strided_dense(g: dict, b: int | None = None) -> bool:
    """A dense (one group) strided conv that runs blocked as im2col + the 1x1 kernel: input channels whole blocks
    (b given: no pad lanes copied KH*KW times), one output row's im2col within IM2COL_MAX_BYTES."""
    if g["G"] != 1 or (g["SH"], g["SW"]) == (1, 1):
        return False
    if b is None:
        return True
    return g["C"] % b == 0 and g["KH"] * g["KW"] * g["C"] * g["Wo"] * 4 <= IM2COL_MAX_BYTES


def tile_blocks(target, dense: bool) -> int:
    """Output blocks per 1x1 tile: 4 for a dense conv where the registers hold 6 pixels x 4 blocks of accumulators
    (24 of 32: per input channel 6 broadcasts feed 24 FMAs instead of 12, the input read once per 4 blocks), else 2
    (12 of 16)."""
    return 4 if dense and target.vector_regs >= 32 else 2


def balanced_kt(kb: int, kt: int, chunks: int, threads: int, dense: bool) -> int:
    """Blocks per tile of a 1x1 layer of kb output blocks and `chunks` pixel chunks, so its items share evenly among
    the build's threads: 576 channels in 4-block tiles are 9 items, 5 and 4 on two threads (the dw-1x1-dw chain at
    14x14 took 1.06x onnxruntime's time there, 0.99x at one thread); in 3-block tiles (18 accumulators, dense convs)
    12. More pixel chunks instead (each reading the weights again) ran ShuffleNet's grouped 1x1s 1.045x slower."""
    def idle(kt_):
        items = -(-kb // kt_) * chunks
        return -(-items // threads) * threads / items
    if threads <= 1 or not dense or kt != 4 or idle(3) >= idle(4) - 1e-9:
        return kt
    return 3


def pass_channels(target, kt: int, union: int, b: int, mode: str | None = None) -> int:
    """KC: input channels per pass of the 1x1 tiles. Each pass after the first reloads and stores the tile's
    accumulators; the weights stream from L2 in order, which the prefetchers follow. So the whole K while a tile's
    weights (kt x KC x b floats) fit half of L2 (they stay there across the item's tiles), else equal passes within a
    quarter. On the Zen 4 host passes of half of L1 (the rule before, from Zen 3 measurements of an older tile) ran
    every dense 1x1 of ResNet-50 0-15% slower and its F(4,3) GEMMs up to 26%. mode (CompileOptions.blk: EDGEC_BLK or
    a device's learned blocking): kc-whole the whole K, kc-half half of this rule's passes."""
    mode = options.active().blk if mode is None else mode
    per = 4 * kt * b  # a tile's weight bytes per input channel
    if mode == "kc-whole" or union * per <= target.l2_bytes // 2:
        kc = union
    else:
        passes = -(-union * per // max(per, target.l2_bytes // 4))
        kc = -(-union // passes // b) * b
    if mode == "kc-half":
        kc = max(b, -(-kc // 2 // b) * b)
    return min(kc, union)


def emit_conv(node: Node, ctx: EmitContext, g: dict, w: np.ndarray, macs: int) -> str:
    """Depthwise (any window) or 1x1 conv (stride 1 dense or grouped; strided dense), blocked in and out."""
    from edgec.codegen.ops.conv import epilogue_fields, take_residual_buffer
    x, y = node.inputs[0], node.outputs[0]
    pre, xptr, suffix = "", ctx.ptr(x), ""
    g0, rows = g, 0
    if strided_dense(g):
        # a strided dense conv (ResNet's downsampling: 1x1 s2 shortcuts, 3x3 s2): the blocked im2col (for a 1x1
        # the pixels it reads, a quarter of the input at stride 2), then the 1x1 kernel over its KH*KW*C channels,
        # weights tap-major and zero on pad lanes. In NCHW each such layer cut the region with reorders around it.
        # A chunk of output rows at a time, the chunk's im2col within half of L2 (f32_nchwc_im2col_conv).
        b, taps, nbc = y.block, g["KH"] * g["KW"], _blocks(g["C"], y.block)
        row_bytes = taps * nbc * b * g["Wo"] * 4
        rows = max(1, min(g["Ho"], ctx.target.l2_bytes // 2 // row_bytes))
        rows = -(-g["Ho"] // -(-g["Ho"] // rows))  # balanced chunks
        col = ctx.scratch(rows * row_bytes)
        geo = ", ".join(f"{g[k]}u" for k in "N H W Ho Wo KH KW SH SW DH DW PT PL".split())
        pre = (f"const f32_nchwc_im2col_shape G = {{{xptr}, (float *){col}, {geo[:geo.index(',')]}, {nbc}u, "
               f"{geo[geo.index(',') + 2:]}, {b}u, 0u, 0u}};\n")
        w2 = np.zeros((g["K"], taps, nbc * b), np.float32)
        w2[:, :, :g["C"]] = w.reshape(g["K"], g["C"], taps).transpose(0, 2, 1)
        w = w2.reshape(g["K"], taps * nbc * b, 1, 1)
        suffix = f"-im2col{g['KH']}x{g['KW']}s{g['SH']}x{g['SW']}"
        g = dict(g, N=1, C=taps * nbc * b, H=rows, W=g["Wo"], Ho=rows, KH=1, KW=1, SH=1, SW=1, DH=1, DW=1, PT=0,
                 PL=0)
    b = y.block
    if x.block != b or (node.epilogue.residual is not None and node.epilogue.residual.block != b):
        raise EdgecError(f"internal: node {node.name} mixes layouts")
    isa = _kernels(ctx, b)
    bias_t = node.input(2)
    bias = ctx.weight(f"nchwc-bias-{b}:{node.name}",
                      _pad_vec(bias_t.const.astype(np.float32) if bias_t is not None else None, g["K"], b))
    N, C, K = g["N"], g["C"], g["K"]
    shuffled = int(node.attr("ec_in_shuffle", 0) or 0)  # codegen/layout.py folded a channel shuffle into this 1x1
    if shuffled > 1 and (g["KH"], g["KW"]) != (1, 1):
        raise EdgecError(f"internal: node {node.name} reads a shuffled input but is not a 1x1 conv")
    if g["G"] == C == K:
        taps, kc, kt = g["KH"] * g["KW"], 1, 1
        cb = _blocks(C, b)
        wp = np.zeros((cb * b, taps), np.float32)
        wp[:C] = w.reshape(C, taps)
        wp = np.ascontiguousarray(wp.reshape(cb, b, taps).transpose(0, 2, 1))  # [C/c][taps][c]
        per = max(1, -(-_par.CHUNKS // (N * cb)))  # rows split so a few blocks still give threads items
        pc = max(1, -(-g["Ho"] // per))
        items = N * cb * -(-g["Ho"] // pc)
        fn, algo = f"f32_nchwc_dwconv__{isa}", f"dwconv-nchwc-{g['KH']}x{g['KW']}-{isa}"
    elif g["KH"] == g["KW"] == 1:
        kb = _blocks(K, b)
        wp = _pack_1x1(w, C, K, g["G"], b)  # [K/c][WS][c]
        ws = wp.shape[1]
        rng = ranges_1x1(C, K, g["G"], b)
        if shuffled > 1:  # rows of a block in the order the kernel reads them: shuffle group by group
            for k, (lo, hi) in enumerate(rng):
                order = [c - lo for i in range(shuffled) for c in range(lo, hi) if c % shuffled == i]
                wp[k, :hi - lo] = wp[k, order]
        kt = tile_blocks(ctx.target, g["G"] == 1 and shuffled <= 1)
        hw = g["Ho"] * g["Wo"]
        pairs = -(-kb // kt)
        per = max(1, -(-_par.CHUNKS // (N * pairs)))
        pc = max(PT, -(-(-(-hw // per)) // PT) * PT)
        # the pairs of a pixel chunk run in a row: a chunk of the input (all its channels) within half of L2 is
        # read from memory once, not once per pair (28x28 x 256 channels, 800 KB, ran 15% below the GEMM path)
        pc = min(pc, max(PT, ctx.target.l2_bytes // 2 // (4 * _blocks(C, b) * b) // PT * PT))
        # (a strided conv's row chunks set its items at run time; a layer too small for the pool keeps its tile)
        if not rows and _par.worth_splitting(ctx.target, _par.layer_us(ctx.target, macs, 0), _par.DRIVER_JOBS):
            from edgec.codegen.options import active
            kt = balanced_kt(kb, kt, N * -(-hw // pc), active().threads, g["G"] == 1 and shuffled <= 1)
            pairs = -(-kb // kt)
        union = max(rng[min(k + kt - 1, kb - 1)][1] - rng[k][0] for k in range(0, kb, kt))  # a tile's channels
        items = N * pairs * -(-hw // pc)
        kc = pass_channels(ctx.target, kt, union, b)
        fn, algo = f"f32_nchwc_conv1x1__{isa}", f"conv1x1-nchwc-{PT}x{kt * b}-{isa}" + (
            f"-g{g['G']}" if g["G"] > 1 else "") + (f"-shuffled{shuffled}" if shuffled > 1 else "") + suffix
        if g["G"] == 1 and shuffled <= 1:  # f32_nchwc_1x1_blocks' dense path: res == y starts from the output
            take_residual_buffer(node)
    else:
        raise EdgecError(f"internal: node {node.name} (Conv) has no channel-blocked kernel")
    wptr = ctx.weight(f"nchwc-w-{b}:{node.name}", wp)
    if g["G"] == C == K:
        ws = 0
    ctx.note(algo=algo, macs=macs, layout=y.layout, kernel=fn, **({"kc": kc} if kc > 1 else {}),
             why=f"channel-blocked region: {b} channels per vector, taps and epilogue at full width")
    keys = "N C H W K Ho Wo KH KW SH SW DH DW PT PL"
    shape = ", ".join(f"{g[k]}u" for k in keys.split())
    groups = 1 if g["G"] == C == K else g["G"]  # depthwise ignores it
    run = (f"f32_nchwc_im2col_conv(&G, &S, &A, {rows}u, {ctx.pool});\n" if rows else
           f"f32_nchwc_conv_run(&S, &A, {items}u, {ctx.pool});\n")
    return (pre + f"static const f32_nchwc_conv_shape S = {{{shape}, {b}u, {pc}u, {groups}u, {kc}u, {ws}u, "
            f"{max(shuffled, 1)}u, {kt}u, {g0['Ho'] * g0['Wo']}u, {fn}}};\n"
            f"const f32_nchwc_conv_args A = {{{'G.y' if rows else xptr}, {ctx.ptr(y)}, {wptr}, "
            f"{epilogue_fields(node, ctx, bias)}, NULL}};\n" + run)


def emit_pool(node: Node, ctx: EmitContext, k, s, d, ins, outs, pb, pe, avg_count_pad: int | None) -> str:
    """MaxPool (avg_count_pad None) or AveragePool over 2-D windows."""
    x, y = node.inputs[0], node.outputs[0]
    b = y.block
    isa = _kernels(ctx, b)
    N, C = x.shape[:2]
    cb = _blocks(C, b)
    per = max(1, -(-_par.CHUNKS // (N * cb)))
    rc = max(1, -(-outs[0] // per))
    kind = "maxpool" if avg_count_pad is None else "avgpool"
    ctx.note(algo=f"{kind}-nchwc-{isa}", macs=y.size * k[0] * k[1], layout=y.layout)
    vals = [N, C, ins[0], ins[1], outs[0], outs[1], k[0], k[1], s[0], s[1], d[0], d[1], pb[0], pb[1], pe[0], pe[1],
            b, rc]
    shape = ", ".join(f"{v}u" for v in vals)
    return (f"static const f32_nchwc_pool_shape S = {{{shape}, {int(avg_count_pad is None)}, "
            f"{int(avg_count_pad or 0)}, f32_nchwc_pool__{isa}}};\n"
            f"f32_nchwc_pool_run(&S, {ctx.ptr(x)}, {ctx.ptr(y)}, {ctx.pool});\n")


def emit_gavgpool(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    b = y.block
    isa = _kernels(ctx, b)
    N, C, H, W = x.shape
    ctx.note(algo=f"gavgpool-nchwc-{isa}", macs=x.size, layout=y.layout)
    vals = [N, C, H, W, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, b, 1]
    return (f"static const f32_nchwc_pool_shape S = {{{', '.join(f'{v}u' for v in vals)}, 0, 0, "
            f"f32_nchwc_gavgpool__{isa}}};\n"
            f"f32_nchwc_pool_run(&S, {ctx.ptr(x)}, {ctx.ptr(y)}, {ctx.pool});\n")


def emit_scale(node: Node, ctx: EmitContext, x: Tensor, sc: Tensor) -> str:
    """x [N,C,H,W] * s [N,C,1,1] (squeeze-excite), both blocked."""
    y = node.outputs[0]
    b = y.block
    isa = _kernels(ctx, b)
    N, C = x.shape[:2]
    ctx.note(algo=f"scale-nchwc-{isa}", macs=y.size, layout=y.layout)
    return (f"static const f32_nchwc_scale_shape S = {{{N}u, {C}u, {_spatial(x)}u, {b}u}};\n"
            f"f32_nchwc_scale_run(&S, f32_nchwc_scale__{isa}, {ctx.ptr(x)}, {ctx.ptr(sc)}, {ctx.ptr(y)}, "
            f"{ctx.pool});\n")


def emit_flat(node: Node, ctx: EmitContext, expr, operands: list[Tensor]) -> str:
    """Same-layout elementwise op over the stored elements, padded channels included (they stay finite)."""
    y = node.outputs[0]
    if any(t.block != y.block or t.shape != y.shape for t in operands):
        raise EdgecError(f"internal: node {node.name} mixes layouts")
    n = y.stored_size
    ptrs = [ctx.ptr(t) for t in operands]
    yp = ctx.ptr(y)
    ctx.note(algo=f"elementwise-{y.layout}", layout=y.layout)
    lo, hi = "0", f"{n}u"
    if _par.split(ctx, _par.flat_items(n, 256), n * (len(operands) + 1)):
        lo, hi = "ec_b * 256u", f"(ec_e * 256u < {n}u ? ec_e * 256u : {n}u)"
    lines = [f"for (size_t i = {lo}; i < {hi}; i++) {{",
             f"    float v = {expr([f'{p}[i]' for p in ptrs])};",
             *("    " + ln for ln in epilogue_lines(node, ctx, "v", "i")),
             f"    {yp}[i] = v;", "}"]
    return block(lines)


def emit_act(node: Node, ctx: EmitContext, act) -> str:
    return emit_flat(node, ctx, lambda v: act_expr(act[0], act[1], v[0]), [node.inputs[0]])


SHUFFLE_OP = "ChannelShuffle"


def emit_shuffle(node: Node, ctx: EmitContext, groups: int) -> str:
    """The channel shuffle (codegen/layout.py fuses its Reshape, Transpose, Reshape), blocked in and out: every
    output block gathers its lanes from the blocks holding their source channels."""
    x, y = node.inputs[0], node.outputs[0]
    b = y.block
    if x.block != b:
        raise EdgecError(f"internal: node {node.name} mixes layouts")
    isa = _kernels(ctx, b)
    N, C = x.shape[:2]
    ctx.note(algo=f"shuffle-nchwc-g{groups}-{isa}", macs=0, layout=y.layout)
    return (f"static const f32_nchwc_shuffle_shape S = {{{N}u, {C}u, {_spatial(x)}u, {b}u, {groups}u}};\n"
            f"f32_nchwc_shuffle_run(&S, f32_nchwc_shuffle__{isa}, {ctx.ptr(x)}, {ctx.ptr(y)}, {ctx.pool});\n")


def emit_concat(node: Node, ctx: EmitContext) -> str:
    """Concat on channels of blocked tensors whose channel counts (all but the last) are whole blocks: per image,
    each input's blocks are one run of the output's."""
    from edgec.codegen.ops.movement import _segments
    y = node.outputs[0]
    b = y.block
    xs = [t for t in node.inputs if t is not None and t.size]
    if any(t.block != b for t in xs) or any(t.shape[1] % b for t in xs[:-1]):
        raise EdgecError(f"internal: node {node.name} (Concat) has inputs that are not whole channel blocks")
    from edgec.codegen.memory import INPLACE_ATTR
    nested = {id(t) for t, f in zip(node.inputs, node.attr(INPLACE_ATTR) or []) if f}
    N = y.shape[0]
    per = y.stored_size // N  # stored elements an image (int8: planes of a 16-pixel pitch, codegen/q8layout.py)
    segs, off = [], 0
    for t in xs:
        n = t.stored_size // N
        if id(t) not in nested:  # a nested input's layer wrote it into its place in y (codegen/memory.py)
            segs.append((ctx.ptr(t), n, off))
        off += n
    if not segs:
        ctx.note(algo="in-place", layout=y.layout)
        return "/* every input was written into its place in the output */\n"
    ctx.note(algo="copy-nchwc" if not nested else "copy-part-nchwc", layout=y.layout)
    # the copies see the stored elements: a flat tensor of the output's padded size
    return _segments(ctx, ctx.ptr(y), Tensor(y.name, (N * per,), y.dtype), N, per, segs, into_big=True)
