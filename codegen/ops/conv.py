"""Conv (1-D and 2-D, NCHW float32): per layer, depthwise / GSPC / dense packed GEMM.

Choice: groups == C == K -> depthwise kernel; other grouped convs with a window -> GSPC
(gspc.md; measured 1.4-2x faster than per-group GEMM on 3x3 layers with few channels a group), or one GEMM
per group where grouped_gemm's estimate says so (many channels a group); groups == 1 and grouped
1x1 -> spatial-pack GEMM (per group), except dense layers with at most 4 input channels (stems), which
run a direct kernel (runtime_c/f32-conv/f32-conv-smallc.h) where costmodel.choose_smallc says it wins.
Weights are packed here in the layout the chosen kernel reads, the epilogue (bias, activation, residual) runs in the kernel's output loop, and the
shape goes into a static const struct so the inlined C driver folds every bound.
"""

from __future__ import annotations


import numpy as np

from edgec.codegen import costmodel, kernels, memory, options
from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node
from edgec.codegen.ops._util import flt
from edgec.codegen.ops.pool import window_pads
from edgec.codegen.registry import register
from edgec.errors import EdgecError

_ACT = {None: "EC_ACT_NONE", "relu": "EC_ACT_RELU", "clip": "EC_ACT_CLIP", "leaky_relu": "EC_ACT_LEAKY_RELU",
        "sigmoid": "EC_ACT_SIGMOID", "hard_sigmoid": "EC_ACT_HARD_SIGMOID", "hard_swish": "EC_ACT_HARD_SWISH",
        "silu": "EC_ACT_SILU", "tanh": "EC_ACT_TANH", "gelu": "EC_ACT_GELU"}


def act_literal(act: str | None, p: dict) -> str:
    """C initializer of an ec_act."""
    a, b = 0.0, 0.0
    if act == "clip":
        a, b = p.get("min", -3.4e38), p.get("max", 3.4e38)
    elif act == "leaky_relu":
        a = p.get("alpha", 0.01)
    elif act == "hard_sigmoid":
        a, b = p.get("alpha", 0.2), p.get("beta", 0.5)
    return f"{{{_ACT[act]}, {flt(a)}, {flt(b)}}}"


def epilogue_fields(node: Node, ctx: EmitContext, bias) -> str:
    """bias, res, res_before_act, act initializers shared by the conv/gemm args structs."""
    ep = node.epilogue
    res = ctx.ptr(ep.residual) if ep.residual is not None else "NULL"
    return f"{bias}, {res}, {int(ep.residual_before_act)}, {act_literal(ep.act, ep.act_params)}"


def geometry(node: Node) -> dict:
    """Resolved 2-D geometry (Conv1D as H = 1), pads from pads/auto_pad."""
    x, w, y = node.inputs[0], node.inputs[1], node.outputs[0]
    for t in (x, w, y):
        if t.dtype != np.float32:
            raise EdgecError(f"node {node.name} (Conv): only float32 is supported here, got {t.dtype.name}")
    nsp = len(x.shape) - 2
    if nsp not in (1, 2):
        raise EdgecError(f"node {node.name} (Conv): {nsp}-D convolution is not supported (1-D and 2-D are)")
    if not w.is_const:
        raise EdgecError(f"node {node.name} (Conv): weights must be constant")
    k = list(w.shape[2:])
    s = list(node.attr("strides", [1] * nsp))
    d = list(node.attr("dilations", [1] * nsp))
    ins, outs = list(x.shape[2:]), list(y.shape[2:])
    pb, _ = window_pads(node, ins, outs, k, s, d)
    if nsp == 1:
        k, s, d, ins, outs, pb = [1] + k, [1] + s, [1] + d, [1] + ins, [1] + outs, [0] + list(pb)
    g = int(node.attr("group", 1))
    N, C = x.shape[:2]
    K = y.shape[1]
    if C % g or K % g or w.shape[1] != C // g:
        raise EdgecError(f"node {node.name} (Conv): channels {C}->{K} do not match group={g} and weights {w.shape}")
    return dict(N=N, C=C, H=ins[0], W=ins[1], K=K, Ho=outs[0], Wo=outs[1], G=g, KH=k[0], KW=k[1],
                SH=s[0], SW=s[1], DH=d[0], DW=d[1], PT=int(pb[0]), PL=int(pb[1]))


def _bias(node: Node, ctx: EmitContext) -> str:
    b = node.input(2)
    if b is None:
        return "NULL"
    return ctx.ptr(b)


def take_residual_buffer(node: Node) -> None:
    """Called by a path whose driver accumulates onto the output when the residual is the output's own buffer
    (res == y, memory.mark_residual_outputs): the planner then gives the output the residual's buffer."""
    if node.attr(memory.RES_ATTR):
        node.attrs[memory.RES_ATTR] = memory.RES_TAKEN


