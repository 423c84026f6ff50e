"""Int8 parameters and weight packing for the q8 kernels (runtime_c/q8-*), done at compile time.

Inside an int8 region every tensor is stored as uint8 ("u8 domain"): an int8 tensor keeps
q + 128 with zero point z + 128. Requantization uses a fixed-point multiplier per output
channel that represents the float32 scale x_s * w_s / y_s exactly (see q8-requant.h).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edgec.errors import EdgecError

# q8 GEMM variant per target ISA: (C function, file, reads X as signed int8)
Q8_GEMM = {
    "scalar": ("q8_gemm_4x8__scalar", "q8-gemm/q8-gemm-4x8-scalar.c", False),
    "avx2": ("q8_gemm_4x8__avx2", "q8-gemm/q8-gemm-4x8-avx2.c", False),
    "avx512": ("q8_gemm_4x16__avx512bw", "q8-gemm/q8-gemm-4x16-avx512bw.c", False),
    "avx512vnni": ("q8_gemm_8x32__avx512vnni", "q8-gemm/q8-gemm-8x32-avx512vnni.c", False),
    "avxvnni": ("q8_gemm_4x16__avxvnni", "q8-gemm/q8-gemm-4x16-avxvnni.c", False),
    "amx": ("q8_gemm_32x32__amx", "q8-gemm/q8-gemm-32x32-amx.c", False),
    "neon": ("q8_gemm_4x8__neon", "q8-gemm/q8-gemm-4x8-neon.c", True),
    "neon-v82": ("q8_gemm_4x8__neondot", "q8-gemm/q8-gemm-4x8-neondot.c", True),
}


# the channel-lane GEMM (q8_cgemm_fn in runtime_c/q8-gemm/q8-gemm.h): the pixel-lane GEMM it stands in for -> (function,
# file); it needs a multiple of 16 output channels a group
Q8_CGEMM = {"q8_gemm_8x32__avx512vnni": ("q8_cgemm_32x8__avx512vnni", "q8-gemm/q8-cgemm-32x8-avx512vnni.c")}


def cgemm_variant(fn: str, ocg: int, cg: int, k) -> tuple[str, str] | None:
    """The channel-lane GEMM for a layer whose pixel-lane GEMM is fn (ocg output, cg input channels a group, kernel
    k), or None: kxk convs read the implicit path's padded copy, so their channel padding must stay small, as there
    (at most 1/8 more multiply-adds)."""
    if fn not in Q8_CGEMM or ocg % 16:
        return None
    if k[0] * k[1] > 1 and 8 * 4 * ((cg + 3) // 4) > 9 * cg:
        return None
    return Q8_CGEMM[fn]


# implicit GEMMs for kxk convs (runtime_c/q8-conv/q8-conv.h): the GEMM function -> its implicit form, which reads
# the padded, phase-split input copy in place instead of an im2col (SqueezeNet's int8 3x3 convs: im2col was ~30%)
Q8_IGEMM = {"q8_gemm_8x32__avx512vnni": "q8_igemm_8x32__avx512vnni", "q8_gemm_4x16__avxvnni": "q8_igemm_4x16__avxvnni",
            "q8_gemm_4x16__avx2_maddubs": "q8_igemm_4x16__avx2_maddubs", "q8_gemm_32x32__amx": "q8_igemm_32x32__amx"}
# output columns from which a kxk conv takes the implicit path: it computes ceil(wp / sw) - Wo extra columns per row
# (stride 1: (kw - 1) * dw), 2 of 14 for a 3x3 at 12 columns; narrower maps take it where the extra columns fit in
# the 16-pixel vectors' padding (ResNet's 7x7 maps: 63 pixels for 49, 64 lanes either way; quant._emit_gemm_conv)
Q8_IGEMM_MIN_WO = 12


def implicit_matrix(w: np.ndarray, tap_major: bool = False) -> np.ndarray:
    """int8 conv weights [M][C][kh][kw] -> the implicit GEMM's weight matrix [M][K]: k = (c4, tap, 4 channels)
    (tap_major, the AMX kernel's: (tap, c4, 4 channels)), channels padded to a multiple of 4 with zero weights."""
    m, c = w.shape[:2]
    taps = w[0, 0].size
    c4 = (c + 3) // 4
    z = np.zeros((m, c4 * 4, taps), np.int8)
    z[:, :c] = w.reshape(m, c, taps)
    order = (0, 3, 1, 2) if tap_major else (0, 1, 3, 2)
    return np.ascontiguousarray(z.reshape(m, c4, 4, taps).transpose(*order)).reshape(m, -1)


def pack_w_implicit(w: np.ndarray, fn: str | None = None) -> np.ndarray:
    """The implicit GEMM's packed weights for GEMM fn: implicit_matrix, then pack_w (AMX: tap-major, pack_w_amx)."""
    if fn == Q8_GEMM["amx"][0]:
        return pack_w_amx(implicit_matrix(w, tap_major=True))
    return pack_w(implicit_matrix(w))


def igemm_variant(fn: str, w: np.ndarray, groups: int) -> str | None:
    """The implicit form of GEMM fn for conv weights [M][C/g][kh][kw], or None. The vpmaddubsw kernel pairs
    neighbouring k, which the implicit order changes: its pair bound is checked again in that order. The AMX one
    reads 16 channel quads of one tap a block: 64-channel multiples only (smaller ones: the im2col and the AMX
    GEMM, whose blocks span taps)."""
    ig = Q8_IGEMM.get(fn)
    if fn == Q8_GEMM["amx"][0]:  # 16-step blocks must not straddle two taps: whole 64-channel groups
        return ig if w.shape[1] % 64 == 0 else None
    if ig is None or fn != Q8_GEMM_MADDUBS[0]:
        return ig
    ocg = w.shape[0] // groups
    return ig if all(maddubs_exact(implicit_matrix(w[j * ocg:(j + 1) * ocg])) for j in range(groups)) else None


# one-pixel convs / one-row GEMMs (runtime_c/q8-gemm/q8-gemv.h): ISA -> (function, file); the scalar
# reference q8_gemv__scalar (q8-gemv-scalar.c) is what the tests compare each one with
Q8_GEMV = {"avx2": ("q8_gemv__avx2", "q8-gemm/q8-gemv-avx2.c"),
           "avx512vnni": ("q8_gemv__avx512vnni", "q8-gemm/q8-gemv-avx512vnni.c")}


# u8 x s8 vpmaddubsw GEMM for AVX2 without VNNI: exact only on weights whose k-pairs cannot saturate
# the int16 pair sum (maddubs_exact); measured 1.4-3.7x q8_gemm_4x8__avx2 (benchmarks/bench_int8.py --micro)
Q8_GEMM_MADDUBS = ("q8_gemm_4x16__avx2_maddubs", "q8-gemm/q8-gemm-4x16-avx2-maddubs.c", False)


def maddubs_exact(w: np.ndarray) -> bool:
    """Whether vpmaddubsw's int16 pair sums are exact for every u8 input with these int8 weights W[M][K]:
    per row and k-pair (k even, k+1), 255 * (sum of positive parts) <= 32767 and 255 * (sum of negative
    parts) >= -32768, i.e. positive parts <= 128 and negative parts >= -128. 7-bit weights (|w| <= 64,
    onnxruntime's reduce_range) always pass; typical 8-bit weights do not (127 + 127 per pair)."""
    w = np.asarray(w, np.int32).reshape(w.shape[0], -1)
    if w.shape[1] % 2:
        w = np.pad(w, ((0, 0), (0, 1)))
    pairs = w.reshape(w.shape[0], -1, 2)
    pos, neg = np.maximum(pairs, 0).sum(axis=2), np.minimum(pairs, 0).sum(axis=2)
    return bool(255 * pos.max(initial=0) <= 32767 and 255 * neg.min(initial=0) >= -32768)


# ARMv8.0 NEON: two k4 steps per int16 product lane (vmull + vmlal, one vpadal); exact per neon_mlal_exact
Q8_GEMM_NEON_MLAL = ("q8_gemm_4x8__neon_mlal", "q8-gemm/q8-gemm-4x8-neon-mlal.c", True)


def neon_mlal_exact(w: np.ndarray) -> bool:
    """Whether two s8 x s8 products per int16 lane stay exact for every signed input (x in [-128, 127]) with
    weights W[M][K]: lanes pair k with k + 4 (k4 steps 2q, 2q+1; an odd last step pairs with 0); per pair,
    the sums of max(127w, -128w) and of min(127w, -128w) must stay within int16. Weights in [-127, 127]
    always pass."""
    w = np.asarray(w, np.int64).reshape(w.shape[0], -1)
    w = np.pad(w, ((0, 0), (0, -w.shape[1] % 8)))
    hi, lo = np.maximum(127 * w, -128 * w), np.minimum(127 * w, -128 * w)
    pair = (lambda a: a.reshape(w.shape[0], -1, 2, 4).sum(axis=2))
    return bool(pair(hi).max(initial=0) <= 32767 and pair(lo).min(initial=0) >= -32768)


def gemm_variant(target, w: np.ndarray | None = None) -> tuple[str, str, bool]:
    """Pick the q8 GEMM for a target (data from its isa/features; armv7 uses the portable one) and, where a
    kernel is exact only on narrow weights, for the layer's constant weights W[M][K] (None: any weights)."""
    if w is not None and maddubs_target(target) and maddubs_exact(w):
        return Q8_GEMM_MADDUBS
    if w is not None and target.arch == "aarch64" and target.isa == "neon" and neon_mlal_exact(w):
        return Q8_GEMM_NEON_MLAL
    if target.arch == "armv7":
        return Q8_GEMM["scalar"]
    if target.isa == "avx512" and "amx_int8" in target.features and (w is None or w.shape[1] >= Q8_AMX_MIN_K):
        return Q8_GEMM["amx"]
    if target.isa == "avx512" and "avx512_vnni" in target.features:
        return Q8_GEMM["avx512vnni"]
    if avx_vnni(target):
        return Q8_GEMM["avxvnni"]
    if target.isa == "avx512" and "avx512bw" not in target.features:
        return Q8_GEMM["avx2"]
    return Q8_GEMM.get(target.isa, Q8_GEMM["scalar"])


# depth from which the AMX GEMM takes a layer: a tile product uses K/4 of its 16 k4 rows, and the requantization is
# the same; AMX / VNNI time measured 1.4-1.5x at K = 4, ~1.0 at K = 8, 0.55-0.75x at K = 12-27 (SqueezeNet's
# 3-channel stem, K = 27: 0.54-0.70x), 0.6x at K = 32 (64 and 128 rows, 729-12321 pixels; Xeon Emerald Rapids)
Q8_AMX_MIN_K = 12

# files a GEMM needs besides its own: the AMX kernel's scalar form, which it runs where the OS grants no tile state
Q8_GEMM_DEPS = {"q8_gemm_32x32__amx": ("q8-gemm/q8-gemm-amx-scalar.c",)}


def gemm_files(fn: str, src: str) -> tuple[str, ...]:
    return (src, *Q8_GEMM_DEPS.get(fn, ()))


def pack_w_c32(w: np.ndarray) -> np.ndarray:
    """int8 W[M][K] -> the channel-lane GEMM's layout (q8_pack_w_c32 in q8-gemm.h): [ceil(M/32)][ceil(K/4)][32 rows]
    [4 k], zero past M and K."""
    m, k = w.shape
    mp = -(-m // 32) * 32
    z = np.zeros((mp, ceil4(k)), np.int8)
    z[:m, :k] = w
    return np.ascontiguousarray(z.reshape(mp // 32, 32, ceil4(k) // 4, 4).transpose(0, 2, 1, 3)).ravel()


def pack_w_for(fn: str, w: np.ndarray) -> np.ndarray:
    """W[M][K] packed for GEMM fn: AMX's layout for the AMX kernel, else pack_w's."""
    return pack_w_amx(w) if fn == Q8_GEMM["amx"][0] else pack_w(w)


def pack_w_amx(w: np.ndarray) -> np.ndarray:
    """int8 W[M][K] -> the AMX kernel's layout (q8_pack_w_amx in q8-gemm.h): per 16-row panel, nb blocks of kb
    k4 steps (kb = min(16, K4)), 16 rows x kb * 4 bytes each; block b covers k4 from min(b kb, K4 - kb), zero on
    the k4 the block before covered."""
    m, k = w.shape
    k4 = (k + 3) // 4
    kb = min(16, k4)
    nb = -(-k4 // kb)
    z = np.zeros((-(-m // 16) * 16, k4 * 4), np.int8)
    z[:m, :k] = w
    out = np.zeros((z.shape[0] // 16, nb, 16, kb * 4), np.int8)
    for b in range(nb):
        s = min(b * kb, k4 - kb)
        blk = z[:, s * 4:(s + kb) * 4].copy()
        blk[:, :max(0, b * kb - s) * 4] = 0
        out[:, b] = blk.reshape(-1, 16, kb * 4)
    return out.ravel()


def maddubs_kernels(target) -> bool:
    """x86 that runs the AVX2 vpmaddubsw kernels (GEMM, depthwise, GSPC): AVX2, or AVX-512 without BW."""
    if target.arch != "x86_64":
        return False
    return target.isa == "avx2" or (target.isa == "avx512" and "avx512bw" not in target.features)


def avx_vnni(target) -> bool:
    """AVX2 x86 with AVX-VNNI (VEX vpdpbusd on ymm): its int8 GEMM is exact on 8-bit weights."""
    return target.arch == "x86_64" and target.isa == "avx2" and "avx_vnni" in target.features


def maddubs_target(target) -> bool:
    """x86 whose int8 GEMM without the vpmaddubsw kernel would be the vpmaddwd one (so 7-bit weights pay): AVX2
    without AVX-VNNI, or AVX-512 without BW / VNNI."""
    return maddubs_kernels(target) and not avx_vnni(target)


def quantize_multiplier(scale: float) -> tuple[int, int]:
    """float32 scale in (2^-32, 1) -> (mult in [2^30, 2^31), shift in [31, 62]) with mult*2^-shift == scale."""
    scale = float(np.float32(scale))
    if not (0.0 < scale < 1.0):
        raise EdgecError(f"int8 requantization scale {scale:g} is outside (0, 1); this layer cannot run in int8")
    m, e = math.frexp(scale)            # scale = m * 2^e, m in [0.5, 1)
    mult, shift = int(round(m * (1 << 31))), 31 - e
    if mult == 1 << 31:
        mult, shift = 1 << 30, shift - 1
    if shift > 62:                      # scales below 2^-31: keep the shift in range
        mult, shift = mult >> (shift - 62), 62
    return mult, shift


def requant_scales(x_scale, w_scale, y_scale, channels: int) -> np.ndarray:
    """Per-channel float32 scales computed as onnxruntime does: (x_s * w_s) / y_s in float32."""
    ws = np.broadcast_to(np.asarray(w_scale, np.float32).reshape(-1), (channels,))
    return (np.float32(x_scale) * ws).astype(np.float32) / np.float32(y_scale)


def ceil4(n: int) -> int:
    return (n + 3) // 4 * 4


def pack_w(w: np.ndarray) -> np.ndarray:
    """int8 W[M][K] -> [ceil(M/4)][ceil(K/4)][4 rows][4 k] (layout of q8-gemm.h)."""
    m, k = w.shape
    z = np.zeros((ceil4(m), ceil4(k)), np.int8)
    z[:m, :k] = w
    return np.ascontiguousarray(z.reshape(ceil4(m) // 4, 4, ceil4(k) // 4, 4).transpose(0, 2, 1, 3)).ravel()


# kernels whose requantization can run in fp32 (q8_rq.scale / q8_dw_params.scale; runtime_c/q8-requant): the
# AVX-512 ones, where the fixed-point path's 64-bit multiplies and shifts compete with vpdpbusd for a port
# (the VNNI GEMM on ppocr cls's 1x1 shapes at K <= 32: 1.1-1.5x; docs/benchmarks.md, int8 on the VNNI host)
FP32_RQ_KERNELS = frozenset({"q8_gemm_8x32__avx512vnni", "q8_gemm_32x32__amx", "q8_gemm_4x16__avx512bw",
                             "q8_gemm_4x16__avxvnni", "q8_dwconv__avx512vnni",
                             "q8_dwconv__avx512", "q8_dwconv_c16__avx512vnni", "q8_gspc_o16__avx512vnni",
                             "q8_gspc_o8__avx512vnni", "q8_gemv__avx512vnni", "q8_cgemm_32x8__avx512vnni"})


@dataclass
class RowParams:
    bias: np.ndarray   # int32 [ceil4(M)] accumulator init
    mult: np.ndarray   # int32 [ceil4(M)]
    shift: np.ndarray  # int32 [ceil4(M)]
    scale: np.ndarray  # float32 [ceil4(M)]: the fp32 requantization's (1.0 past M)


def row_params(w: np.ndarray, bias_q: np.ndarray | None, zx_u8: int, scales: np.ndarray,
               x_signed: bool) -> RowParams:
    """Bias folded with the input zero point (and the +128 of signed-X kernels), multipliers per row."""
    m = w.shape[0]
    wsum = w.astype(np.int64).sum(axis=1)
    b = np.zeros(m, np.int64) if bias_q is None else bias_q.astype(np.int64).reshape(m)
    b = b - zx_u8 * wsum + (128 * wsum if x_signed else 0)
    if np.abs(b).max(initial=0) >= 2**31:
        raise EdgecError("int8 bias does not fit in int32 after zero-point folding")
    out = RowParams(np.zeros(ceil4(m), np.int32), np.full(ceil4(m), 1 << 30, np.int32),
                    np.full(ceil4(m), 31, np.int32), np.ones(ceil4(m), np.float32))
    out.bias[:m] = b
    out.scale[:m] = np.asarray(scales[:m], np.float32)
    for i, s in enumerate(scales[:m]):
        out.mult[i], out.shift[i] = quantize_multiplier(s)
    return out


def to_u8_domain(zp: np.ndarray | int, dtype) -> int:
    """Zero point of an int8/uint8 tensor expressed in the u8 domain."""
    z = int(np.asarray(zp).reshape(-1)[0])
    return z + 128 if np.dtype(dtype) == np.int8 else z


def act_clamp(act: str | None, params: dict, y_scale: float, y_zp_u8: int) -> tuple[int, int]:
    """Relu / Clip fused as a u8 clamp of the requantized output; None -> full range."""
    lo, hi = 0, 255
    if act == "relu":
        lo = y_zp_u8
    elif act == "clip":
        fmin, fmax = params.get("min", -np.inf), params.get("max", np.inf)
        if np.isfinite(fmin):
            lo = max(lo, int(np.clip(np.round(fmin / y_scale) + y_zp_u8, 0, 255)))
        if np.isfinite(fmax):
            hi = min(hi, int(np.clip(np.round(fmax / y_scale) + y_zp_u8, 0, 255)))
    elif act is not None:
        raise EdgecError(f"activation {act} cannot be fused into an int8 kernel")
    return lo, hi


def add_multipliers(a_scale: float, b_scale: float, y_scale: float) -> tuple[int, int, int]:
    """(ma, mb, shift) for q8_add: a_s/y_s ~ ma*2^-shift, both multipliers below 2^22 (no int32 overflow)."""
    ra, rb = float(a_scale) / float(y_scale), float(b_scale) / float(y_scale)
    shift = min(30, int(math.floor(math.log2((1 << 22) / max(ra, rb)))))
    if shift < 1:
        raise EdgecError(f"int8 Add scale ratio {max(ra, rb):g} is too large for the int8 kernel")
    return int(round(ra * (1 << shift))), int(round(rb * (1 << shift))), shift
