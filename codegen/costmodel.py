"""Per-layer algorithm choice from MACs, bytes moved and the target's lanes and caches.

Emitters ask `choose_*` and record the answer with ctx.note(algo=..., why=...), so the choice shows
in `edgec compile --explain` and in the bench profile. A measured choice wins over the model: a
tuning database (JSON: {"<target>": {"<layer key>": "<algo>"}}) named by EDGEC_TUNING_DB is consulted
first via `measured()` (3x3 Winograd/direct, GSPC family, depthwise plane/cb, sparse format, int8 path).
Device tuning records (`edgec tune`, docs/tuning.md) go further: they force one layer's variant through
codegen/variants.py before any `choose_*` runs, so the cost model is only asked for untuned layers.

Sparse vs dense uses the break-even sparsity measured by benchmarks/bench_sparse.py (docs/benchmarks.md):
below it the dense kernel is faster, above it the sparse one.
"""

from __future__ import annotations

import contextvars
import functools
import json
import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Choice:
    algo: str
    why: str
    estimates: dict = field(default_factory=dict)


# Break-even block sparsity (fraction of all-zero blocks) of f32 sparse x dense vs edgec's dense GEMM,
# per ISA family and block: the lowest measured level (0, .3, .5, .6, .7, .8, .9, .95) at which the
# sparse layer was faster. benchmarks/bench_sparse.py, 1x1 conv 128->128 at 28x28, 1 thread, x86 host
# with AVX-512 (docs/benchmarks.md). The AVX-512 family runs the AVX2 block kernels except 1x1, which
# measured faster. NEON values are estimates (no Arm board here; qemu timings mean nothing): assumed
# like AVX2 but more conservative, to be replaced by device measurements.
SPARSE_BREAK_EVEN = {
    ("avx512", "1x1"): 0.50, ("avx512", "1x4"): 0.70, ("avx512", "4x1"): 0.30, ("avx512", "4x4"): 0.30,
    ("avx2", "1x1"): 0.70, ("avx2", "1x4"): 0.60, ("avx2", "4x1"): 0.30, ("avx2", "4x4"): 0.30,
    ("neon", "1x1"): 0.75, ("neon", "1x4"): 0.70, ("neon", "4x1"): 0.50, ("neon", "4x4"): 0.50,
    ("scalar", "1x1"): 0.50,
}
SPARSE_BLOCKS = ("4x4", "1x4", "4x1", "1x1")
# int8 (4x1 blocks, q8-spmm) vs the int8 dense GEMM, same layer and protocol (C microbenchmark of the two
# kernels, 1x1 conv 128->128 at 28x28): AVX2 0.70 (vs the AVX2 GEMM), AVX-512BW 0.70, VNNI 0.90 (the
# VNNI GEMM is 2x the AVX2 one). AVX-VNNI (ymm vpdpbusd against the AVX2 sparse kernel): the AVX-512 VNNI ratio,
# an estimate. NEON: estimate, not measured.
# AMX: the dense GEMM took 0.021 ms, the sparse kernel 0.116 at 95% (`bench_sparse.py --int8 --target
# x86_64-avx512-amx`, Xeon Emerald Rapids): sparse never pays there (1.0: no sparsity exceeds it).
Q8_SPARSE_BREAK_EVEN = {"avx2": 0.70, "avx512": 0.70, "avx512vnni": 0.90, "avxvnni": 0.90, "amx": 1.0, "neon": 0.70}


@functools.lru_cache(maxsize=4)
def _tuning_db(path: str) -> dict:
    try:
        return json.loads(open(path).read())
    except (OSError, ValueError):
        return {}


def measured(target, key: str) -> str | None:
    """A measured choice for this layer on this target, if a tuning database provides one."""
    from edgec.codegen.options import active

    path = active().tuning_db
    if not path:
        return None
    return _tuning_db(path).get(target.name, {}).get(key)


def layer_key(op: str, **shape) -> str:
    """Stable description of a layer for the tuning database, e.g. conv:C=32,OC=64,g=1,k=3x3,px=784."""
    return op + ":" + ",".join(f"{k}={v}" for k, v in sorted(shape.items()))


def _isa_family(target) -> str:
    if target.isa in ("neon", "neon-v82"):
        return "neon"
    return target.isa if target.isa in ("avx2", "avx512") else "scalar"


# AVX2 without VNNI, weights past the vpmaddubsw pair bound (8-bit): the vpmaddwd GSPC kernel (q8_gspc_o8__avx2)
# against the vpmaddwd GEMM it would otherwise get, per layer CPU time, fastest of 7-9 interleaved rounds
# (benchmarks/bench_q8_gspc.py, Zen 3, 1 thread, load 1.4-3.0): GSPC / GEMM 1.04-1.50 on the 9 layers of 100-3136
# output pixels (128ch 28x28 g=2/8, 256ch 28x28 g=2, 64ch 56x56 g=4, 256ch 14x14 g=2, 128ch 14x14 g=4, 32ch 14x14
# g=2, 64ch 16x16 g=2, 128ch 10x10 g=8), 0.94-1.11 on the 4 of 16-64 (digits' three, 512ch 7x7 g=2): the GEMM
# above 64 pixels. 7-bit weights (the vpmaddubsw GSPC kernel) were not beaten by the GEMM on any of those
# shapes (GSPC / GEMM 0.48-1.06, the 1.06 a tie at 64 channels a group on 28x28), so they keep GSPC.
Q8_GSPC_VPMADDWD_MAX_PX = 64