@register("Conv", epilogue=True)
def emit(node: Node, ctx: EmitContext) -> str:
    if node.attr(memory.RES_ATTR):  # the offer stands until a path takes it (an emitter may run more than once)
        node.attrs[memory.RES_ATTR] = memory.RES_CANDIDATE
    g = geometry(node)
    w = node.inputs[1].const.reshape(g["K"], g["C"] // g["G"], g["KH"], g["KW"]).astype(np.float32)
    # the layer's own MACs: a conv whose groups layout.merge_groups merged reads some of its neighbours' channels too
    macs = g["N"] * g["K"] * (g["C"] // node.attr("ec_merged_groups", g["G"])) * g["KH"] * g["KW"] * g["Ho"] * g["Wo"]
    if node.outputs[0].block:  # inside a channel-blocked region (codegen/layout.py)
        if not node.inputs[0].block and smallc_kernel(ctx.target, g) is not None:  # a stem writing the region
            return _emit_smallc(node, ctx, g, w, macs, node.outputs[0].block)
        wino = _winograd_choice(node, ctx, g)
        if wino is not None:  # layout.kind "wino": the Winograd driver reads and writes the blocks
            if wino.algo == "direct":
                raise EdgecError(f"internal: node {node.name} is blocked for Winograd, which it does not run")
            from edgec.codegen.ops import winograd
            return winograd.emit(node, ctx, g, w, macs, wino)
        from edgec.codegen.ops import nchwc
        return nchwc.emit_conv(node, ctx, g, w, macs)
    if g["G"] == g["C"] == g["K"]:
        return _emit_dw(node, ctx, g, w, macs)
    if _smallc_choice(node, ctx, g):
        return _emit_smallc(node, ctx, g, w, macs, 0)
    wino = _winograd_choice(node, ctx, g)
    if wino is not None and wino.algo != "direct":
        from edgec.codegen.ops import winograd
        return winograd.emit(node, ctx, g, w, macs, wino)
    if g["G"] > 1 and g["KH"] * g["KW"] > 1 and not grouped_gemm(ctx.target, g):
        return _emit_gspc(node, ctx, g, w, macs)  # grouped 1x1 has no window to reuse: GEMM per group
    if g["G"] == 1 and strided_direct(ctx.target, g):
        return _emit_gspc(node, ctx, g, w, macs)
    return _emit_gemm(node, ctx, g, w, macs)


def _winograd_choice(node: Node, ctx: EmitContext, g: dict):
    """costmodel.Choice for a 3x3 stride-1 layer (Winograd F(m,3) or direct), None for other layers; a
    direct choice's reason is noted for --explain."""
    from edgec.codegen.ops import winograd
    if not winograd.eligible(g):
        return None
    # groups merged for it (layout.merge_groups) or a region record's tile: the layout pass chose
    if node.outputs[0].block and node.attr("ec_blocked_wino"):
        m = node.attr("ec_blocked_wino").removeprefix("winograd-f")[0]
        why = [f"blocked, {node.attr('ec_merged_groups')} groups merged into {g['G']} of whole blocks (each "
               "block reads its groups' channels)"] if node.attr("ec_merged_groups") else []
        if node.attr("ec_wino_tuned"):
            why.append(f"F({m},3): its region's tuning record")
        return costmodel.Choice(node.attr("ec_blocked_wino"), "; ".join(why) or f"blocked F({m},3)", {})
    cols, kind = direct_path_3x3(ctx.target, g)
    # in a blocked region a grouped conv's Winograd runs one dense conv a group (layout._wino chose the same way)
    choose = winograd.choose_blocked if node.outputs[0].block else winograd.choose
    choice = choose(ctx.target, g, cols, kind)
    if choice.algo == "direct":
        ctx.note(winograd=choice.why)
    return choice


def direct_path_3x3(target, g: dict) -> tuple[int, str]:
    """(columns, kind) of the direct path a 3x3 stride-1 layer would take: what the cost model weighs
    Winograd against (kind s1 | pack | gspc)."""
    if g["G"] > 1 and not grouped_gemm(target, g):
        return g["Ho"] * g["Wo"], "gspc"
    return gemm_path(target, g)


def gemm_path(target, g: dict) -> tuple[int, str]:
    """(padded columns, kind s1 | pack) of the packed GEMM path on a conv with a window, per group."""
    nr = kernels.igemm_kernel(target).params["nr"]
    s1 = use_indirect(g, nr)
    cols = (g["Ho"] - 1) * (g["Wo"] + (g["KW"] - 1) * g["DW"]) + g["Wo"] if s1 else g["Ho"] * g["Wo"]
    return -(-cols // nr) * nr, ("s1" if s1 else "pack")


# Below this many channels a group the GEMM estimate leaves out what its short K loops and padded tiles cost
# (64ch 56x56 stride 2 g=8, Cpg 8: the GEMM measured 2.5x GSPC's time where the estimates were within 20%)
GROUPED_GEMM_MIN = 32


def grouped_gemm(target, g: dict) -> bool:
    """Whether a grouped conv with a window runs as one packed GEMM per group instead of GSPC: forced by
    EDGEC_GSPC (gemm, or a GSPC family) or a tuning record, else the cheaper estimate. Few channels a group
    leave a GEMM's tiles mostly padding and its packing unshared (GSPC measured 1.4-2x faster on such 3x3
    layers); with many a group the GSPC tile's weights and rows outgrow L1 (costmodel._GSPC_L1), while the
    GEMM's register tile streams its packed panels at its usual rate. Zen 3, 1 thread, thread CPU
    time (bench_gspc.py --variants): 576ch 14x14 stride 2 g=2 3.35 ms against GSPC 4.04, 192ch 28x28 stride 2
    g=2 0.84 against 1.04; at g=4 of 192ch GSPC 0.43-0.60 against 0.71."""
    mode = options.active().gspc
    if mode != "auto":
        return mode == "gemm"
    from edgec.codegen import costmodel
    m = costmodel.measured(target, costmodel.layer_key("gspc", C=g["C"], OC=g["K"], g=g["G"],
                                                      k=f"{g['KH']}x{g['KW']}", s=g["SW"], px=g["Ho"] * g["Wo"]))
    if m in ("tile", "ow", "mg", "gemm"):
        return m == "gemm"
    if min(g["C"], g["K"]) // g["G"] < GROUPED_GEMM_MIN:
        return False
    gemm, _, gspc = _gemm_and_gspc(target, g)
    return gemm < gspc


def _gemm_and_gspc(target, g: dict) -> tuple[float, object, float]:
    """(packed GEMM estimate, GSPC row kernel, its estimate) of a conv with a window."""
    k = kernels.gemm_kernel(target)
    cols, kind = gemm_path(target, g)
    gemm = costmodel.direct_estimate(target, g, k.params["mr"], k.params["nr"], cols, kind)["cost"]
    kk, t_o, _, owb = gspc_tiles(target, g)
    return gemm, kk, costmodel.gspc_estimate(target, g, kk, t_o, owb)


def strided_direct(target, g: dict) -> bool:
    """Whether a dense strided conv with a window runs GSPC's row kernel with one group (a direct conv over one
    padded copy of the input) instead of the spatial-pack GEMM: forced by EDGEC_GSPC (gemm, or a GSPC family),
    else the cheaper estimate. The GEMM copies every tap of the input (KH*KW times its pixels at stride 1) and
    pads the pixels to its tile; the row kernel reads the input in place, a row of output pixels a block.
    Zen 5, 1 thread, one 3x3 stride-2 layer (bench_gspc.py shapes, GEMM -> two-vector tile): 64ch 56x56 0.313 ->
    0.249 ms, 128ch 28x28 0.307 -> 0.235, 96ch 112x112 2.42 -> 2.20, 256ch 14x14 0.265 -> 0.232, 576ch 14x14
    1.24 -> 1.17 (the estimate keeps this one on the GEMM: its 425 KB working set)."""
    if g["KH"] * g["KW"] == 1 or g["SH"] * g["SW"] == 1 or smallc_kernel(target, g) is not None:
        return False  # 1x1: a GEMM; stride 1: Winograd / the indirect GEMM; stems: choose_smallc's measured pick
    mode = options.active().gspc
    if mode != "auto":
        return mode != "gemm"
    m = costmodel.measured(target, costmodel.layer_key("gspc", C=g["C"], OC=g["K"], g=1, k=f"{g['KH']}x{g['KW']}",
                                                      s=g["SW"], px=g["Ho"] * g["Wo"]))
    if m in ("tile", "gemm"):  # a tuning database (EDGEC_TUNING_DB) measured the two
        return m == "tile"
    gemm, kk, gspc = _gemm_and_gspc(target, g)
    return kk.op == "gspc" and gspc < gemm


def _shape_init(g: dict, keys: str) -> str:
    return ", ".join(f"{g[k]}u" for k in keys.split())


def k_block(target, k: int, nr: int) -> int:
    """K block (KC) of the packed GEMM drivers (conv, transposed conv, Gemm/MatMul): the whole K while a
    kc x NR panel of packed B fits an eighth of L2, as it streams from L2 sequentially well enough; each
    further K block reloads and stores the C tile again. Half of L1 (K blocks of 256 on AVX2) measured
    4-7% slower on 512-1024-channel 1x1 layers and the MatMuls (bench_gemm.py, Zen 3)."""
    kc = max(16, (target.l2_bytes // 8) // (nr * 4) // 16 * 16)
    return k if k <= kc * 5 // 4 else kc


def scale_kc(kc: int, k: int, mode: str | None = None) -> int:
    """KC after a forced blocking (mode, or CompileOptions.blk: a tuning record's blk-* variant): halved (into
    blocks of whole multiples of 8, at least 8) or the whole K; the cost model's otherwise."""
    mode = options.active().blk if mode is None else mode
    if mode == "kc-whole":
        return k
    if mode == "kc-half":
        return max(8, -(-min(kc, k) // 16) * 8)
    return kc


def scale_nc(nc: int, cols: int, nr: int, mode: str | None = None) -> int:
    """Column block (or output-channel block of the transposed path) after a forced blocking: halved or doubled,
    kept a multiple of NR, at least NR and at most the columns rounded up to NR. Scaled after split_work, which
    narrows most layers' blocks to PAR_ITEMS items: doubled, a layer has half as many (fewer packs and ring
    start-ups per item), halved, twice as many. Winograd: its tile block (TB, NR = MR)."""
    mode = options.active().blk if mode is None else mode
    if mode == "nc-half":
        nc = nc // 2 // nr * nr
    elif mode == "nc-double":
        nc = 2 * nc
    return max(nr, min(nc, -(-cols // nr) * nr))


def _emit_gemm(node: Node, ctx: EmitContext, g: dict, w: np.ndarray, macs: int) -> str:
    t = ctx.target
    k = kernels.gemm_kernel(t)
    mr, nr = k.params["mr"], k.params["nr"]
    G, kpg, kg, howo = g["G"], g["K"] // g["G"], g["C"] // g["G"] * g["KH"] * g["KW"], g["Ho"] * g["Wo"]
    kc = scale_kc(k_block(t, kg, nr), kg)
    if transposed(g, mr, nr, kernels.igemm_kernel(t).params["nr"]):
        return _emit_convt(node, ctx, g, w, macs, k, kc)
    # Column block packed once and re-read per K block: a quarter of L2. With one K block the driver packs
    # each panel while the previous one computes, into a ring of two panels (f32_conv_ring), so the block
    # has at least 8 panels to overlap (3x3 s2 128 @56 had one: 0.97x -> 0.91x the time); more than the L2
    # budget measured slower (the 7x7 s2 stem at 416-1568 columns: 0.83-0.95x of 208, bench_gemm.py --split).
    ring = kc >= kg
    nc = max(nr, min((t.l2_bytes // 4) // (kg * 4) // nr * nr, -(-howo // nr) * nr))
    if ring:
        nc = max(nc, min(8 * nr, -(-howo // nr) * nr))
    nc, msplit = split_work(g["N"] * G, howo, nc, nr, kpg, mr)
    nc = scale_nc(nc, howo, nr)
    # each M chunk would pack its B block again: split columns only, unless a record forces rows
    msplit = msplit if options.active().par == "rows" else 1
    mp = -(-kpg // mr) * mr
    packed = np.zeros((G, mp, kg), np.float32)
    packed[:, :kpg] = w.reshape(G, kpg, kg)
    packed = packed.reshape(G, mp // mr, mr, kg).transpose(0, 1, 3, 2)
    wp = ctx.weight(f"conv-gemm-{mr}:{node.name}", np.ascontiguousarray(packed))
    kind = "gemm" if G == 1 else "gemm-grouped"
    shape = _shape_init(g, "N C H W K Ho Wo G KH KW SH SW DH DW PT PL")
    x, y, epi = ctx.ptr(node.inputs[0]), ctx.ptr(node.outputs[0]), epilogue_fields(node, ctx, _bias(node, ctx))
    if use_indirect(g, kernels.igemm_kernel(ctx.target).params["nr"]):
        return _emit_s1(node, ctx, g, wp, kind, macs, x, y, epi)
    mc = row_passes(t, g, kg, kpg, howo, nc, mr)
    take_residual_buffer(node)  # f32_conv_gemm_item_ms: res == y accumulates onto the output
    per = kg * (min(nc, 2 * nr) if ring and not mc else nc)
    scratch = ctx.scratch(kernels.SCRATCH_THREADS * per * 4)
    ctx.require(k.file, "f32-conv/f32-conv.h")
    # a 1x1's panels packed by their first strip's kernel (f32_conv_block_ahead), not by copies between tiles,
    # where few output rows share each copied row (Zen 5, one layer, 1 thread: 256->64 @56 0.93x on AVX2 code,
    # 0.87x on AVX-512; 512->128 @28 0.96x / 0.95x; with 256 rows 1024->256 @14 0.98x, 64->256 @56 1.01-1.05x)
    packb = is_direct(g) and kpg <= _PACKB_ROWS
    ukp = k.params["packb"] if packb else "NULL"
    ctx.note(algo=f"{kind}-{k.tile}-{k.isa}", macs=macs, kernel=k.name, kc=kc, nc=nc, msplit=msplit, mc=mc,
             packb=packb)
    return (f"static const f32_conv_shape S = {{{shape}, {mr}u, {nr}u, {kc}u, {nc}u, {msplit}u, {k.name}, {mc}u, "
            f"{ukp}}};\n"
            f"const f32_conv_args A = {{{x}, {y}, {wp}, {epi}, (float *){scratch}, {per}u}};\n"
            f"f32_conv_run(&S, &A, {ctx.pool});\n")


def row_passes(target, g: dict, kg: int, kpg: int, howo: int, nc: int, mr: int) -> int:
    """MC of f32_conv_block_ahead (0 = one pass): a 1x1 stride-1 layer whose output does not fit L2 runs its rows
    one MR strip at a time over the whole column block, so the output and residual rows stream as a few sequential
    lines instead of one line of every row per NR panel, when the block's packed B (then kept whole, re-read
    from L2 per tile) fits a quarter of L2. ResNet-50 inside the model (Zen 3, thread CPU time, three interleaved
    runs): its eight 56x56 1x1 layers 0.85-0.89x the time; the 28x28 and 14x14 ones this also picks 0.98-1.02x."""
    if not is_direct(g) or kpg <= mr:
        return 0
    if kg * nc * 4 > target.l2_bytes // 4 or kpg * howo * 4 <= target.l2_bytes:
        return 0
    return mr


_PACKB_ROWS = 128  # output channels (a group's) up to which a 1x1 packs B in its first strip's kernel
_PACK_MACS = 8.0  # one im2col copy costs about as much as 8 MACs of the microkernel (bench_gemm.py --split)


_SHORT_TAIL = 4  # pixels past a multiple of MR below which the transposed path's rows are charged P//MR*MR + this


def transposed(g: dict, mr: int, nr: int, inr: int) -> bool:
    """Dense conv whose output pixels fill NR-wide tiles badly (a 7x7 map: 49 of 64 columns, 61 on the
    stride-1 indirect path) while its output channels fill them well: run Y^T = A W^T with the pixels on
    the MR rows. Costs compared: padded MACs, plus packing (each copied element ~_PACK_MACS MACs, spread
    over the K outputs that use it) where a path packs: the transposed one always, the NCHW one unless it
    reads the input in place; a 1x1's copy is half that on either path. Chosen when 15% cheaper: at 14x14
    (5% less padding) it measured 0-9% slower, at 7x7 12-19% faster (bench_gemm.py, Zen 3). With the NCHW
    path's 1x1 copy charged in full, SqueezeNet's 16- and 32-channel squeeze layers at 55x55 and 27x27 went
    transposed and the model ran 1.025-1.037x slower (CPU and wall time, two interleaved runs).
    The transposed path cuts the P pixels into balanced strips (f32_convt_strip: 49 on MR = 12 are 5 strips of
    9-10 rows), so ceil(P/MR)*MR rows overcharge it most where P is just past a multiple of MR: there (fewer
    than _SHORT_TAIL pixels past it) it is charged P//MR*MR + _SHORT_TAIL rows. Charged in full, AVX-512's 12x32
    tile at 7x7 (60 of 49 rows against 64 of 49 columns) stayed on the NCHW path, which ran ResNet-50's 7x7
    layers 1.15-1.5x slower than gemm-t there (Xeon Emerald Rapids, 1 thread, in the model); charged its
    exact P rows everywhere, the 14x14 layers (P % 12 = 4) went to gemm-t too, 1.0-1.25x slower."""
    if g["G"] != 1:
        return False
    p, k = g["Ho"] * g["Wo"], g["K"]
    in_place = use_indirect(g, inr)
    cols = p if is_direct(g) or not in_place else (g["Ho"] - 1) * (g["Wo"] + (g["KW"] - 1) * g["DW"]) + g["Wo"]
    tile = inr if in_place else nr
    copy = _PACK_MACS / 2 if is_direct(g) else _PACK_MACS
    normal = (-(-cols // tile) * tile / p) * (-(-k // mr) * mr / k) * (1 + (0 if in_place else copy / k))
    rows = p // mr * mr + _SHORT_TAIL if 0 < p % mr < _SHORT_TAIL <= mr else -(-p // mr) * mr
    flipped = (rows / p) * (-(-k // nr) * nr / k) * (1 + copy / k)
    return normal > 1.15 * flipped


def _emit_convt(node: Node, ctx: EmitContext, g: dict, w: np.ndarray, macs: int, k, kc: int) -> str:
    mr, nr = k.params["mr"], k.params["nr"]
    kout, p = g["K"], g["Ho"] * g["Wo"]
    kg = g["C"] * g["KH"] * g["KW"]
    kp = -(-kout // nr) * nr
    wt = np.zeros((kg, kp), np.float32)
    wt[:, :kout] = w.reshape(kout, kg).T
    packed = np.ascontiguousarray(wt.reshape(kg, kp // nr, nr).transpose(1, 0, 2))  # [K/NR][Kg][NR]
    wp = ctx.weight(f"conv-t-{nr}:{node.name}", packed)
    per_n = max(1, -(-PAR_ITEMS // g["N"]))  # output-channel blocks per image, so threads have items
    kch = scale_nc(max(nr, -(-(-(-kout // per_n)) // nr) * nr), kout, nr)
    pp = -(-p // mr) * mr
    per = pp * nr + pp
    a = ctx.scratch(g["N"] * pp * kg * 4)
    scratch = ctx.scratch(kernels.SCRATCH_THREADS * per * 4)
    ctx.require(k.file, "f32-conv/f32-convt.h")
    take_residual_buffer(node)  # f32_convt_item_sb: res == y accumulates onto the output
    ctx.note(algo=f"gemm-t-{k.tile}-{k.isa}", macs=macs, kernel=k.name, kc=kc, kch=kch)
    x, y, epi = ctx.ptr(node.inputs[0]), ctx.ptr(node.outputs[0]), epilogue_fields(node, ctx, _bias(node, ctx))
    shape = _shape_init(g, "N C H W K Ho Wo KH KW SH SW DH DW PT PL")
    return (f"static const f32_convt_shape S = {{{shape}, {mr}u, {nr}u, {kc}u, {kch}u, {k.name}}};\n"
            f"const f32_convt_args A = {{{x}, {y}, {wp}, {epi}, (float *){a}, (float *){scratch}, {per}u}};\n"
            f"f32_convt_run(&S, &A, {ctx.pool});\n")


PAR_ITEMS = 8  # work items a layer offers, so run-time --threads up to ~4 keep both halves busy


def split_work(groups: int, cols: int, nc: int, nr: int, kpg: int, mr: int) -> tuple[int, int]:
    """(columns per item, M chunks): narrower column blocks first, then row chunks. A tuning record may
    force one axis for the layer (CompileOptions.par cols | rows, codegen/variants.py)."""
    axis = options.active().par
    items = groups * -(-cols // nc)
    if items < PAR_ITEMS and axis != "rows":
        per = -(-PAR_ITEMS // groups)
        nc = max(nr, -(-(-(-cols // per)) // nr) * nr)
        items = groups * -(-cols // nc)
    msplit = max(1, min(-(-kpg // mr), -(-PAR_ITEMS // items))) if items < PAR_ITEMS and axis != "cols" else 1
    return nc, msplit


def use_indirect(g: dict, nr: int) -> bool:
    """Stride-1 windows read B in place unless the padded-width columns cost over 10% more
    NR-wide panels than the packed pixels (on small maps both round up to the same panels)."""
    if g["SH"] != 1 or g["SW"] != 1:
        return False
    if g["KH"] * g["KW"] == 1:
        # 1x1 packs unless forced in place (EDGEC_GEMM1X1, a tuning record): the copy of panel p+1 overlaps
        # panel p's row strips (f32_conv_block_ahead) and the microkernel then streams contiguous panels; reading
        # B rows in place (one cache line and often one page per row) ran 5-11% slower at 28x28 and 24x24
        # (bench_gemm.py, Zen 3).
        return is_direct(g) and options.active().gemm1x1 == "inplace"
    wp = g["Wo"] + (g["KW"] - 1) * g["DW"]
    direct = -(-((g["Ho"] - 1) * wp + g["Wo"]) // nr)
    packed = -(-(g["Ho"] * g["Wo"]) // nr)
    return direct <= 1.1 * packed


def is_direct(g: dict) -> bool:
    """1x1, stride 1, no padding: B rows are the input channels themselves."""
    return g["KH"] == g["KW"] == 1 and g["SH"] == g["SW"] == 1 and g["PT"] == g["PL"] == 0 \
        and g["Ho"] == g["H"] and g["Wo"] == g["W"]


def _emit_s1(node, ctx, g, wp, kind, macs, x, y, epi) -> str:
    ik = kernels.igemm_kernel(ctx.target)
    mr, nr = ik.params["mr"], ik.params["nr"]
    G, kpg, cpg = g["G"], g["K"] // g["G"], g["C"] // g["G"]
    kg = cpg * g["KH"] * g["KW"]
    hp, wp_ = g["Ho"] + (g["KH"] - 1) * g["DH"], g["Wo"] + (g["KW"] - 1) * g["DW"]
    cols = (g["Ho"] - 1) * wp_ + g["Wo"]
    # 1x1 reads B rows in place, one cache line per row of the panel: keep the kc x NR panel within half of L1
    # (K = 1024 streamed from L2 for every row strip cost ~10% of the layer); windows keep their longer K.
    kc = kg if kg <= 1152 else 576
    if is_direct(g):
        l1 = max(64, (ctx.target.l1d_bytes // 2) // (nr * 4) // 8 * 8)
        kc = kg if kg <= l1 * 5 // 4 else l1
    kc = scale_kc(kc, kg)
    mp = -(-kpg // mr) * mr
    nc = max(nr, min(-(-cols // nr) * nr, (ctx.target.l2_bytes // 4) // (mp * 4) // nr * nr))
    nc, msplit = split_work(g["N"] * G, cols, nc, nr, kpg, mr)
    nc = scale_nc(nc, cols, nr)
    c, kh, kw = np.meshgrid(np.arange(cpg), np.arange(g["KH"]), np.arange(g["KW"]), indexing="ij")
    koff = (c * hp * wp_ + kh * g["DH"] * wp_ + kw * g["DW"]).astype(np.int32).ravel()
    kp = ctx.weight(f"conv-koff:{node.name}", koff)
    direct = is_direct(g)
    kpan = ctx.weight(f"conv-kpan-{nr}:{node.name}", (np.arange(kg) * nr).astype(np.int32)) if direct else "NULL"
    pad = x if direct else ctx.scratch((g["N"] * g["C"] * hp * wp_ + wp_ + nr) * 4)
    tper = kg * nr if direct else mp * -(-nc // nr) * nr  # direct: only a copied tail panel
    tmp = ctx.scratch(kernels.SCRATCH_THREADS * tper * 4)
    ctx.require(ik.file, "f32-conv/f32-conv.h")
    ctx.note(algo=f"{kind}-{'1x1' if direct else 's1'}-{ik.tile}-{ik.isa}", macs=macs, kernel=ik.name, kc=kc,
             nc=nc, msplit=msplit)
    shape = _shape_init(g, "N C H W K Ho Wo G KH KW DH DW PT PL")
    return (f"static const f32_conv_s1_shape S = {{{shape}, {hp}u, {wp_}u, {mr}u, {nr}u, {kc}u, {nc}u, "
            f"{msplit}u, {int(direct)}u, {ik.name}}};\n"
            f"const f32_conv_s1_args A = {{{x}, {y}, {wp}, {kp}, {kpan}, {epi}, (float *){pad}, (float *){tmp}, "
            f"{tper}u}};\n"
            f"f32_conv_s1_run(&S, &A, {ctx.pool});\n")


def pack_gspc_weights(w: np.ndarray, G: int, t_o: int, t_i: int) -> np.ndarray:
    """[K][Cpg][KH][KW] -> [G][ceil(Kpg/T_O)][Cpg/T_I][KH][KW][T_I][T_O], T_O tail zero-padded."""
    K, cpg, kh, kw = w.shape
    kpg = K // G
    tiles = -(-kpg // t_o)
    wg = np.zeros((G, tiles * t_o, cpg, kh, kw), np.float32)
    wg[:, :kpg] = w.reshape(G, kpg, cpg, kh, kw)
    wg = wg.reshape(G, tiles, t_o, cpg // t_i, t_i, kh, kw)
    return np.ascontiguousarray(wg.transpose(0, 1, 3, 5, 6, 4, 2))


GSPC_MODES = options.GSPC_MODES


def gspc_tiles(target, g: dict):
    """(kernel, T_O, T_I, ow block) per gspc.md's defaults, fitted to the row kernel.
    EDGEC_GSPC=tile|ow|mg forces one row-kernel family on every layer it can run (benchmarks)."""
    kpg = g["K"] // g["G"]
    mode = options.active().gspc
    if mode == "auto":  # a measured family for this layer (tuning database) wins over the defaults
        from edgec.codegen import costmodel
        m = costmodel.measured(target, costmodel.layer_key("gspc", C=g["C"], OC=g["K"], g=g["G"],
                                                          k=f"{g['KH']}x{g['KW']}", s=g["SW"], px=g["Ho"] * g["Wo"]))
        mode = m if m in ("tile", "ow", "mg") else mode
    cand = kernels.gspc_candidates(target, g)
    if mode == "mg" and "mg" in cand:
        return cand["mg"]
    if mode == "ow":  # strided rows too, through column phases
        ow = kernels.gspc_ow_kernel(target, kpg, 1, g["Wo"])
        if ow is not None:
            return ow, kpg, 1, 1
    if mode == "auto":  # the cheapest family by costmodel.gspc_estimate, unless this device's records said
        if "mg" in cand and kernels.gspc_mg_wins(target, cand["mg"][0], kpg, g):
            return cand["mg"]
        if "ow" in cand and kernels.gspc_ow_wins(target, kpg, g):
            return cand["ow"]
    return cand["tile"]


def _window_extent(g: dict) -> tuple[int, int]:
    """Padded input rows and columns the output window reads (Hp, Wp)."""
    return ((g["Ho"] - 1) * g["SH"] + (g["KH"] - 1) * g["DH"] + 1,
            (g["Wo"] - 1) * g["SW"] + (g["KW"] - 1) * g["DW"] + 1)


def _owb(wo: int, bmax: int) -> int:
    owb = kernels._largest_divisor(wo, bmax)
    return bmax if owb < bmax // 2 and wo > bmax else owb  # a tail block beats many tiny ones


def pack_gspc_mg_weights(w: np.ndarray, G: int, gb: int, kp: int) -> np.ndarray:
    """[K][Cpg][KH][KW] -> [ceil(G/gb)][Cpg][KH][KW][kp][gb] (lane = k*gb + group), zero-padded."""
    K, cpg, kh, kw = w.shape
    kpg, nblk = K // G, -(-G // gb)
    wg = np.zeros((nblk * gb, kp, cpg, kh, kw), np.float32)
    wg[:G, :kpg] = w.reshape(G, kpg, cpg, kh, kw)
    return np.ascontiguousarray(wg.reshape(nblk, gb, kp, cpg, kh, kw).transpose(0, 3, 4, 5, 2, 1))


def _emit_gspc(node: Node, ctx: EmitContext, g: dict, w: np.ndarray, macs: int) -> str:
    k, t_o, t_i, owb = gspc_tiles(ctx.target, g)
    if k.op == "gspc_mg":
        return _emit_gspc_mg(node, ctx, g, w, macs, k, owb)
    hp, wp_ = _window_extent(g)
    ph = 1
    if k.op == "gspc_ow":  # strided rows read as SW column phases
        ph, wp_ = g["SW"], g["Wo"] + (g["KW"] - 1) * g["DW"] // g["SW"]
    wp = ctx.weight(f"conv-gspc-{t_o}x{t_i}:{node.name}", pack_gspc_weights(w, g["G"], t_o, t_i))
    scratch = ctx.scratch(g["N"] * g["C"] * ph * hp * wp_ * 4)
    tail = kernels.gspc_tail_kernel(ctx.target, k, g["K"] // g["G"]) if k.op == "gspc" else None
    ctx.require(k.file, "f32-gspc/f32-gspc.h", *([tail.file] if tail else []))
    ctx.note(algo=f"gspc-{k.tile}-{k.isa}", macs=macs, kernel=k.name, t_o=t_o, t_i=t_i, owb=owb,
             **({"tail": tail.name} if tail else {}))
    shape = _shape_init(g, "N C H W K Ho Wo G KH KW SH SW DH DW PT PL")
    return (f"static const f32_gspc_shape S = {{{shape}, {t_o}u, {t_i}u, {owb}u, {hp}u, {wp_}u, {ph}u, {k.name}, "
            f"{tail.name if tail else 'NULL'}}};\n"
            f"const f32_gspc_args A = {{{ctx.ptr(node.inputs[0])}, {ctx.ptr(node.outputs[0])}, {wp}, "
            f"{epilogue_fields(node, ctx, _bias(node, ctx))}, (float *){scratch}}};\n"
            f"f32_gspc_run(&S, &A, {ctx.pool});\n")


def _emit_gspc_mg(node: Node, ctx: EmitContext, g: dict, w: np.ndarray, macs: int, k, owb: int) -> str:
    gb, kp = k.params["gb"], k.params["kp"]
    hp, wp_ = _window_extent(g)
    wp = ctx.weight(f"conv-gspc-g{gb}x{kp}:{node.name}", pack_gspc_mg_weights(w, g["G"], gb, kp))
    scratch = ctx.scratch(g["N"] * -(-g["G"] // gb) * gb * (g["C"] // g["G"]) * hp * wp_ * 4)
    ctx.require(k.file, "f32-gspc/f32-gspc.h", "f32-gspc/f32-gspc-mg.h")
    ctx.note(algo=f"gspc-{k.tile}-{k.isa}", macs=macs, kernel=k.name, gb=gb, kp=kp, owb=owb)
    shape = _shape_init(g, "N C H W K Ho Wo G KH KW SH SW DH DW PT PL")
    return (f"static const f32_gspc_mg_shape S = {{{shape}, {gb}u, {kp}u, {owb}u, {hp}u, {wp_}u, {k.name}}};\n"
            f"const f32_gspc_args A = {{{ctx.ptr(node.inputs[0])}, {ctx.ptr(node.outputs[0])}, {wp}, "
            f"{epilogue_fields(node, ctx, _bias(node, ctx))}, (float *){scratch}}};\n"
            f"f32_gspc_mg_run(&S, &A, {ctx.pool});\n")


DW_MODES = options.DW_MODES


def _emit_dw(node: Node, ctx: EmitContext, g: dict, w: np.ndarray, macs: int) -> str:
    """EDGEC_DW=plane|cb forces one depthwise family on every layer it can run (benchmarks)."""
    mode = options.active().dw
    if mode == "auto":
        from edgec.codegen import costmodel
        m = costmodel.measured(ctx.target, costmodel.layer_key("dw", C=g["C"], k=f"{g['KH']}x{g['KW']}", s=g["SW"],
                                                                px=g["Ho"] * g["Wo"]))
        mode = m if m in ("plane", "cb") else mode
    cb = kernels.dwconv_cb_kernel(ctx.target) if mode != "plane" else None
    from edgec.codegen.costmodel import dw_uses_cb  # thresholds fitted to the device's records
    use_cb = dw_uses_cb(ctx.target, g)
    if cb is not None and (use_cb or mode == "cb") and g["Wo"] <= 256 and g["KH"] * g["KW"] <= 64:
        return _emit_dw_cb(node, ctx, g, w, macs, cb)
    k = kernels.dwconv_kernel(ctx.target, g["KH"], g["KW"])
    hp = _window_extent(g)[0]
    woff = (g["KW"] - 1) * g["DW"] // g["SW"]
    wq = g["Wo"] + woff
    wp = ctx.weight(f"conv-dw:{node.name}", np.ascontiguousarray(w.reshape(g["C"], g["KH"] * g["KW"])))
    # one packed plane (+ F32_DWCONV_SLACK) per thread: f32_dwconv_scratch_bytes
    scratch = ctx.scratch(min(g["N"] * g["C"], kernels.SCRATCH_THREADS) * (g["SW"] * hp * wq + 64) * 4)
    ctx.require(k.file, "f32-dwconv/f32-dwconv-kxk-scalar.c", "f32-dwconv/f32-dwconv.h")
    ctx.note(algo=f"dwconv-{k.tile}-{k.isa}", macs=macs, kernel=k.name)
    shape = _shape_init(g, "N C H W Ho Wo KH KW SH SW DH DW PT PL")
    return (f"static const f32_dwconv_shape S = {{{shape}, {hp}u, {wq}u, {woff}u, {k.name}}};\n"
            f"const f32_dwconv_args A = {{{ctx.ptr(node.inputs[0])}, {ctx.ptr(node.outputs[0])}, {wp}, "
            f"{epilogue_fields(node, ctx, _bias(node, ctx))}, (float *){scratch}}};\n"
            f"f32_dwconv_run(&S, &A, {ctx.pool});\n")


def _emit_dw_cb(node: Node, ctx: EmitContext, g: dict, w: np.ndarray, macs: int, k) -> str:
    lanes = k.params["lanes"]
    hp, wp = _window_extent(g)
    wt = ctx.weight(f"conv-dw:{node.name}", np.ascontiguousarray(w.reshape(g["C"], g["KH"] * g["KW"])))
    scratch = ctx.scratch(g["N"] * -(-g["C"] // lanes) * hp * wp * lanes * 4)
    ctx.require(k.file, "f32-dwconv/f32-dwconv.h")
    ctx.note(algo=f"dwconv-{k.tile}-{k.isa}", macs=macs, kernel=k.name)
    shape = _shape_init(g, "N C H W Ho Wo KH KW SH SW DH DW PT PL")
    return (f"static const f32_dwconv_cb_shape S = {{{shape}, {hp}u, {wp}u, {lanes}u, {k.name}}};\n"
            f"const f32_dwconv_args A = {{{ctx.ptr(node.inputs[0])}, {ctx.ptr(node.outputs[0])}, {wt}, "
            f"{epilogue_fields(node, ctx, _bias(node, ctx))}, (float *){scratch}}};\n"
            f"f32_dwconv_cb_run(&S, &A, {ctx.pool});\n")


# direct few-input-channel kernel (runtime_c/f32-conv/f32-conv-smallc.h): vector ISA -> (C function, file, lanes)
SMALLC_KERNELS = {"avx2": ("f32_conv_smallc__avx2", "f32-conv/f32-conv-smallc-avx2.c", 8),
                  "avx512": ("f32_conv_smallc__avx512", "f32-conv/f32-conv-smallc-avx512.c", 16),
                  "neon": ("f32_conv_smallc__neon", "f32-conv/f32-conv-smallc-neon.c", 4)}
SMALLC_MAX_C = 4  # F32_CONV_SMALLC_MAX_C: beyond it the GEMM's K is long enough to amortise its packing


def smallc_eligible(g: dict) -> bool:
    """Dense conv with few input channels, dilation 1: what the direct kernel runs."""
    return g["G"] == 1 and g["C"] <= SMALLC_MAX_C and g["DH"] == g["DW"] == 1


def smallc_kernel(target, g: dict):
    """(C function, file, lanes) of the direct few-input-channel kernel for layer g on target, or None (not
    eligible, or a target without vectors: the generic build keeps the GEMM path)."""
    from edgec.codegen.ops.elementwise import vector_isa
    if not smallc_eligible(g):
        return None
    return SMALLC_KERNELS.get(vector_isa(target) or "")


def smallc_pick(target, g: dict):
    """costmodel.Choice of the direct kernel or the GEMM path for layer g (EDGEC_SMALLC / a tuning record forces
    either, else the estimate), or None where the direct kernel is out (not eligible, no vectors, or a forced
    Winograd the estimate does not pre-empt). codegen/layout.py asks it too: a stem the direct kernel runs may
    write a channel-blocked region."""
    k = smallc_kernel(target, g)
    if k is None:
        return None
    from edgec.codegen import costmodel
    from edgec.codegen.ops import winograd
    mode = options.active().smallc
    if mode == "auto" and options.active().conv.startswith("winograd") and winograd.eligible(g):
        return None
    return costmodel.choose_smallc(target, g, k[2], mode)


def _smallc_choice(node: Node, ctx: EmitContext, g: dict) -> bool:
    """Whether an NCHW layer runs the direct kernel (smallc_pick), noted for --explain."""
    choice = smallc_pick(ctx.target, g)
    if choice is None:
        return False
    ctx.note(smallc=choice.why)
    return choice.algo == "direct"


def smallc_block(k: int, lanes: int) -> int:
    """Output channels per weight block: two vectors (more FMAs per broadcast) unless one holds them all."""
    return lanes if k <= lanes else 2 * lanes


def _emit_smallc(node: Node, ctx: EmitContext, g: dict, w: np.ndarray, macs: int, cb: int) -> str:
    fn, file, lanes = smallc_kernel(ctx.target, g)
    if cb and cb % lanes:
        raise EdgecError(f"internal: node {node.name}: blocks of {cb} channels for a {lanes}-lane kernel")
    K, taps = g["K"], g["C"] * g["KH"] * g["KW"]
    kout = -(-K // cb) * cb if cb else K  # blocked: the pad channels are written too (act(0))
    ob = smallc_block(kout, lanes)
    nob = -(-kout // ob)
    wp = np.zeros((nob * ob, taps), np.float32)
    wp[:K] = w.reshape(K, taps)
    wp = np.ascontiguousarray(wp.reshape(nob, ob, taps).transpose(0, 2, 1))  # [Kout/OB][C*KH*KW][OB]
    bias = np.zeros(nob * ob, np.float32)
    b = node.input(2)
    if b is not None:
        bias[:K] = b.const.astype(np.float32).reshape(-1)[:K]
    wptr = ctx.weight(f"conv-smallc-{ob}:{node.name}", wp)
    bptr = ctx.weight(f"conv-smallc-bias-{ob}:{node.name}", bias)
    # row chunks so that the items (chunk, channel block) give the pool a few each; a thread's consecutive items
    # are the channel blocks of one chunk, whose input rows it reads from its caches again
    per = max(1, -(-PAR_ITEMS // (g["N"] * nob)))
    rc = max(1, -(-g["Ho"] // per))
    ctx.require("f32-conv/f32-conv-smallc.h", file)
    layout = f"-nchw{cb}c" if cb else ""
    isa = fn.rsplit("__", 1)[1]
    ctx.note(algo=f"direct-smallc-{ob}{layout}-{isa}", macs=macs, kernel=fn, ob=ob, rc=rc)
    if cb:  # a stem starting a blocked region (codegen/layout.py kind "stem"): NCHW in, blocked out, no reorder
        ctx.note(layout=f"{node.inputs[0].layout} -> {node.outputs[0].layout}",
                 why=f"few-channel stem writing the channel-blocked region: {cb} channels a block, a vector per pixel")
    shape = _shape_init(g, "N C H W K Ho Wo KH KW SH SW PT PL")
    x, y = ctx.ptr(node.inputs[0]), ctx.ptr(node.outputs[0])
    return (f"static const f32_conv_smallc_shape S = {{{shape}, {ob}u, {rc}u, {cb}u, {fn}}};\n"
            f"const f32_conv_smallc_args A = {{{x}, {y}, {wptr}, {epilogue_fields(node, ctx, bptr)}}};\n"
            f"f32_conv_smallc_run(&S, &A, {ctx.pool});\n")
