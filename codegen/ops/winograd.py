"""Winograd F(m,3) for 3x3, stride-1, dilation-1 Conv layers (runtime_c/f32-winograd).

Called by the Conv emitter (conv.py) when the cost model (costmodel.choose_conv3x3) or the EDGEC_CONV
override picks it. Offline here: U = G g G^T per (output, input) channel pair in float64, packed as the
GEMM's B operand, one matrix per transformed position xi: [G][alpha^2][ceil(Kpg/NR)][Cpg][NR]. At run
time the driver packs the input into column phases, transforms blocks of TB tiles into packed A strips
(tiles are the GEMM's rows) and runs alpha^2 GEMMs on the target's f32-gemm microkernel; the output
transform, vectorised over output channels, applies the epilogue and writes NCHW. The matrices are the
ones of runtime_c/f32-winograd/f32-winograd-scalar-tmpl.h.
"""

from __future__ import annotations

from fractions import Fraction as Fr

import numpy as np

from edgec.codegen import costmodel, kernels, options
from edgec.errors import EdgecError

# B^T, G, A^T of F(m,3) (Lavin & Gray), interpolation points 0, +-1 (m=2); 0, +-1, +-2 (m=4);
# 0, +-1, +-2, +-1/2 (m=6), and infinity
_H = Fr(1, 2)
MATRICES = {
    2: ([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
        [[1, 0, 0], [_H, _H, _H], [_H, -_H, _H], [0, 0, 1]],
        [[1, 1, 1, 0], [0, 1, -1, -1]]),
    4: ([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
         [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
        [[Fr(1, 4), 0, 0], [Fr(-1, 6)] * 3, [Fr(-1, 6), Fr(1, 6), Fr(-1, 6)], [Fr(1, 24), Fr(1, 12), Fr(1, 6)],
         [Fr(1, 24), Fr(-1, 12), Fr(1, 6)], [0, 0, 1]],
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]),
    6: ([[1, 0, Fr(-21, 4), 0, Fr(21, 4), 0, -1, 0], [0, 1, 1, Fr(-17, 4), Fr(-17, 4), 1, 1, 0],
         [0, -1, 1, Fr(17, 4), Fr(-17, 4), -1, 1, 0], [0, _H, Fr(1, 4), Fr(-5, 2), Fr(-5, 4), 2, 1, 0],
         [0, -_H, Fr(1, 4), Fr(5, 2), Fr(-5, 4), -2, 1, 0], [0, 2, 4, Fr(-5, 2), -5, _H, 1, 0],
         [0, -2, 4, Fr(5, 2), -5, -_H, 1, 0], [0, -1, 0, Fr(21, 4), 0, Fr(-21, 4), 0, 1]],
        [[1, 0, 0], [Fr(-2, 9)] * 3, [Fr(-2, 9), Fr(2, 9), Fr(-2, 9)], [Fr(1, 90), Fr(1, 45), Fr(2, 45)],
         [Fr(1, 90), Fr(-1, 45), Fr(2, 45)], [Fr(32, 45), Fr(16, 45), Fr(8, 45)],
         [Fr(32, 45), Fr(-16, 45), Fr(8, 45)], [0, 0, 1]],
        [[1, 1, 1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, _H, -_H, 0], [0, 1, 1, 4, 4, Fr(1, 4), Fr(1, 4), 0],
         [0, 1, -1, 8, -8, Fr(1, 8), Fr(-1, 8), 0], [0, 1, 1, 16, 16, Fr(1, 16), Fr(1, 16), 0],
         [0, 1, -1, 32, -32, Fr(1, 32), Fr(-1, 32), 1]]),
}


def matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B^T, G, A^T) of F(m,3) as float64."""
    return tuple(np.array([[float(v) for v in row] for row in mat]) for mat in MATRICES[m])


def eligible(g: dict) -> bool:
    """3x3, stride 1, dilation 1, not depthwise (any padding and groups)."""
    return (g["KH"], g["KW"], g["SH"], g["SW"], g["DH"], g["DW"]) == (3, 3, 1, 1, 1, 1) \
        and not g["G"] == g["C"] == g["K"]


def transform_weights(w: np.ndarray, m: int) -> np.ndarray:
    """[K][Cpg][3][3] -> U = G g G^T, [K][Cpg][alpha][alpha], computed in float64."""
    _, G, _ = matrices(m)
    return np.einsum("ri,kcij,qj->kcrq", G, w.astype(np.float64), G)


def pack_u(u: np.ndarray, groups: int, nr: int) -> np.ndarray:
    """[K][Cpg][A][A] -> [G][A*A][ceil(Kpg/NR)][Cpg][NR] float32 (the GEMMs' B), columns past Kpg zero."""
    K, cpg, a, _ = u.shape
    kpg = K // groups
    np_ = -(-kpg // nr) * nr
    out = np.zeros((groups, a * a, np_, cpg), np.float64)
    out[:, :, :kpg] = u.reshape(groups, kpg, cpg, a * a).transpose(0, 3, 1, 2)
    out = out.reshape(groups, a * a, np_ // nr, nr, cpg).transpose(0, 1, 2, 4, 3)
    return np.ascontiguousarray(out, dtype=np.float32)


# Largest V of every tile (bytes of arena) for the phase-parallel split; the layers that need it have few tiles.
PHASE_MAX_BYTES = 4 << 20


def gemm_cols(kpg: int, nr: int, vl: int) -> int:
    """Output-channel columns a group's GEMMs compute: whole NR panels, except a tail of at most one vector
    (f32_winograd_gemm_out, NRV) computed as whole vectors."""
    rem = kpg % nr
    return kpg - rem + (0 if rem == 0 else -(-rem // vl) * vl if vl and rem <= vl else nr)


def tile_unit(mr: int, nr: int) -> int:
    """Tiles per packed strip of V (f32_winograd_tmp_floats' last argument): tiles are the GEMMs' rows."""
    return mr


def _block_traffic(np_: int, panels: int, tiles: int, a2: int, cpg: int, np_k: int, mr: int, nr: int,
                   l2: int) -> int:
    """Bytes beyond L2 a group's GEMMs move with tile blocks of np_ strips: U once per block (unless it fits
    half of L2), and V of the block once per KB pass when it outgrows half of L2 (its xi slices then come
    back from L3 or memory)."""
    nb = -(-panels // np_)
    tb = -(-(-(-tiles // nb)) // mr) * mr
    passes = -(-np_k // max(nr, l2 // (a2 * tb * 4) // nr * nr))
    u = 4 * a2 * np_k * cpg
    v = 4 * a2 * cpg * np_ * mr
    return (nb * u if u > l2 // 2 else 0) + (passes * v * nb if v > l2 // 2 else 0)


def blocking(target, g: dict, m: int, mr: int, nr: int, threads: int, blk: str = "auto") -> dict:
    """TB (tiles per work item, in MR strips), KB (output channels per GEMM pass, in NR panels), KSPLIT, KC.
    V of a block (alpha^2 x TB x Cpg, written by the input transform, read back by the GEMMs) in half of L2;
    M in L2, in as few equal KB passes as that allows (one pass re-reads V per pass). Where U outgrows twice
    L2, larger blocks when they move fewer bytes past L2 (_block_traffic): each block streams U again, while a
    V past L2 is re-read once per KB pass; threads then split the output channels rather than add blocks.
    More items than threads when the layer has the tiles or channels;
    KC x NR of U (the GEMMs' B panel) in half of L1. Measured on Zen 3 (512 KB L2), GEMMs alone: 128ch 28x28
    F(4,3) 0.71 ms with two passes of 64 channels, 0.70 with one of 128. 4-layer stacks, thread CPU time, per
    round against V in half of L2: 576ch 14x14 F(4,3) (48 MB of U) in one block of 18 tiles 0.51-0.70x the
    time of three blocks of 6, 256ch 14x14 F(4,3) 0.60-0.80x, 576ch g=2 F(2,3) 0.85-0.89x; 128ch 28x28 F(4,3)
    and 960ch 7x7 g=2 within noise (an earlier driver had measured 256ch 14x14 in one block 1.35x slower).
    64ch 56x56 F(4,3) (590 KB of U) in blocks of 54 tiles: 0.94-0.98x at 1 thread, 1.08x at 2 (in ResNet-50):
    below 2x L2 the rule above stays."""
    a2 = (m + 2) ** 2
    cpg, kpg = g["C"] // g["G"], g["K"] // g["G"]
    np_k = -(-kpg // nr) * nr
    tiles = -(-g["Ho"] // m) * -(-g["Wo"] // m)
    panels = -(-tiles // mr)  # tile strips
    l2 = target.l2_bytes
    np_ = max(1, min(panels, (l2 // 2) // (a2 * cpg * mr * 4)))
    u_big = 4 * a2 * np_k * cpg > 2 * l2  # U streams from L3 or memory: blocks by the bytes they move
    if u_big:
        np_ = min(range(np_, panels + 1), key=lambda p: _block_traffic(p, panels, tiles, a2, cpg, np_k, mr, nr, l2))
    nblocks = -(-panels // np_)
    items = g["N"] * g["G"] * nblocks
    par = options.active().par  # a forced split axis (tuning's par-cols / par-rows): tiles or output channels
    if threads > 1 and par == "rows":
        ksplit = max(1, min(np_k // nr, -(-4 * threads // items)))
    elif threads > 1 and ((items < 2 * threads and not u_big) or par == "cols"):
        # more blocks while that adds no padded panel; with a big U the threads split the output channels
        # instead (each more block streams all of U again)
        nblocks = min(panels, max(nblocks, -(-2 * threads // (g["N"] * g["G"]))))
        items = g["N"] * g["G"] * nblocks
    tb = -(-(-(-tiles // nblocks)) // mr) * mr
    if blk != "auto":  # a forced blocking (tuning's blk-*): tile block or KC scaled; KB passes follow TB
        from edgec.codegen.ops.conv import scale_nc
        tb = scale_nc(tb, tiles, mr, blk)
    ksplit = ksplit if threads > 1 and par == "rows" else 1
    if threads > 1 and items < 2 * threads and par == "auto":
        ksplit = max(1, min(np_k // nr, -(-2 * threads // items)))
    kchunk = -(-(-(-kpg // ksplit)) // nr) * nr
    passes = -(-kchunk // max(nr, l2 // (a2 * tb * 4) // nr * nr))
    kb = -(-(-(-kchunk // passes)) // nr) * nr
    kc_max = max(16, (target.l1d_bytes // 2) // (nr * 4) // 16 * 16)
    kc = cpg if cpg <= kc_max * 5 // 4 else kc_max
    if blk != "auto":
        from edgec.codegen.ops.conv import scale_kc
        kc = scale_kc(kc, cpg, blk)
    return dict(TB=tb, KB=kb, KSPLIT=ksplit, KC=kc, tiles=tiles, nblocks=-(-tiles // tb))


def choose(target, g: dict, direct_cols: int, direct_kind: str) -> costmodel.Choice:
    """The cost model's (or EDGEC_CONV's) choice for an eligible layer."""
    gk = kernels.gemm_kernel(target)
    return costmodel.choose_conv3x3(target, g, gk.params["mr"], gk.params["nr"], direct_cols, direct_kind,
                                    options.active().conv)


def choose_blocked(target, g: dict, direct_cols: int, direct_kind: str, groups: int | None = None) -> costmodel.Choice:
    """choose() for a layer that may run in a channel-blocked region (codegen/layout.py). A grouped conv with whole
    blocks a group runs there as a dense conv per group (f32-winograd-nchwc.h), so where choose() keeps the direct
    path (its grouped Winograd estimate prices the NCHW driver's small per-group GEMMs) Winograd is weighed again as
    that dense conv over N G images, at the blocked driver's share of the NCHW one's time (the layout constant
    wino_nchwc, as layout.node_cost prices it), against the same direct path.
    groups: fewer than g's, each a few of g's narrow ones merged into whole blocks (layout.merged_groups): the
    blocked driver then runs that many convs, each block reading its own groups' channels. Chosen whatever the
    estimate says: it priced dense merged pairs at 0.83-0.96x the NCHW paths' speed where they measured
    1.15-1.45x (the cases in merged_groups); it only picks F(2,3) or F(4,3). Where choose() took Winograd for a
    grouped conv, the tile is picked again by the blocked estimate (the NCHW one prices phase-packed transforms
    the blocked driver does not run: 384ch 14x14 g=4 / 8 / 16 took F(2,3) there, F(4,3) measured 0.84-0.88x its
    time; Zen 5)."""
    c = choose(target, g, direct_cols, direct_kind)
    merged = groups is not None and groups != g["G"]
    if options.active().conv != "auto" or (not merged and (g["G"] == 1 or c.why == "tuning database")):
        return c  # EDGEC_CONV's algorithm, merged groups or not; a dense conv's choice priced it blocked already
    from edgec.codegen.options import active
    gk = kernels.gemm_kernel(target)
    mr, nr, threads = gk.params["mr"], gk.params["nr"], max(1, active().threads)
    gb = groups if merged else g["G"]
    dense = dict(g, C=g["C"] // gb, K=g["K"] // gb, G=1, N=g["N"] * gb)
    share = costmodel._lc(target, "wino_nchwc")
    at = {m: costmodel._winograd_at(costmodel.winograd_estimate(target, dense, m, mr, nr, blocked=True), threads,
                                    blocked=True) for m in (2, 4)}
    est = {m: e["cost"] * share for m, e in at.items()}
    m = min(est, key=lambda k: est[k])
    if merged:  # narrow groups: merged whatever the estimate says (layout.merged_groups)
        return costmodel.Choice(f"winograd-f{m}3", f"winograd F({m},3) blocked, {g['G']} groups merged into {gb} of "
                                "whole blocks", {})
    if c.algo != "direct":  # Winograd on the NCHW driver's estimate: F(m,3) as the blocked driver runs it
        o = 6 - m
        return costmodel.Choice(f"winograd-f{m}3", f"winograd F({m},3) blocked, one dense conv a group (F({o},3) "
                                f"est. {est[o] / est[m]:.2f}x its time); NCHW estimate: {c.why}", c.estimates)
    d = costmodel.direct_cost(target, g, mr, nr, direct_cols, direct_kind, threads)
    if d > est[m]:
        return costmodel.Choice(f"winograd-f{m}3", f"winograd F({m},3) blocked, one dense conv a group: est. "
                                f"{d / est[m]:.1f}x faster than direct", {"est_speedup": round(d / est[m], 2)})
    return c


def emit(node, ctx, g: dict, w: np.ndarray, macs: int, choice: costmodel.Choice) -> str:
    from edgec.codegen.ops.conv import _bias, _shape_init, epilogue_fields

    m = int(choice.algo.rsplit("f", 1)[1][0])
    if node.inputs[0].block:
        return _emit_nchwc(node, ctx, g, w, macs, choice, m)
    if node.outputs[0].block:  # a blocked output is written only from a blocked input (codegen/layout.py)
        raise EdgecError(f"internal: node {node.name}: Winograd cannot write channel blocks from an NCHW input")
    t = ctx.target
    gk = kernels.gemm_kernel(t)
    wk = kernels.winograd_kernel(t, m)
    mr, nr = gk.params["mr"], gk.params["nr"]
    b = blocking(t, g, m, mr, nr, options.active().threads, options.active().blk)
    th, tw = -(-g["Ho"] // m), -(-g["Wo"] // m)
    hp, q = th * m + 2, tw + 1
    cpg = g["C"] // g["G"]
    u = ctx.weight(f"conv-wino{m}-n{nr}:{node.name}", pack_u(transform_weights(w, m), g["G"], nr))
    xp = ctx.scratch((g["N"] * g["C"] * m * hp * q + 32) * 4)  # f32_winograd_xp_floats (F32_WINOGRAD_XP_PAD)
    a2, pad = (m + 2) ** 2, 16  # F32_WINOGRAD_PAD
    # f32_winograd_tmp_floats, with room for f32_winograd_xi_stride's extra pad on V and on M
    per = a2 * ((cpg + b["KB"]) * b["TB"] + (b["TB"] // tile_unit(mr, nr) + 4) * pad)
    # V of every tile ahead of the per-thread slices (f32_winograd_vall_floats): the driver's phase-parallel
    # split for layers whose strips do not share out among the threads; not for maps whose V alone is large
    strips = -(-th * tw // mr)
    vall = g["N"] * g["G"] * a2 * (strips * (cpg * mr + pad) + 2 * pad)
    phase = int(options.active().threads > 1 and vall * 4 <= PHASE_MAX_BYTES and options.active().par == "auto")
    tmp = ctx.scratch((kernels.SCRATCH_THREADS * per + phase * vall) * 4)
    ctx.require(gk.file, wk.file, "f32-winograd/f32-winograd.h")
    ctx.note(algo=f"winograd-f{m}3-{gk.tile}-{gk.isa}", macs=macs, kernel=f"{wk.name} + {gk.name}",
             tb=b["TB"], kb=b["KB"], ksplit=b["KSPLIT"], kc=b["KC"], why=choice.why, **choice.estimates)
    shape = _shape_init(g, "N C H W K Ho Wo G PT PL")
    return (f"static const f32_winograd_shape S = {{{shape}, {m}u, {th}u, {tw}u, {hp}u, {q}u, {b['TB']}u, "
            f"{b['KB']}u, {b['KSPLIT']}u, {mr}u, {nr}u, {b['KC']}u, {gk.name}, {wk.params['in']}, "
            f"{wk.params['out']}, {phase}u, {gk.params['vl']}u, {gk.params.get('hv', 0)}u}};\n"
            f"const f32_winograd_args A = {{{ctx.ptr(node.inputs[0])}, {ctx.ptr(node.outputs[0])}, {u}, "
            f"{epilogue_fields(node, ctx, _bias(node, ctx))}, (float *){xp}, (float *){tmp}}};\n"
            f"f32_winograd_run(&S, &A, {ctx.pool});\n")


def pack_u_blocked(u: np.ndarray, b: int) -> np.ndarray:
    """[K][C][A][A] -> [A*A][K/b][C][b] float32: per xi the blocked 1x1 conv's weights (K, C whole blocks)."""
    K, C, a, _ = u.shape
    out = u.reshape(K // b, b, C, a * a).transpose(3, 0, 2, 1)
    return np.ascontiguousarray(out, dtype=np.float32)


def nchwc_tiles(target, g: dict, m: int, threads: int, kt: int = 1, b: int = 1) -> tuple[int, int]:
    """(TT, KS) of f32_winograd_nchwc_run: TT tiles a work item, V and M of them within half of L2, balanced; KS
    output-block ranges per tile chunk when there are fewer chunks than 2 a thread (each range transforms the
    chunk's input again: cheap beside its GEMMs). A range is whole groups of the 1x1 kernel's kt blocks (of b
    channels), so there are at most that many; where they and the chunks still leave a thread idle, the tiles
    split into more chunks (64ch 16x16 F(4,3): 4 blocks are one range of the 4-block kernel, and all 16 tiles one
    chunk had run on one thread: 0.175 ms a 4-layer stack at 2 threads, 0.128 at 1; Zen 5)."""
    a2, T = (m + 2) ** 2, -(-g["Ho"] // m) * -(-g["Wo"] // m)
    per_tile = a2 * (g["C"] + g["K"]) * 4
    tt = max(1, min(T, target.l2_bytes // 2 // per_tile))
    if T * per_tile <= target.l2_bytes or a2 * g["C"] * g["K"] * 4 > target.l2_bytes:
        tt = T  # U streams once per chunk: few tiles and large weights take them all
    tt = -(-T // -(-T // tt))
    chunks = g["N"] * -(-T // tt)
    if threads <= 1:
        return tt, 1
    ks = 1
    if chunks < 2 * threads:
        ranges = -(-(g["K"] // b) // kt)
        ks = min(ranges, -(-2 * threads // chunks))
        if chunks * ks < threads:  # still an idle thread: more, smaller tile chunks
            per_image = min(T, -(-threads // (g["N"] * ks)))
            tt = -(-T // per_image)
    return _even(T, g["N"], tt, ks, threads), ks


def _even(T: int, n: int, tt: int, ks: int, threads: int) -> int:
    """TT for a whole number of work items a thread where few items leave a remainder: up to threads - 1 more
    tile chunks an image. SqueezeNet's 3x3 expands on 2 threads: 5 chunks of 40 tiles (55x55, F(4,3)) and 3
    output-block ranges of 49 tiles (13x13, F(2,3)) ran at 1.74x and 1.55x their 1-thread time, the whole model at
    1.79x (Zen 5)."""
    per_image = -(-T // tt)
    items = n * per_image * ks
    if items % threads == 0 or items >= 4 * threads:
        return tt
    for p in range(per_image + 1, min(T, per_image + threads) + 1):
        if n * p * ks % threads == 0:
            return -(-T // p)
    return tt


def _emit_nchwc(node, ctx, g: dict, w: np.ndarray, macs: int, choice: costmodel.Choice, m: int) -> str:
    """Winograd inside a channel-blocked region: f32-winograd-nchwc.h (channel-lane transforms around the blocked
    1x1 kernel as the alpha^2 GEMMs)."""
    from edgec.codegen.ops import nchwc
    from edgec.codegen.ops.conv import _bias, _shape_init, epilogue_fields
    t, b = ctx.target, node.outputs[0].block
    wk = kernels.winograd_kernel(t, m)
    isa = nchwc._kernels(ctx, b)  # the blocked 1x1's (requires its file)
    G = g["G"]
    C, K = g["C"] // G, g["K"] // G  # a group's: whole blocks, so group g is image n G + g of a dense conv
    if node.inputs[0].block != b or b != nchwc.LANES.get(wk.isa) or C % b or K % b or "outc" not in wk.params:
        raise EdgecError(f"internal: node {node.name}: Winograd cannot run blocked {node.inputs[0].block}/{b} on "
                         f"{wk.name}")
    gg = dict(g, C=C, K=K)
    # merged groups (layout.merge_groups): the GEMMs run as the grouped 1x1 over the model's own groups, each
    # block reading only its groups' channels; block-diagonal dense GEMMs computed the zeros between them too
    # (192ch 28x28 g=8, 24-channel groups on 16-lane blocks: 0.79x the time, Zen 4). Where every block reads
    # every channel anyway (pairs of 8 on 16-lane blocks) the dense 4-block tile runs them: 64ch 16x16 g=8 and
    # 128ch 28x28 g=16 at 0.94x and 0.92x the band's 2-block tile's time.
    sub = int(node.attr("ec_merged_groups", G) or G) // G
    if sub > 1 and all(hi - lo == C for lo, hi in nchwc.ranges_1x1(C, K, sub, b)):
        sub = 1
    kt = nchwc.tile_blocks(t, sub == 1)
    kc = nchwc.pass_channels(t, kt, C, b) if sub == 1 else C
    tt, ks = nchwc_tiles(t, dict(gg, N=g["N"] * G), m, options.active().threads, kt, b)
    th, tw = -(-g["Ho"] // m), -(-g["Wo"] // m)
    uw = transform_weights(w, m)
    a2 = (m + 2) ** 2
    if sub > 1:  # per merged group and xi the grouped 1x1's weights [K/b][WS][b] (nchwc._pack_1x1)
        cpg, kpg = C // sub, K // sub
        parts = []
        for j in range(G):
            uj = uw[j * K:(j + 1) * K].reshape(sub, kpg, sub, cpg, a2)
            own = np.stack([uj[i, :, i] for i in range(sub)]).reshape(K, cpg, a2)  # each group's own inputs
            parts += [nchwc._pack_1x1(own[:, :, xi], C, K, sub, b) for xi in range(a2)]
        ws = parts[0].shape[1]
        u = ctx.weight(f"conv-wino{m}-nchwc{b}-g{sub}:{node.name}", np.concatenate([p.ravel() for p in parts]))
    else:
        ws = C
        u = ctx.weight(f"conv-wino{m}-nchwc{b}:{node.name}",
                       np.concatenate([pack_u_blocked(uw[j * K:(j + 1) * K], b).ravel() for j in range(G)]))
    zero = ctx.weight(f"zeros:{K}", np.zeros(K, np.float32))
    per = a2 * (C * tt + 16 + K * tt + 16)  # f32_winograd_nchwc_tmp_floats
    tmp = ctx.scratch(kernels.SCRATCH_THREADS * per * 4)
    ctx.require(wk.file, "f32-winograd/f32-winograd.h", "f32-winograd/f32-winograd-nchwc.h")
    ctx.note(algo=f"winograd-f{m}3-nchwc-{nchwc.PT}x{kt * b}-{wk.isa}", macs=macs,
             kernel=f"{wk.name} + f32_nchwc_conv1x1__{isa}", tt=tt, ks=ks, kc=kc, why=choice.why,
             **choice.estimates, layout=node.outputs[0].layout)
    shape = _shape_init(gg, "N C H W K Ho Wo PT PL")
    gemm = (f"{{1u, {C}u, 1u, 1u, {K}u, 1u, 1u, 1u, 1u, 1u, 1u, 1u, 1u, 0u, 0u, {b}u, 1u, {sub}u, "
            f"{kc}u, {ws}u, 1u, "
            f"{kt}u, 1u, f32_nchwc_conv1x1__{isa}}}")
    return (f"static const f32_winograd_nchwc_shape S = {{{shape}, {m}u, {th}u, {tw}u, {tt}u, {ks}u, {b}u, "
            f"f32_winograd_inc_f{m}3__{wk.isa}, {wk.params['outc']}, {gemm}, {G}u}};\n"
            f"const f32_winograd_nchwc_args A = {{{ctx.ptr(node.inputs[0])}, {ctx.ptr(node.outputs[0])}, {u}, "
            f"{zero}, {epilogue_fields(node, ctx, _bias(node, ctx))}, (float *){tmp}}};\n"
            f"f32_winograd_nchwc_run(&S, &A, {ctx.pool});\n")