def choose_int8_conv(target, c_in: int, c_out: int, groups: int, k, pixels: int, gspc: bool = False,
                     gspc_kernel: str | None = None, cgemm: bool = False) -> Choice:
    """Depthwise direct kernel when each group has one input and one output channel; GSPC for other
    grouped convs when the target has an int8 GSPC kernel (gspc=True; gspc_kernel: the C function the
    layer's weights would get, when known); else packed GEMM per group (im2col into the GEMM's layout;
    1x1 stride 1 packs without im2col): the channel-lane GEMM where it runs (cgemm=True) for kxk convs and for
    maps whose pixels leave a fifth of the pixel-lane GEMM's 16-pixel vectors empty, else the pixel-lane one."""
    from edgec.codegen.options import active

    forced = active().q8conv  # EDGEC_Q8CONV, or one layer's tuning record (codegen/variants.py)
    if forced == "q8-gemm" or (forced == "q8-gspc" and gspc and groups > 1) or \
            (forced == "q8-dwconv" and groups == c_in == c_out) or (forced == "q8-cgemm" and cgemm):
        return Choice(forced, f"forced: {forced}")
    key = layer_key("q8conv", C=c_in, OC=c_out, g=groups, k=f"{k[0]}x{k[1]}", px=pixels)
    m = measured(target, key)
    if m in ("q8-dwconv", "q8-gemm") or (m == "q8-gspc" and gspc) or (m == "q8-cgemm" and cgemm):
        return Choice(m, "tuning database")
    macs = c_out * pixels * (c_in // groups) * k[0] * k[1]
    # this device's records may have timed the packed GEMM faster than the depthwise / GSPC kernel (fit_q8conv)
    dw_key, gspc_key = f"q8-dwconv-k{k[0]}x{k[1]}", f"q8-gspc-k{c_out // max(groups, 1)}"
    if groups == c_in == c_out:
        if learned_value(dw_key, 1.0) < 0.5:
            return Choice("q8-gemm", f"depthwise {k[0]}x{k[1]}: the packed GEMM won on this device's records "
                          f"({dw_key}, fitted to this device)", {"macs": macs})
        return Choice("q8-dwconv", "depthwise: 1 input channel per output, GEMM rows would be 1/4 used",
                      {"macs": macs})
    if groups > 1 and gspc:
        if learned_value(gspc_key, 1.0) < 0.5:
            return Choice("q8-gemm", f"{groups} groups of {c_out // groups}: the packed GEMM won on this device's "
                          f"records ({gspc_key}, fitted to this device)", {"macs": macs})
        if gspc_kernel == "q8_gspc_o8__avx2" and pixels > Q8_GSPC_VPMADDWD_MAX_PX:
            return Choice("q8-gemm", f"{groups} groups, {pixels} pixels, 8-bit weights on AVX2: the packed GEMM "
                          f"(measured faster than the vpmaddwd GSPC kernel above {Q8_GSPC_VPMADDWD_MAX_PX} pixels)",
                          {"macs": macs})
        return Choice("q8-gspc", f"{groups} groups: GSPC, no im2col, a tile of output channels per register",
                      {"macs": macs})
    packed = (c_in // groups) * k[0] * k[1] * pixels  # bytes of the packed input per group
    where = "L1" if packed <= target.l1d_bytes else "L2" if packed <= target.l2_bytes else "memory"
    # channel-lane GEMM (Zen 5, ResNet-50's shapes through q8_conv, weights from memory): kxk 0.83-0.93x the
    # pixel-lane implicit GEMM's time (a tie at stride 2 from 56x56), 1x1 on 7x7 maps (49 pixels in 64 lanes)
    # 0.93-0.98x, 1x1 on wider maps 1.05-1.5x (short K: its transposing store weighs more)
    lanes = -(-pixels // 16) * 16
    if cgemm and (k[0] * k[1] > 1 or 5 * lanes >= 6 * pixels):
        return Choice("q8-cgemm", f"{groups} group(s) x channel-lane GEMM {c_out // groups}x{pixels}x"
                      f"{(c_in // groups) * k[0] * k[1]}: " +
                      ("no extended columns, compact rows" if k[0] * k[1] > 1 else
                       f"{pixels} pixels would fill {lanes} lanes"), {"macs": macs, "packed_bytes": packed})
    return Choice("q8-gemm", f"{groups} group(s) x GEMM {c_out // groups}x{pixels}x{(c_in // groups) * k[0] * k[1]}, "
                  f"packed input in {where}", {"macs": macs, "packed_bytes": packed})


def choose_int8_sparse(target, w2d, override: str | None = None) -> Choice:
    """int8 1x1 conv: 4x1-block sparse kernel or the dense GEMM, from the measured break-even."""
    if override == "dense":
        return Choice("dense", "override")
    if override and override.startswith("sparse-"):
        return Choice("q8-spmm", "override")
    fam = _q8_family(target)
    be = Q8_SPARSE_BREAK_EVEN.get(fam)
    if be is not None:  # this device's int8 sparse records may have moved it (fit_q8_sparse)
        be = learned_value("q8-sparse-be", be)
    s = block_sparsity(w2d, 4, 1)
    if be is None or s <= be:
        return Choice("dense", f"int8 4x1 block sparsity {s:.2f} below the {fam} break-even", {"sparsity": s})
    return Choice("q8-spmm", f"int8 4x1 block sparsity {s:.2f} > break-even {be:.2f} on {fam}",
                  {"sparsity": s, "break_even": be})


# Winograd F(m,3) vs direct 3x3 stride-1 convs, in units of one MAC of the packed GEMM microkernel.
# Measured on Zen 3 (AVX2, 1 thread; benchmarks in docs/benchmarks.md): the indirect stride-1 GEMM runs
# at 1/2.6 of the packed GEMM's MAC rate once its B panel (9*Cpg rows of NR) outgrows L1 (strided rows
# across padded planes), at ~1/1.2 while it fits, like the spatial pack (plus its im2col); one transformed
# input value costs ~25 MACs, one output value ~13 (bias and activation included), one phase-packed input
# element ~28. A direct path streaming a byte of weights from memory ~10 (it costs the larger of compute and weight
# traffic). Winograd streams U during its GEMMs only: that phase costs the larger of its MACs and its passes over U,
# the transforms add to it.
# Other ISAs: the same ratios, not measured.
WINOGRAD_M = (2, 4, 6)
_DIRECT_RATE = {"s1": 2.6, "pack": 1.2, "gspc": 1.7}
_WG_IN, _WG_OUT, _WG_PACK, _BYTE = 25.0, 13.0, 28.0, 10.0
_BYTE_L3, _L3_SHARE = 2.0, 4 << 20  # repeated passes over weights that stay in (a share of) L3
_CALL = 12  # MAC-equivalents per microkernel call beyond its K loop (tile load/store)
# Winograd's first pass over U, units a byte (a device's value: learned "wino-byte"); each further pass (one per
# tile block) over a U within the L3 share at _BYTE_L3 / _BYTE of that. Measured on Zen 3 (AVX2, 1 thread, thread
# CPU time of 4-layer stacks, bench_gspc.py --variants, docs/benchmarks.md; its 32 MB L3 shared with other work):
# the GEMM phase of dense 256ch 14x14 F(4,3) (9.4 MB of U a layer) ~9 units a byte, of a 40-layer 128ch 8x8 g=2
# stack (U from memory) 3.0 (F(4,3)) and 5.6 (F(2,3)); 6 moved 8 of 27 measured layers' picks, each to a faster
# path, none to a slower one. The former max(GEMMs + transforms, 10 a byte) let the transforms hide U (so F(4,3)
# on 14x14 maps looked as cheap as F(2,3), measured 1.2-1.5x slower) and charged small U past the GEMMs' time
# (7x7-8x8 grouped layers went to GSPC, 1.2-1.9x slower than F(2,3)). Other ISAs: not measured.
_WG_BYTE = 6.0
# Cycles a Winograd GEMM microkernel call costs beyond its K loop and its tile store (a device's value: learned
# "wino-call"). Measured on Zen 3 (AVX2 6x16, GEMM phases alone, f32_winograd_split.c, thread CPU time, against the
# dense 128ch 28x28 F(4,3) GEMMs' rate in the same run): 2.4-4.9 K steps of 6 cycles (14-29 cycles) on grouped
# layers of K = 12-24 a group (192ch 28x28 g=8 / g=16, 128ch g=8; once the tail panels took whole-tile stores),
# lost in the K loop on dense ones; with them those phases come within 0.94-1.15x of the estimate (without: up to
# 1.47x). They (and, each alone enough, the output transform's whole vectors in winograd_estimate) move 144ch 56x56
# g=16 from F(4,3) to GSPC (4-layer stacks: 1.27x faster) and 192ch 28x28 g=16 (a near tie: F(4,3) / GSPC 0.93-1.27
# over four passes). Other ISAs: the same cycles, not measured (a K step of the 12x32 AVX-512 or 8x12 NEON tile
# takes more cycles: fewer steps).
_WG_CALL = 18.0
# The channel-blocked driver's transforms (f32-winograd-nchwc.h: every op a whole vector of a block's channels, no
# phase packing) over the NCHW driver's per value, which _WG_IN / _WG_OUT / _WG_PACK price. Zen 5 (AVX-512, 1 thread,
# bench_gspc.py --variants conv=winograd-f23,conv=winograd-f43, wall ms of 4-layer stacks, 34 F(2,3) / F(4,3) pairs
# over 64-960 channels, 7x7-56x56 maps, g = 1-16 on the blocked driver): at 1.0 the estimate took F(2,3) on six
# 14x14 / 7x7 layers where F(4,3) measured 1.03-1.19x faster; a least-squares fit of transforms and GEMMs gives
# the transforms 0.2-0.3 of the GEMM units' weight, any of 0.2-0.5 leaves two picks 1.07x off. Other ISAs: not measured.
_WG_NCHWC_TRANS = 0.4


@functools.lru_cache(maxsize=8)
def _wg_transform_ops(m: int) -> tuple[float, float]:
    """Arithmetic of F(m,3)'s input and output transforms per transformed value, relative to F(4,3)'s (which
    _WG_IN / _WG_OUT were measured on): two passes of B^T (alpha x its nonzeros each) and of A^T. F(2,3) does
    0.55x / 0.45x F(4,3)'s work a value; costing it like F(4,3) ranked it last on grouped layers where it
    measured fastest (256ch 14x14 g=16: 0.80 vs F(4,3) 0.99 ms). Only ever lowers the cost."""
    from edgec.codegen.ops.winograd import matrices

    def ops(k: int) -> tuple[float, float]:
        bt, _, at = matrices(k)
        a = k + 2
        return 2 * a * float((bt != 0).sum()) / a ** 2, (a + k) * float((at != 0).sum()) / a ** 2

    (i, o), (i4, o4) = ops(m), ops(4)
    return min(1.0, i / i4), min(1.0, o / o4)  # F(6,3) keeps the measured constants its dense picks rest on


def winograd_estimate(target, g: dict, m: int, mr: int, nr: int, blocked: bool = False) -> dict:
    """Estimated cost (packed-GEMM MAC units) of F(m,3) on layer g, and its multiply reduction.
    The multiplies run tiles as the GEMMs' rows (MR strips) and output channels as columns (NR panels).
    blocked: on the channel-blocked driver (its transforms at _WG_NCHWC_TRANS of the NCHW driver's)."""
    from edgec.codegen import kernels
    from edgec.codegen.ops.winograd import blocking, gemm_cols

    a2 = (m + 2) ** 2
    cpg, kpg, n, groups = g["C"] // g["G"], g["K"] // g["G"], g["N"], g["G"]
    np_k = -(-kpg // nr) * nr
    th, tw = -(-g["Ho"] // m), -(-g["Wo"] // m)
    tiles = th * tw
    tpad = -(-tiles // mr) * mr
    # a tile's C load + store (2 x MR x NR / lanes memory ops, ~2 a cycle) takes as long as FMA-units K steps,
    # the call itself (accumulators zeroed, an indirect call, the row switch) wino-call cycles more (_WG_CALL),
    # in K steps of MR x NR / lanes FMAs on the FMA units;
    # _CALL (12) made the K = 16-32 GEMMs of grouped layers 1.5-1.7x slower than measured (phase timings)
    units = max(1, _peak_lpc(target) // max(1, target.f32_lanes))
    call = units + learned_value("wino-call", _WG_CALL) * units * target.f32_lanes / (mr * nr)
    # a tail of at most one vector runs as that many columns (f32_winograd_gemm_out; the blocked driver's GEMMs
    # run whole blocks)
    cols = gemm_cols(kpg, nr, kernels.gemm_kernel(target).params.get("vl", 0))
    gemm = n * groups * a2 * tpad * (cols * cpg + np_k * call)
    t_in, t_out = _wg_transform_ops(m)
    # the output transform works on whole vectors of a group's output channels: 12 a group on 8 lanes costs 16
    # (Zen 3, 192ch 28x28 g=16 F(4,3): 0.114 ms measured alone, 0.087 estimated for 192 channels, 0.116 for 256;
    # 9 a group, 144ch 56x56 g=16 F(4,3): 0.49 ms, 0.47 for 256, 0.26 for 144)
    kv = groups * -(-kpg // max(1, target.f32_lanes)) * max(1, target.f32_lanes)
    trans = n * (g["C"] * tiles * a2 * _WG_IN * t_in + kv * tiles * a2 * _WG_OUT * t_out
                 + g["C"] * m * (th * m + 2) * (tw + 1) * _WG_PACK) * (_WG_NCHWC_TRANS if blocked else 1.0)
    u_bytes = 4 * groups * a2 * np_k * cpg
    passes = n * blocking(target, g, m, mr, nr, 1)["nblocks"]  # U is streamed once per tile block
    stream = u_bytes * learned_value("wino-byte", _WG_BYTE)  # the GEMMs' first pass over U
    again = stream * (passes - 1) * (_BYTE_L3 / _BYTE if u_bytes <= _L3_SHARE else 1.0)
    direct_macs = n * g["K"] * cpg * 9 * g["Ho"] * g["Wo"]
    wino_macs = n * g["K"] * cpg * a2 * tiles
    return {"cost": trans + max(gemm, stream + again), "gemm": gemm, "transforms": trans, "stream": stream,
            "u_passes": stream + again, "weight_bytes": u_bytes, "mult_reduction": direct_macs / wino_macs}


def direct_estimate(target, g: dict, mr: int, nr: int, cols: int, kind: str) -> dict:
    """Estimated cost of the direct algorithm the Conv emitter would use (kind s1 | pack | gspc)."""
    cpg, kpg = g["C"] // g["G"], g["K"] // g["G"]
    mp = -(-kpg // mr) * mr
    kg = cpg * 9
    rate = _DIRECT_RATE["pack"] if kind == "s1" and kg * nr * 4 <= target.l1d_bytes else _DIRECT_RATE[kind]
    if kind in ("s1", "pack") and _transposed_gemm(target, g):
        # the emitter's transposed GEMM (conv.transposed: pixels on the MR rows, output channels on NR columns,
        # packed input) at the packed rate. Zen 3, dense 7x7, thread CPU time: 512ch 3.5 ms a layer for 154 M
        # units here, 960ch 9.2 ms for 539 M; the s1 estimate (397 M / 1.4 G, ~2.6x) sent 512ch to F(2,3), 1.11x
        # slower. Other ISAs: not measured.
        mp, cols, kind, rate = -(-g["K"] // nr) * nr, -(-(g["Ho"] * g["Wo"]) // mr) * mr, "pack", _DIRECT_RATE["pack"]
    compute = g["N"] * g["G"] * mp * cols * (kg + _CALL) * rate
    if kind == "pack":
        compute += g["N"] * g["G"] * kg * cols * 2  # im2col
    weights = 4 * g["G"] * mp * kg
    return {"cost": max(compute, _BYTE * weights), "compute": compute, "weight_bytes": weights}


# GSPC row kernels (codegen/kernels.py families tile | ow | mg), in the same packed-GEMM MAC units. A row
# kernel issues FMAs of VL lanes at the kernel's lanes per cycle (lpc; the GEMM runs at the target's widest,
# lanes x FMA units); a register block of B accumulators per K step takes max(B, A) issue slots, A = FMA
# latency x FMA units (fewer accumulators than that wait on the latency). Per value: packing the padded input
# ~14 MAC units, the epilogue and NCHW store of an output ~13 (perf profile of 128ch 28x28 g=16 on Zen 3,
# o8: block loop 68%, packing 15%, stores 12%). Other ISAs: the same per-value costs, not measured.
_FMA_LATENCY = 4  # cycles: Zen 3, Skylake, Cortex-A76 (A72: 7; the model then favours wider blocks a bit less)
_GSPC_PACK, _GSPC_OUT = 14.0, 13.0
_GSPC_LOADS = 0.9  # loads issued per FMA slot in the T_O tiles' K loop (gspc_tile_factor)
# the along-ow kernel's K steps take 1.7x their FMA issue slots (per tap: the tap's phase and offset, a row
# vector load, Kpg weight broadcasts): it measured 1.76x the o8 tile on rows without idle lanes (64ch 56x56
# g=8) and 1.9x on 28-wide rows (128ch g=16), both Kpg 8 on Zen 3, where the issue slots are equal
_GSPC_OW_STEP = 1.7
# A T_O tile's K loop reads the block's weights (T_O x Cpg x taps) and input rows (Cpg x KH x the block's span)
# once per output row; past L1 both come from L2 and the FMAs wait on them. Each doubling of the working set
# beyond L1 adds _GSPC_L1 of the compute: the stream's share that misses L1 grows with the set, the cost of a
# miss does not (L2 feeds it at a fixed rate, the prefetchers run ahead of the sequential weights). Zen 3 (32 KB
# L1d), 4-layer stacks, thread CPU time against F(2,3) on the same layers (bench_gspc.py --variants): 576ch 14x14
# g=2 (135 KB) 9.95 ms against 5.07, g=4 (68 KB) 5.56 / 2.54; up to ~32 KB the two kept their estimates' ratio
# within the run's noise (128ch 28x28 g=8-16, 64ch 56x56 g=4-8): 0.31-0.47 a doubling there. Zen 5 (48 KB L1d), one
# 3x3 stride-2 layer each, the two-vector tile against the GEMM: the measured time ratios asked for 0.16-0.29 a
# doubling from 87 to 425 KB (0.75 at 58 KB, just past L1; least squares 0.22); 0.3 lies between the two hosts.
# The earlier form, linear in the set, priced the 425 KB set at 3.4x its compute, where it ran at 0.94x the
# GEMM's time, and kept 192ch / 256ch dense and 576ch g=2 stride-2 layers on a GEMM 1.2-1.5x slower.
_GSPC_L1 = 0.3


def _peak_lpc(target) -> int:
    """fp32 lanes per cycle of the target's GEMM: its widest GSPC tile's (lanes x FMA units)."""
    from edgec.codegen import kernels

    return max([k.params["lpc"] for k in kernels.usable(target, "gspc")] + [1])


def gspc_tile_factor(wo: int, owb: int, bmax: int, gv: int) -> float:
    """Issue slots per FMA of a T_O tile of gv vectors on a wo-wide row, relative to FMA-bound: a block of b
    pixels loads b input broadcasts and gv weight vectors for b * gv FMAs (_GSPC_LOADS a FMA slot), and needs
    _FMA_LATENCY * 2 independent accumulators to hide the FMA latency on two units. One vector a tile (every
    FMA its own broadcast) measured 1.1-1.25x two on stride-2 rows (Zen 5: 128ch 28x28 g=2 0.142 / 0.128 ms,
    256ch 14x14 g=2 0.154 / 0.124, 576ch 14x14 g=2 0.724 / 0.595); four vectors in 6-pixel blocks ran
    1.1-1.35x two (0.140, 0.152, 0.805 ms)."""
    bs = _blocks(wo, owb, bmax)
    slots = (max(1.0, (1.0 / gv + 1.0 / b) / _GSPC_LOADS, 2.0 * _FMA_LATENCY / (b * gv)) for b in bs)
    return sum(b * x for b, x in zip(bs, slots)) / sum(bs)


def _blocks(wo: int, owb: int, bmax: int) -> list[int]:
    """The register blocks a row runs (the row kernels' split: OWB-wide blocks, then tails up to bmax)."""
    out, left = [owb] * (wo // owb), wo % owb
    while left:
        out.append(min(left, bmax))
        left -= out[-1]
    return out


def _tile_compute(target, g: dict, k, t_o: int, owb: int, tiles: int, P: int) -> float:
    """Compute of `tiles` T_O tiles of row kernel k per group (gspc_estimate's T_O tile family)."""
    cpg, n, groups, taps = g["C"] // g["G"], g["N"], g["G"], g["KH"] * g["KW"]
    lpc = k.params["lpc"]
    vl = t_o if k.params["t_o"] else 1
    acc_min = _FMA_LATENCY * max(1, lpc // vl)
    steps = n * groups * tiles * g["Ho"] * cpg * taps * (t_o // vl)
    bmax = k.params["bmax"] if k.params["t_o"] else 1
    owb = owb if owb <= bmax else bmax  # a wider block than the kernel holds runs as its widest (the tail kernel)
    compute = steps * sum(max(b, acc_min) for b in _blocks(g["Wo"], owb, bmax)) * vl * P / lpc
    span = (min(owb, g["Wo"]) - 1) * g["SW"] + (g["KW"] - 1) * g["DW"] + 1
    gv = k.params.get("gv", 1)
    # weight bytes a FMA reads do not grow with gv (a block reads gv vectors for gv times the FMAs): a wide
    # tile's working set counts as one vector's
    ws = 4 * cpg * (t_o // gv * taps + g["KH"] * span)
    compute *= 1 + _GSPC_L1 * max(0.0, math.log2(ws / target.l1d_bytes))
    if gv > 1 and g["SW"] > 1:
        # the constants above were fitted on one-vector tiles: only what gv saves is added. Measured at stride 2
        # (gspc_tile_factor); at stride 1 the comparisons with Winograd and the indirect GEMM lean on the fitted
        # one-vector cost, and adding it there moved three Zen 5 layers to a slower GSPC (4-layer stacks, 1
        # thread: 128ch 8x8 g=2 0.113 -> 0.167 ms, 512ch 7x7 g=4 0.725 -> 0.956, 576ch 14x14 g=16 1.51 -> 1.79)
        bmax_, owb_ = k.params["bmax"], min(owb, k.params["bmax"])
        compute *= gspc_tile_factor(g["Wo"], owb_, bmax_, gv) / gspc_tile_factor(g["Wo"], owb_, bmax_, 1)
    return compute


def gspc_estimate(target, g: dict, k, t_o: int, owb: int) -> float:
    """Estimated cost of GSPC row kernel k (tile T_O / ow / mg, as conv.gspc_tiles returns them) on layer g."""
    P = _peak_lpc(target)
    units = max(1, P // max(1, target.f32_lanes))  # FMA units
    cpg, kpg, n, groups = g["C"] // g["G"], g["K"] // g["G"], g["N"], g["G"]
    taps = g["KH"] * g["KW"]
    hp = (g["Ho"] - 1) * g["SH"] + (g["KH"] - 1) * g["DH"] + 1
    wp = (g["Wo"] - 1) * g["SW"] + (g["KW"] - 1) * g["DW"] + 1
    if k.op == "gspc_ow":
        vl = k.params["lanes"]
        acc_min = _FMA_LATENCY * units
        steps = n * groups * g["Ho"] * -(-g["Wo"] // vl) * cpg * taps  # one input vector, Kpg FMAs each
        compute = steps * max(kpg, acc_min) * vl * P / (vl * units) * _GSPC_OW_STEP
        out = n * g["K"] * g["Ho"] * g["Wo"] * _GSPC_OUT / 2  # stored in place, no transpose
    elif k.op == "gspc_mg":
        vl = k.params["gb"] * k.params["kp"]
        acc_min = _FMA_LATENCY * units
        steps = n * -(-groups // k.params["gb"]) * g["Ho"] * cpg * taps
        compute = steps * sum(max(b, acc_min) for b in _blocks(g["Wo"], owb, k.params["bmax"])) * P / units
        out = n * g["K"] * g["Ho"] * g["Wo"] * _GSPC_OUT
    else:
        from edgec.codegen import kernels

        tail = kernels.gspc_tail_kernel(target, k, kpg)
        compute = _tile_compute(target, g, k, t_o, owb, kpg // t_o if tail else -(-kpg // t_o), P)
        if tail is not None:  # the last tile of each group on the narrower kernel (f32_gspc_shape.row_tail)
            compute += _tile_compute(target, g, tail, tail.params["t_o"], owb, 1, P)
        out = n * g["K"] * g["Ho"] * g["Wo"] * _GSPC_OUT
    return compute + n * g["C"] * hp * wp * _GSPC_PACK + out


def direct_cost(target, g: dict, mr: int, nr: int, cols: int, kind: str, threads: int = 1) -> float:
    """What Winograd is weighed against: the GSPC row kernel conv.gspc_tiles would run (gspc_estimate), else
    direct_estimate; on `threads` threads its compute divides, its weight stream does not."""
    if kind == "gspc":
        from edgec.codegen.ops.conv import gspc_tiles
        k, t_o, _, owb = gspc_tiles(target, g)
        return gspc_estimate(target, g, k, t_o, owb) / threads
    d = direct_estimate(target, g, mr, nr, cols, kind)
    return max(d["compute"] / threads, _BYTE * d["weight_bytes"])


# The passes over U on several threads take threads ** -_U_THREADS of their one-thread time. The drivers give each
# thread its own output channels (few tiles) or tile blocks, so no byte is read twice; but U mostly comes from
# memory (a model's weights outgrow L3), where one core's stream is bound by the misses it keeps in flight and a
# second core adds part of the first one's bandwidth, not all of it. Zen 5, 2 threads, old / new alternating:
# fully divided passes (0) sent ResNet-50's 14x14 layers to F(4,3), 1.03x the model's time of F(2,3) (10 rounds);
# undivided (the earlier rule, 1) kept dense 512ch 7x7 on the transposed GEMM, where blocked F(2,3) ran 0.86x its
# time (4-layer stack) and ResNet-50 0.965x (14 rounds, 0.95-0.98). Zen 3's F(2,3) scaled 1.25x against the
# GEMM's 1.95x on those 7x7 layers (an exponent near 0.3), Emerald Rapids had them 1.11x faster on F(2,3).
_U_THREADS = 0.5


def _winograd_at(e: dict, threads: int, blocked: bool = False) -> dict:
    """A Winograd estimate on `threads` threads: transforms and GEMMs divide; the passes over U partly
    (_U_THREADS) on the channel-blocked driver, not at all on the NCHW one (grouped layers there: 512ch 7x7 g=2
    measured 1.11x GSPC's time on F(2,3) at 2 threads, Zen 5, though within 1.04x at 1). Xeon Emerald Rapids
    (AVX-512), 2 threads, 6 interleaved rounds, passes not divided: ResNet-50 38.4 -> 36.4 ms (the 14x14 layers
    F(4,3) -> F(2,3), 1.05-1.2 -> 0.80 ms each; the two 7x7 ones F(2,3) -> gemm-t, 1.16 -> 1.29 ms there),
    SqueezeNet 3.71 -> 3.55 ms (F(4,3) -> F(2,3) at 13x13); 1-thread choices unchanged."""
    if threads == 1:
        return e
    u = e["u_passes"] / threads ** _U_THREADS if blocked else e["u_passes"]
    return {**e, "cost": e["transforms"] / threads + max(e["gemm"] / threads, u)}


def _blocked_winograd(target) -> bool:
    """Whether the target has the channel-blocked Winograd driver's kernels (codegen/ops/winograd.py _emit_nchwc)."""
    from edgec.codegen import kernels
    return "outc" in kernels.winograd_kernel(target, 2).params


def _dense_blocked(target, g: dict) -> bool:
    """Whether a dense 3x3 conv's Winograd would run on the channel-blocked driver: whole blocks of input and output
    channels (an RGB input layer runs the NCHW driver)."""
    from edgec.codegen.layout import block_width
    c = block_width(target)
    return g["G"] == 1 and bool(c) and g["C"] % c == 0 and g["K"] % c == 0 and _blocked_winograd(target)


def choose_conv3x3(target, g: dict, mr: int, nr: int, direct_cols: int, direct_kind: str,
                   override: str = "auto") -> Choice:
    """Winograd F(2,3) / F(4,3) / F(6,3) or the direct path for a 3x3 stride-1 dilation-1 conv.
    Winograd trades multiplies for transforms and alpha^2/9 times the weights: it wins on many channels
    and maps of several tiles, loses on few channels (transforms dominate) and on big weights over few
    tiles (weight traffic). F(6,3) is only chosen by an override or when clearly cheaper: its rounding
    error is 2-3x F(4,3)'s (docs/kernels.md). A choice within 10% of direct keeps direct. Costs are at the
    compile's thread count (CompileOptions.threads)."""
    from edgec.codegen.options import active
    threads = max(1, active().threads)
    d = {"cost": direct_cost(target, g, mr, nr, direct_cols, direct_kind, threads)}
    blocked = _dense_blocked(target, g)  # a dense layer's Winograd runs channel-blocked
    est = {m: _winograd_at(winograd_estimate(target, g, m, mr, nr, blocked), threads, blocked) for m in WINOGRAD_M}
    if override == "direct":
        return Choice("direct", "EDGEC_CONV=direct", {"direct_cost": d["cost"]})
    if override.startswith("winograd-f"):
        m = int(override[len("winograd-f")])
        return Choice(f"winograd-f{m}3", f"winograd F({m},3): EDGEC_CONV={override}", {})
    key = layer_key("conv3x3", C=g["C"], OC=g["K"], g=g["G"], px=g["Ho"] * g["Wo"])
    measured_algo = measured(target, key)
    if measured_algo in ("direct",) + tuple(f"winograd-f{m}3" for m in WINOGRAD_M):
        return Choice(measured_algo, "tuning database", {})
    learned = dict(active_learned())
    fitted = ""
    for m in WINOGRAD_M:  # this device's measured correction of the estimate (tuning records), if any
        f = learned.get(f"winograd-f{m}3")
        if f is not None:
            est[m] = {**est[m], "cost": est[m]["cost"] * f}
            fitted += f", F({m},3) x{f:.2f}"
    fitted = f" (estimates fitted to this device's tuned layers{fitted})" if fitted else ""
    penalty = {2: 1.0, 4: 1.0, 6: 1.15}  # F(6,3)'s rounding: only for a clear gain
    best = min(WINOGRAD_M, key=lambda m: est[m]["cost"] * penalty[m])
    if override == "winograd":
        e = est[best]
        return Choice(f"winograd-f{best}3", f"winograd F({best},3): EDGEC_CONV=winograd, "
                      f"{e['mult_reduction']:.1f}x fewer multiplies", {})
    e = est[best]
    ratio = d["cost"] / e["cost"]
    # the 10% margin covers the dense direct paths' coarse rates; a GSPC estimate models its row kernel's issue
    # slots, packing and stores (within ~5% of thread CPU time on Zen 3), so the cheaper estimate decides
    if ratio > (1.0 if direct_kind == "gspc" else 1.1):
        return Choice(f"winograd-f{best}3", f"winograd F({best},3): {e['mult_reduction']:.1f}x fewer multiplies, "
                      f"est. {ratio:.1f}x faster than direct after transforms{fitted}", {"est_speedup": round(ratio, 2)})
    why = "transforms dominate (few channels)" if e["transforms"] > 0.5 * e["gemm"] else \
        "weight traffic (alpha^2/9 x the weights over few tiles)" if e["stream"] > e["gemm"] else \
        "too few tiles"
    return Choice("direct", f"direct, not winograd: best F({best},3) est. {1 / ratio:.1f}x direct's time: {why}"
                  f"{fitted}", {"est_speedup": round(ratio, 2)})


# Direct few-input-channel conv (codegen/ops/conv.py smallc, runtime_c/f32-conv/f32-conv-smallc.h) against the
# GEMM path the emitter would take otherwise, in the MAC units of direct_estimate. Direct: every padded output
# channel x tap is one lane of an FMA at about the packed GEMM's rate (12 accumulators, 2 FMAs per broadcast),
# plus per output value the transposed NCHW store and epilogue; pixels reaching into the side padding run one at
# a time. GEMM: the packed rate over K = C*KH*KW plus the im2col copy (strided), or at stride 1 the indirect path
# reading the padded input in place, whose time per unit measured 0.55-0.65x the packed path's on these layers.
# Zen 3, thread CPU time of each layer alone (benchmarks/bench_smallc.py and the kernel alone): estimated /
# measured direct:GEMM ratios 0.63 / 0.63 (3x3 s2 3->64 @224), 0.79 / 0.81 (7x7 s2 3->64 @224), 1.03 / 1.18
# (3x3 s1 3->16 @64), 0.84 / 0.95 (3x3 s1 1->32 @28), 1.84 / 1.57 (5x5 s1 4->24 @96). Arm: the same constants,
# not measured on a device.
_SMALLC_RATE = 1.0
_SMALLC_OUT = 4.0
_SMALLC_EDGE = 2.0
_SMALLC_S1 = 0.6


def smallc_estimate(target, g: dict, lanes: int) -> float:
    """Estimated cost of the direct kernel on layer g (MAC units)."""
    from edgec.codegen.ops.conv import smallc_block
    ob = smallc_block(g["K"], lanes)
    kp = -(-g["K"] // ob) * ob
    taps = g["C"] * g["KH"] * g["KW"]
    px = g["N"] * g["Ho"] * g["Wo"]
    # pixels whose window reaches the side padding run one at a time with clipped columns
    lo = min(-(-g["PL"] // g["SW"]), g["Wo"])
    reach = (g["W"] - 1 + g["PL"] - (g["KW"] - 1)) // g["SW"] + 1 if g["W"] - 1 + g["PL"] >= g["KW"] - 1 else 0
    edge = g["N"] * g["Ho"] * (g["Wo"] - max(lo, min(reach, g["Wo"])) + lo)
    return px * kp * taps * _SMALLC_RATE + edge * kp * taps * _SMALLC_EDGE + px * g["K"] * _SMALLC_OUT


def smallc_gemm_estimate(target, g: dict) -> float:
    """Estimated cost of the GEMM path on a few-input-channel layer (MAC units): packed-GEMM rate over K =
    C*KH*KW padded to the tile, plus the im2col copy, or the in-place stride-1 path's share of that."""
    from edgec.codegen import kernels
    from edgec.codegen.ops.conv import use_indirect
    k = kernels.gemm_kernel(target)
    mr, nr = k.params["mr"], k.params["nr"]
    kg = g["C"] * g["KH"] * g["KW"]
    cols = -(-(g["Ho"] * g["Wo"]) // nr) * nr
    mp = -(-g["K"] // mr) * mr
    cost = g["N"] * mp * cols * (kg + _CALL) * _DIRECT_RATE["pack"]
    if use_indirect(g, kernels.igemm_kernel(target).params["nr"]):
        return cost * _SMALLC_S1
    return cost + g["N"] * kg * cols * 2  # im2col


def choose_smallc(target, g: dict, lanes: int, override: str = "auto") -> Choice:
    """The direct few-input-channel kernel or the GEMM path for a dense conv with C <= 4 (EDGEC_SMALLC or a
    tuning record forces either)."""
    if override in ("direct", "gemm"):
        return Choice(override, f"EDGEC_SMALLC={override}", {})
    d, m = smallc_estimate(target, g, lanes), smallc_gemm_estimate(target, g)
    if d < m:
        return Choice("direct", f"direct few-channel kernel: est. {m / d:.2f}x faster than the GEMM path (K = "
                      f"{g['C'] * g['KH'] * g['KW']})", {"est_speedup": round(m / d, 2)})
    return Choice("gemm", f"GEMM, not the direct few-channel kernel: est. {d / m:.2f}x its time", {})


def active_learned() -> tuple:
    from edgec.codegen.options import active

    return active().learned


# learned constants the layer being emitted read: name -> (value, hand-set default); variants.emit notes them
consulted: contextvars.ContextVar[dict | None] = contextvars.ContextVar("edgec_learned_consulted", default=None)


def learned_value(name: str, default: float) -> float:
    """A cost-model constant fitted to this device's tuning records (CompileOptions.learned) when there is
    one, else the hand-set default."""
    for k, v in active_learned():
        if k == name:
            used = consulted.get()
            if used is not None:
                used[name] = (v, default)
            return v
    return default


def fit_threshold(points, default: float, picks, step: float) -> float | None:
    """The threshold t of a one-sided rule (picks(x, t): the rule picks the first choice at x) that the
    measured points (x, the first choice won) contradict least; among equally good ones the closest to the
    hand-set default. None when the default is among the best (the records agree with it)."""
    if not points:
        return None
    xs = sorted({float(x) for x, _ in points})
    cands = {default, *xs, *(x - step for x in xs), *(x + step for x in xs),
             *((a + b) / 2 for a, b in zip(xs, xs[1:]))}

    def errors(t: float) -> int:
        return sum(picks(x, t) != won for x, won in points)

    best = min(errors(t) for t in cands)
    if errors(default) == best:
        return None
    return min((t for t in cands if errors(t) == best), key=lambda t: (abs(t - default), t))


def fit_sparse(target, samples) -> dict[str, float]:
    """Break-even sparsity per block format, fitted to measured layers: samples (sparsity, block, sparse
    won against dense). The rule picks sparse above the break-even (choose_sparse)."""
    fam = _isa_family(target)
    out = {}
    for blk in SPARSE_BLOCKS:
        be = SPARSE_BREAK_EVEN.get((fam, blk))
        pts = [(s, won) for s, b, won in samples if b == blk]
        if be is None or not pts:
            continue
        t = fit_threshold(pts, be, lambda x, t: x > t, 0.025)
        if t is not None:
            out[f"sparse-be-{blk}"] = round(min(0.99, max(0.0, t)), 3)
    return out


def _q8_family(target) -> str:
    fam = _isa_family(target)
    if fam == "avx2" and "avx_vnni" in target.features:
        return "avxvnni"
    if fam == "avx512" and "amx_int8" in target.features:
        return "amx"
    return "avx512vnni" if fam == "avx512" and "avx512_vnni" in target.features else fam


def fit_q8_sparse(target, samples) -> dict[str, float]:
    """The int8 sparse break-even (4x1 blocks, q8-spmm against the dense int8 GEMM) fitted to measured 1x1
    layers: samples (sparsity, sparse won). The rule picks sparse above it (choose_int8_sparse)."""
    be = Q8_SPARSE_BREAK_EVEN.get(_q8_family(target))
    if be is None or not samples:
        return {}
    t = fit_threshold(samples, be, lambda x, t: x > t, 0.025)
    return {} if t is None else {"q8-sparse-be": round(min(0.99, max(0.0, t)), 3)}


DW_CB_PIXELS = 256   # stride 1: channel-blocked depthwise up to this many output pixels (codegen/ops/conv.py)
DW_CB_FILL = 0.75    # stride 2: channel-blocked once rows fill less than this share of their vectors


def dw_uses_cb(target, g: dict) -> bool:
    """Whether a depthwise conv in NCHW takes the channel-blocked kernel (cb) over the plane kernel (codegen/ops/
    conv.py _emit_dw, where a device's records may overrule it). Stride 2: cb where rows leave lanes idle, but never
    on the 3x3 plane path of phases split in registers (faster than cb at every row fill measured, AVX2 and AVX-512
    code, Zen 5: 576ch 14x14 0.022 / 0.030 ms, 272ch 14x14 0.010 / 0.014); stride 1: short maps, where per-row
    overheads dominate planes; other strides pack phases in C."""
    if g["SW"] == 2:
        if g["KH"] * g["KW"] == 9 and dw_s2_split(target, g):
            return False
        lanes = target.f32_lanes
        return g["Wo"] < learned_value("dw-cb-fill", DW_CB_FILL) * (-(-g["Wo"] // lanes) * lanes)
    return g["SW"] > 2 or g["Ho"] * g["Wo"] <= learned_value("dw-cb-px", DW_CB_PIXELS)


DW_ROWS = 4096  # F32_DWCONV_ROWS: floats of a thread's depthwise row buffer (runtime_c/f32-dwconv/f32-dwconv.h)


def dw_s1_aligned(target, g: dict) -> bool:
    """Whether the NCHW plane kernel runs this depthwise conv on its aligned stride-1 path (dw_s1a_band in
    f32-dwconv-tmpl.h): rows in whole vectors, the taps as lane shifts of two aligned loads."""
    from edgec.codegen import kernels
    lanes = target.f32_lanes
    k = kernels.dwconv_kernel(target, g["KH"], g["KW"])
    if k.params["k"] is None or k.isa not in ("avx2", "avx512") or g["KW"] > 5:  # a fixed window's x86 kernel
        return False
    if g["SW"] != 1 or g.get("DW", 1) != 1 or g.get("DH", 1) != 1 or g["SH"] not in (1, 2) or g["Wo"] < lanes:
        return False
    cap = DW_ROWS // (-(-g["Wo"] // lanes) * lanes + lanes)
    band = 0 if cap < g["KH"] else (cap - g["KH"]) // g["SH"] + 1
    return band >= min(g["Ho"], 4)


def dw_s2_split(target, g: dict) -> bool:
    """Whether the NCHW plane kernel runs this depthwise conv on its stride-2 path of phases split in registers
    (dw_s2v_ok in f32-dwconv-tmpl.h): a fixed window's x86 kernel, stride 2 both ways, no dilation, column shifts
    of at most one lane; on AVX2 only rows of up to 2 vectors (3x3) or 1 (5x5)."""
    from edgec.codegen import kernels
    lanes = target.f32_lanes
    k = kernels.dwconv_kernel(target, g["KH"], g["KW"])
    if k.params["k"] is None or k.isa not in ("avx2", "avx512"):
        return False
    if (g["SW"], g["SH"], g.get("DW", 1), g.get("DH", 1)) != (2, 2, 1, 1) or g["PL"] > 2 or g["KW"] > g["PL"] + 4:
        return False
    return lanes != 8 or g["Wo"] <= (2 if g["KH"] * g["KW"] <= 9 else 1) * lanes


def fit_dw(target, samples) -> dict[str, float]:
    """The depthwise plane/channel-blocked switch fitted to measured layers: samples (stride, Ho*Wo, Wo,
    cb won against plane). Stride 1 picks cb up to a pixel count, stride 2 below a row fill."""
    lanes = target.f32_lanes
    out = {}
    s1 = [(px, won) for sw, px, _, won in samples if sw == 1]
    t = fit_threshold(s1, DW_CB_PIXELS, lambda x, t: x <= t, 1.0)
    if t is not None:
        out["dw-cb-px"] = float(max(0, round(t)))
    s2 = [(wo / (-(-wo // lanes) * lanes), won) for sw, _, wo, won in samples if sw == 2]
    t = fit_threshold(s2, DW_CB_FILL, lambda x, t: x < t, 0.01)
    if t is not None:
        out["dw-cb-fill"] = round(min(1.01, max(0.0, t)), 3)
    return out


def fit_gspc(target, samples) -> dict[str, float]:
    """Which GSPC row-kernel family wins per channels-per-group count, fitted to measured grouped layers:
    samples (Kpg, stride, {"tile" | "ow" | "mg": ms}). The along-ow kernel against the T_O tiles (stride 1,
    where it runs), the multi-group kernel against the best of the others; the geometric mean of the time
    ratios over a Kpg's layers decides. Only verdicts that differ from the hand-set rules
    (kernels.gspc_ow_wins / gspc_mg_wins) are kept: 1.0 the family wins, 0.0 it loses."""
    import math

    from edgec.codegen import kernels

    logs: dict[tuple[str, int], list[float]] = {}
    for kpg, sw, ms in samples:
        if ms.get("ow") and ms.get("tile") and sw == 1:
            logs.setdefault(("ow", kpg), []).append(math.log(ms["ow"] / ms["tile"]))
        others = [ms[k] for k in ("tile", "ow") if ms.get(k)]
        if ms.get("mg") and others:
            logs.setdefault(("mg", kpg), []).append(math.log(ms["mg"] / min(others)))
    out = {}
    for (fam, kpg), v in sorted(logs.items()):
        wins = sum(v) / len(v) < 0
        if fam == "ow":
            rule = kernels.gspc_ow_kernel(target, kpg, 1, 1 << 20) is not None and \
                kernels.gspc_ow_rule(target, kpg)
        else:
            mg = kernels.gspc_mg_kernel(target, kpg)
            rule = mg is not None and kernels.gspc_mg_rule(target, mg, kpg)
        if wins != rule:
            out[f"gspc-{fam}-k{kpg}"] = 1.0 if wins else 0.0
    return out


def fit_q8conv(target, samples) -> dict[str, float]:
    """The int8 conv path fitted to measured layers: samples ("dw", "KHxKW" | "gspc", Kpg, {"own" | "gemm": ms}),
    the depthwise or GSPC kernel against the packed GEMM on the same layer. The hand-set rule always takes the
    own kernel; where the geometric mean of own/gemm over a key's layers says the GEMM wins, the key gets 0.0
    (choose_int8_conv then takes the GEMM); verdicts that agree with the rule are not kept."""
    import math

    logs: dict[str, list[float]] = {}
    for kind, key, ms in samples:
        if ms.get("own") and ms.get("gemm"):
            logs.setdefault(f"q8-{'dwconv' if kind == 'dw' else 'gspc'}-k{key}", []).append(
                math.log(ms["own"] / ms["gemm"]))
    return {k: 0.0 for k, v in sorted(logs.items()) if sum(v) / len(v) > 0}


# cache blocking (variants family blk): a device-wide preference for layers without a record
BLK_GAIN = 1.03        # a blocking wins a layer when the fastest of its family's timed ones and this much faster
BLK_SHARE = 2 / 3      # ... on this share of the layers (at least BLK_MIN) that timed it
BLK_MIN = 3
BLK_CONSTANT = {"nc-half": ("blk-nc", 0.5), "nc-double": ("blk-nc", 2.0), "kc-whole": ("blk-kc", 0.0)}


def fit_blk(samples) -> dict[str, float]:
    """The blocking a device's records prefer: samples {mode: speedup over the cost model's blocking} per record
    (the timed blk-* trials). A mode is learned when it won (fastest blocking, >= BLK_GAIN) on at least BLK_SHARE of
    the >= BLK_MIN layers that timed it; the strongest one only: "blk-nc" 0.5 / 2 (the column block scale) or
    "blk-kc" 0 (K whole)."""
    best = None
    for mode in BLK_CONSTANT:
        timed = [x for x in samples if mode in x]
        if len(timed) < BLK_MIN:
            continue
        share = sum(1 for x in timed if x[mode] >= BLK_GAIN and x[mode] == max(x.values())) / len(timed)
        if share >= BLK_SHARE and (best is None or share > best[1]):
            best = (mode, share)
    return dict([BLK_CONSTANT[best[0]]]) if best else {}


def learned_blk() -> str:
    """The blocking mode (CompileOptions.blk) for a layer without a record: the device's fitted preference."""
    nc = learned_value("blk-nc", 1.0)
    if nc != 1.0:
        return "nc-half" if nc < 1 else "nc-double"
    return "kc-whole" if learned_value("blk-kc", 1.0) == 0 else "auto"


def fit_conv3x3(target, samples) -> dict[str, float]:
    """The cost model learns from a device's tuning records: for each F(m,3), the factor by which this device
    made Winograd slower (> 1) or faster (< 1) relative to direct than the estimates said, as the geometric mean
    over measured 3x3 layers of (measured F(m,3)/direct time) / (estimated ratio). samples: (geometry,
    {"direct" | "winograd-f<m>3": ms}) pairs; layers without a direct time teach nothing. Clamped to [1/4, 4]:
    a factor outside it means the model misses something a constant cannot fix."""
    import math

    from edgec.codegen import kernels
    from edgec.codegen.ops.conv import direct_path_3x3

    gk = kernels.gemm_kernel(target)
    mr, nr = gk.params["mr"], gk.params["nr"]
    logs: dict[str, list[float]] = {}
    for g, ms in samples:
        if not ms.get("direct"):
            continue
        cols, kind = direct_path_3x3(target, g)
        d = direct_cost(target, g, mr, nr, cols, kind)
        blocked = _dense_blocked(target, g)  # as choose_conv3x3 prices it
        for m in WINOGRAD_M:
            key = f"winograd-f{m}3"
            if ms.get(key):
                e = winograd_estimate(target, g, m, mr, nr, blocked)["cost"]
                logs.setdefault(key, []).append(math.log((ms[key] / ms["direct"]) / (e / d)))
    return {k: round(min(4.0, max(0.25, math.exp(sum(v) / len(v)))), 3) for k, v in logs.items()}


# NCHW vs channel-blocked layout per region (codegen/layout.py), in ns of one thread's CPU time. The values are
# target data (targets.yaml layout_cost, read through Target.layout_value): measured on Zen 3 (AVX2, c = 8, 1
# thread; PROFILE=1 per-layer medians of the depthwise + 1x1 chains at 28x28, 14x14, 7x7 with 128-1024 channels,
# of ppocr cls and of SqueezeNet's 1x1 convs; the blocked depthwise and reorders again in thread CPU time of each
# kernel alone, docs/benchmarks.md), the other targets' entries say how far that holds for them. Each is open to
# a device's fitted value under the name "layout-<key>" (learned_value). What each key prices:
LAYOUT_KEYS = {
    "dw_tap": "depthwise, NCHW plane and channel-blocked kernels: per output value and tap",
    "dw_nchwc_tap": "blocked depthwise (3x3 stride 1: two rows per step): per output value and tap",
    "dw_plane_row": "NCHW plane kernel: per output row of a channel (row tails, per-plane setup)",
    "dw_s1_tap": "NCHW plane kernel on its aligned stride-1 path (dw_s1_aligned): per tap and output value of rows "
                 "rounded up to whole vectors",
    "dw_s1_row": "... per output row of a channel",
    "dw_s2_tap": "NCHW plane kernel on its stride-2 path of phases split in registers (dw_s2_split): per tap and "
                 "output value of rows rounded up to whole vectors",
    "dw_s2_row": "... per output row of a channel",
    "dw_cb": "NCHW channel-blocked kernel: per output value (its transposes in and out)",
    "dw_nchwc_row": "blocked: per output row of a channel (border columns, row setup)",
    "gemm_mac": "NCHW 1x1 (GEMM path): per MAC, times 1 + gemm_px/pixels + gemm_k/K + gemm_c/C",
    "gemm_px": "... short maps: weights streamed again per column panel",
    "gemm_k": "... few output channels: MR rows padded, tiles stored per few MACs",
    "gemm_c": "... few input channels: short K loops per tile",
    "gemmt_k": "transposed GEMM (pixels on the rows: few output channels or a short map): "
               "gemm_mac x (1 + gemmt_k/K + gemmt_px/pixels)",
    "gemmt_px": "... see gemmt_k",
    "nchwc_mac": "blocked 1x1 (6 pixels x 2 blocks, pixel chunks within half of L2): per MAC",
    "elem": "pools, GAP, Add/Mul, activations: per stored value written (padded when blocked)",
    "reorder_byte": "LayoutReorder: per byte of the tensor (whole-square loops, both ways)",
    "reorder_call": "... per reorder",
    "wino_nchwc": "blocked Winograd (channel-lane transforms, GEMMs on the blocked 1x1): its time over the NCHW "
                  "driver's (a ratio)",
}


def _lc(target, key: str) -> float:
    return learned_value(f"layout-{key}", target.layout_value(key))


def layout_node_cost(target, kind: str, c: int, g: dict | None = None, y_shape=None) -> tuple[float, float]:
    """(NCHW ns, blocked ns) of one node of a region: kind as codegen/layout.kind(), c channels per block,
    g the conv geometry (codegen/ops/conv.geometry) for dw and 1x1, y_shape the output shape for the rest."""
    def lc(key: str) -> float:
        return _lc(target, key)

    if kind == "dw":
        n, ch, ho, wo = g["N"], g["K"], g["Ho"], g["Wo"]
        cp = -(-ch // c) * c
        taps = g["KH"] * g["KW"]
        cb = dw_uses_cb(target, g)
        vec = -(-wo // target.f32_lanes) * target.f32_lanes
        # stride-2 rows filling less than DW_CB_FILL of their vectors keep the cb figures below: on AVX-512 a 7-wide
        # row took 2.8x the blocked kernel's time on that path (272ch / 576ch 14x14, Zen 5), which they give (2.7x)
        # and the per-vector fit (from AVX2 rows, 2.4x with 16 lanes) does not
        idle = g["SW"] == 2 and wo < learned_value("dw-cb-fill", DW_CB_FILL) * vec
        # rows in whole vectors; measured at 3x3 only: 5x5 keeps the figures below, which put the short 5x5 maps
        # of ppocr cls blocked, where the aligned plane path took 1.4-1.6x the blocked kernel's time with reorders
        if not cb and taps == 9 and dw_s1_aligned(target, g):
            nchw = n * ch * ho * (vec * taps * lc("dw_s1_tap") + lc("dw_s1_row"))
        elif not cb and not idle and taps == 9 and dw_s2_split(target, g):
            nchw = n * ch * ho * (vec * taps * lc("dw_s2_tap") + lc("dw_s2_row"))
        else:
            cb = cb or idle
            nchw = n * ch * ho * (wo * (taps * lc("dw_tap") + (lc("dw_cb") if cb else 0.0))
                                  + (0.0 if cb else lc("dw_plane_row")))
        blocked = n * cp * ho * (wo * taps * lc("dw_nchwc_tap") + lc("dw_nchwc_row"))
        return nchw, blocked
    if kind == "1x1":
        px = g["Ho"] * g["Wo"]
        cpg, kpg = g["C"] // g["G"], g["K"] // g["G"]
        macs = g["N"] * g["K"] * cpg * px
        if _transposed_gemm(target, g):
            nchw = macs * lc("gemm_mac") * (1 + lc("gemmt_k") / kpg + lc("gemmt_px") / px)
        else:
            nchw = macs * lc("gemm_mac") * (1 + lc("gemm_px") / px + lc("gemm_k") / kpg + lc("gemm_c") / cpg)
        from edgec.codegen.layout import straddle  # pad lanes, and blocks reading two groups
        blocked = macs * straddle(g, c) * lc("nchwc_mac")
        return nchw, blocked
    n, ch = y_shape[0], y_shape[1]
    rest = 1
    for d in y_shape[2:]:
        rest *= d
    return n * ch * rest * lc("elem"), n * (-(-ch // c) * c) * rest * lc("elem")


def _transposed_gemm(target, g: dict) -> bool:
    """Whether the NCHW emitter runs this 1x1 as the transposed GEMM (codegen/ops/conv.transposed)."""
    from edgec.codegen import kernels
    from edgec.codegen.ops.conv import transposed
    k = kernels.gemm_kernel(target)
    return transposed(g, k.params["mr"], k.params["nr"], kernels.igemm_kernel(target).params["nr"])


def layout_reorder_cost(target, nbytes: int) -> float:
    """ns of one LayoutReorder of an NCHW tensor of nbytes."""
    return nbytes * _lc(target, "reorder_byte") + _lc(target, "reorder_call")


def describe_dense_conv(algo: str, groups: int, c_in: int) -> str:
    """Why the dense fp32 conv emitter's algorithm fits this layer, read from the algorithm it recorded."""
    if algo.startswith("winograd"):
        return f"winograd F({algo.split('-')[1][1]},3): fewer multiplies than direct, transforms fused into packing"
    if algo.startswith("dwconv-c"):
        return "depthwise on a small map: channels interleaved so every tap is a full-width FMA"
    if algo.startswith("dwconv"):
        return "depthwise (groups = channels): direct plane kernel, no packing; GSPC's packing would dominate"
    if algo.startswith("gspc-g"):
        return (f"{groups} groups of {c_in // groups} channels: GSPC with several narrow groups per vector "
                "(one broadcast load feeds them all)")
    if algo.startswith("gspc") and groups == 1:
        return "strided: direct row kernel over one padded copy of the input (no im2col, no padded pixel tiles)"
    if algo.startswith("gspc"):
        return f"{groups} groups of {c_in // groups} channels: GSPC, weights tiled per group, parallel over groups"
    per_group = f"one GEMM per group ({groups} groups), " if algo.startswith("gemm-grouped") else ""
    if algo.startswith("gemm-t-"):
        return "small map: transposed GEMM (pixels on the tile rows, channels on its columns: less padding)"
    if "-1x1-" in algo:
        return per_group + "1x1 stride 1: GEMM reading the input in place, epilogue fused into the NCHW store"
    if "-s1-" in algo:
        return per_group + "stride 1: indirect GEMM over one padded copy of the input (no im2col)"
    return per_group + "spatial-pack GEMM with a register-blocked microkernel"


def block_sparsity(w2d, br: int, bc: int) -> float:
    """Fraction of all-zero br x bc blocks of a [M][K] matrix (rows padded to br)."""
    import numpy as np

    m, k = w2d.shape
    if k % bc:
        return 0.0
    zeros = w2d.size - int(np.count_nonzero(w2d))
    if zeros < br * bc:  # no block can be all zero (a trained dense layer: no temporary arrays, no reduction)
        return 0.0
    if br == bc == 1:
        return zeros / w2d.size
    mp = -(-m // br) * br
    z = np.zeros((mp, k), bool)
    z[:m] = w2d != 0
    nz = z.reshape(mp // br, br, k // bc, bc).any(axis=(1, 3))
    return 1.0 - float(nz.mean())


def choose_sparse(target, w2d, pixels: int, override: str | None = None) -> Choice:
    """Dense or sparse (and which block) for Y[M][N] = W[M][K] X[K][N] from the measured break-even."""
    key = layer_key("spmm", M=w2d.shape[0], K=w2d.shape[1], px=pixels)
    m = override or measured(target, key)
    if m in ("dense",) or (m or "").startswith("sparse-"):
        return Choice(m, "override" if override else "tuning database")
    import numpy as np

    fam = _isa_family(target)
    best = None
    if not w2d.size - np.count_nonzero(w2d):  # dense: every block sparsity is 0 (ResNet-50: 1.4 s of a compile)
        return Choice("dense", f"sparsity 0.00 below the {fam} break-even", {"sparsity": 0.0})
    for blk in SPARSE_BLOCKS:
        be = SPARSE_BREAK_EVEN.get((fam, blk))
        if be is None:
            continue
        be = learned_value(f"sparse-be-{blk}", be)
        br, bc = (int(v) for v in blk.split("x"))
        s = block_sparsity(w2d, br, bc)
        margin = s - be
        if margin > 0 and (best is None or margin > best[0]):
            best = (margin, blk, s, be)
    if best is None:
        s = block_sparsity(w2d, 1, 1)
        return Choice("dense", f"sparsity {s:.2f} below the {fam} break-even", {"sparsity": s})
    _, blk, s, be = best
    fitted = " (fitted to this device's tuned layers)" if be != SPARSE_BREAK_EVEN[(fam, blk)] else ""
    return Choice(f"sparse-{blk}", f"{blk} block sparsity {s:.2f} > break-even {be:.2f} on {fam}{fitted}",
                  {"sparsity": s, "break_even": be})


def explain_table(layers: list[dict]):
    """rich Table of the per-layer choices recorded by the emitters (for `edgec compile --explain`)."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title="per-layer algorithm choice", title_justify="left")
    for col in ("layer", "op", "layout", "algorithm", "MACs", "why"):
        t.add_column(col)
    for l in layers:
        d = l.get("details", {})
        why = d.get("why") or d.get("sparse_choice") or d.get("kernel") or ""
        if d.get("tuned"):  # a tuning record forced this layer's variant: say where it was measured
            why = d["tuned"]
        if d.get("learned"):  # the pick read constants fitted to this device's records
            why = f"{why}; learned: {d['learned']}".strip("; ")
        if d.get("f16_weights"):
            why = f"{why}; fp16 weights: {d['f16_weights']}".strip("; ")
        if d.get("threads"):  # codegen/ops/_par.py kept the layer on the calling thread
            why = f"{why}; threads: {d['threads']}".strip("; ")
        layout = d.get("layout", "nchw")  # codegen/layout.py: channel-blocked layers note theirs
        t.add_row(*map(Text, (l["name"][:40], l["op"], layout, l["algo"], f"{l['macs']:,}", str(why))))
    return t
