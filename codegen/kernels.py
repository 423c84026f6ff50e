"""The fp32 convolution / GEMM kernel table.

One row per C kernel (XNNPACK-style name, file runtime_c/<dtype>-<op>/<dtype>-<op>-<tile>-<isa>.c).
The table is the single source for: which kernels a target may use (kernel isa within the
target's isa family), the tile parameters the emitters pack weights for, the compiler flags a
kernel needs in tests, and the test parametrisation (tests/kernels). Adding an ISA = new
files + rows here + an entry in ISA_USES.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgec.codegen.targets import Target, get_target

# kernel isas a target isa can run, best first
ISA_USES = {
    "scalar": ("scalar",),
    "avx2": ("avx2", "scalar"),
    "avx512": ("avx512", "avx2", "scalar"),
    "neon": ("neon", "scalar"),
    "neon-v82": ("neon", "scalar"),
}

SCRATCH_THREADS = 8  # per-thread scratch slices reserved; = EC_MAX_THREADS in ec_threadpool.h


@dataclass(frozen=True, eq=False)
class Kernel:
    name: str          # C function (winograd: the transform pair, functions in params "in" / "out")
    dtype: str         # f32
    op: str            # gemm | igemm | gspc | gspc_ow | gspc_mg | dwconv | dwconv_cb | winograd
    isa: str           # scalar | avx2 | avx512 | neon
    tile: str
    file: str          # relative to runtime_c/
    params: dict = field(default_factory=dict)
    arch: str | None = None   # only for this target arch (register file size)
    scratch: str = ""         # what the kernel's driver needs, in bytes (see the emitter)

    @property
    def header(self) -> str:
        return f"{self.dtype}-{_FAMILY[self.op]}/{self.dtype}-{_FAMILY[self.op]}.h"


_FAMILY = {"gemm": "gemm", "igemm": "gemm", "gspc": "gspc", "gspc_ow": "gspc", "gspc_mg": "gspc", "dwconv": "dwconv",
           "dwconv_cb": "dwconv", "winograd": "winograd"}
_G = "f32-gemm/f32-gemm-"
_GS = "f32-gspc/f32-gspc-"
_I = "f32-igemm/f32-igemm-"
_IGEMM_SCRATCH = "padded input N*C*Hp*Wp + Wp + NR, plus threads x Mp x NC tile buffers (x 4 bytes)"
_DW = "f32-dwconv/f32-dwconv-"
_MG_SCRATCH = "N x ceil(G/gb) x gb x C/G x Hp x Wp x 4 (packed input, groups interleaved)"
_GEMM_SCRATCH = "conv: threads x Cpg*KH*KW x NC x 4; Gemm/MatMul: packed runtime operands"
_WG_SCRATCH = "N x C x m x HP x Q (input in column phases) + threads x alpha^2 x (Cpg + KB) x TB (V, M) (x 4 bytes)"

KERNELS: tuple[Kernel, ...] = (
    # gemm vl: the columns of the microkernel's one-vector path (nr <= vl: one vector of FMAs a row; 0: none); hv: its
    # half-vector unit (EC_HVL: a tail of nr <= hv, or vl < nr <= vl + hv, runs half-vector FMAs)
    Kernel("f32_gemm_ukernel_4x4__scalar", "f32", "gemm", "scalar", "4x4", _G + "4x4-scalar.c",
           {"mr": 4, "nr": 4, "vl": 0, "packb": "f32_gemm_packb_ukernel_4x4__scalar"}, scratch=_GEMM_SCRATCH),
    Kernel("f32_gemm_ukernel_6x16__avx2", "f32", "gemm", "avx2", "6x16", _G + "6x16-avx2.c",
           {"mr": 6, "nr": 16, "vl": 8, "packb": "f32_gemm_packb_ukernel_6x16__avx2"}, scratch=_GEMM_SCRATCH),
    Kernel("f32_gemm_ukernel_12x32__avx512", "f32", "gemm", "avx512", "12x32", _G + "12x32-avx512.c",
           {"mr": 12, "nr": 32, "vl": 16, "hv": 8, "packb": "f32_gemm_packb_ukernel_12x32__avx512"},
           scratch=_GEMM_SCRATCH),
    Kernel("f32_gemm_ukernel_8x12__neon", "f32", "gemm", "neon", "8x12", _G + "8x12-neon.c",
           {"mr": 8, "nr": 12, "vl": 4, "packb": "f32_gemm_packb_ukernel_8x12__neon"}, arch="aarch64",
           scratch=_GEMM_SCRATCH),
    Kernel("f32_gemm_ukernel_4x8__neon", "f32", "gemm", "neon", "4x8", _G + "4x8-neon.c",
           {"mr": 4, "nr": 8, "vl": 4, "packb": "f32_gemm_packb_ukernel_4x8__neon"}, arch="armv7",
           scratch=_GEMM_SCRATCH),
    Kernel("f32_igemm_ukernel_4x4__scalar", "f32", "igemm", "scalar", "4x4", _I + "4x4-scalar.c",
           {"mr": 4, "nr": 4}, scratch=_IGEMM_SCRATCH),
    Kernel("f32_igemm_ukernel_6x16__avx2", "f32", "igemm", "avx2", "6x16", _I + "6x16-avx2.c",
           {"mr": 6, "nr": 16}, scratch=_IGEMM_SCRATCH),
    Kernel("f32_igemm_ukernel_12x32__avx512", "f32", "igemm", "avx512", "12x32", _I + "12x32-avx512.c",
           {"mr": 12, "nr": 32}, scratch=_IGEMM_SCRATCH),
    Kernel("f32_igemm_ukernel_8x12__neon", "f32", "igemm", "neon", "8x12", _I + "8x12-neon.c",
           {"mr": 8, "nr": 12}, arch="aarch64", scratch=_IGEMM_SCRATCH),
    Kernel("f32_igemm_ukernel_4x8__neon", "f32", "igemm", "neon", "4x8", _I + "4x8-neon.c",
           {"mr": 4, "nr": 8}, arch="armv7", scratch=_IGEMM_SCRATCH),
    # GSPC row kernels: t_o output-channel lanes, bmax = largest ow register block,
    # lpc = lanes per cycle (FMA throughput) used to trade padding against width; ymm on an
    # AVX-512 core measured below zmm (one broadcast load per FMA), hence 12 not 16
    Kernel("f32_gspc_row__scalar", "f32", "gspc", "scalar", "any", _GS + "scalar.c",
           {"t_o": 0, "bmax": 1, "lpc": 1}, scratch="N x C x Hp x Wp x 4 (packed input)"),
    Kernel("f32_gspc_row_o4__avx2", "f32", "gspc", "avx2", "o4", _GS + "o4-avx2.c",
           {"t_o": 4, "bmax": 14, "lpc": 8}, scratch="N x C x Hp x Wp x 4"),
    Kernel("f32_gspc_row_o8__avx2", "f32", "gspc", "avx2", "o8", _GS + "o8-avx2.c",
           {"t_o": 8, "bmax": 14, "lpc": 16}, scratch="N x C x Hp x Wp x 4"),
    Kernel("f32_gspc_row_o8__avx512", "f32", "gspc", "avx512", "o8", _GS + "o8-avx512.c",
           {"t_o": 8, "bmax": 28, "lpc": 12}, scratch="N x C x Hp x Wp x 4"),
    Kernel("f32_gspc_row_o16__avx512", "f32", "gspc", "avx512", "o16", _GS + "o16-avx512.c",
           {"t_o": 16, "bmax": 28, "lpc": 16}, scratch="N x C x Hp x Wp x 4"),
    Kernel("f32_gspc_row_o4__neon", "f32", "gspc", "neon", "o4", _GS + "o4-neon.c",
           {"t_o": 4, "bmax": 24, "lpc": 8}, arch="aarch64", scratch="N x C x Hp x Wp x 4"),
    Kernel("f32_gspc_row_o4__neon", "f32", "gspc", "neon", "o4", _GS + "o4-neon.c",
           {"t_o": 4, "bmax": 12, "lpc": 8}, arch="armv7", scratch="N x C x Hp x Wp x 4"),
    # gv vectors a tile: one input broadcast feeds gv FMAs (at one vector the broadcast loads bound the
    # loop: 1.1-1.25x slower on stride-2 rows, Zen 5); bmax = what the register file holds beside the gv
    # weight vectors. Four zmm in 6-pixel blocks measured 1.1-1.35x two; three ymm (T_O 24) on AVX-512 ran
    # 1.3-1.4x two zmm even with the zmm tile a third padding (Zen 5), so neither is here
    *(Kernel(f"f32_gspc_row_o{t}__{isa}", "f32", "gspc", isa, f"o{t}", f"{_GS}o{t}-{isa}.c",
             {"t_o": t, "bmax": bmax, "lpc": lpc, "gv": gv}, arch=arch, scratch="N x C x Hp x Wp x 4")
      for isa, t, bmax, lpc, gv, arch in (("avx512", 32, 14, 16, 2, None), ("avx512", 48, 9, 16, 3, None),
                                          ("avx2", 16, 6, 16, 2, None), ("neon", 8, 12, 8, 2, "aarch64"),
                                          ("neon", 8, 5, 8, 2, "armv7"))),
    # along ow (groups of <= 8 output channels, chosen at stride 1): measured 1.3-2.6x the o4/o8
    # tiles there
    *(Kernel(f"f32_gspc_row_ow__{isa}", "f32", "gspc_ow", isa, "ow", f"{_GS}ow-{isa}.c",
             {"kmax": 8, "lanes": lanes}, scratch="N x C x Hp x Wp x 4")
      for isa, lanes in (("avx2", 8), ("avx512", 16), ("neon", 4))),
    # several groups per vector (gb groups x kp lanes, lane = k*gb + group) for groups narrower than
    # half a vector; the scalar one (any layout) is the reference the SIMD ones are tested against
    Kernel("f32_gspc_mg_row__scalar", "f32", "gspc_mg", "scalar", "any", _GS + "mg-scalar.c",
           {"gb": 0, "kp": 0, "bmax": 1}, scratch=_MG_SCRATCH),
    *(Kernel(f"f32_gspc_mg_row_g{gb}x{kp}__{isa}", "f32", "gspc_mg", isa, f"g{gb}x{kp}",
             f"{_GS}g{gb}x{kp}-{isa}.c", {"gb": gb, "kp": kp, "bmax": bmax}, arch=arch, scratch=_MG_SCRATCH)
      for isa, gb, kp, bmax, arch in (("avx512", 2, 8, 28, None), ("avx512", 4, 4, 28, None),
                                      ("avx512", 8, 2, 28, None), ("avx2", 2, 4, 14, None),
                                      ("avx2", 4, 2, 14, None), ("neon", 2, 2, 24, "aarch64"),
                                      ("neon", 2, 2, 12, "armv7"))),
    Kernel("f32_dwconv_kxk__scalar", "f32", "dwconv", "scalar", "kxk", _DW + "kxk-scalar.c",
           {"k": None}, scratch="min(N x C, 8) planes x SW x Hp x Wq x 4 (column phases; one a thread)"),
    *(Kernel(f"f32_dwconv_{t}__{isa}", "f32", "dwconv", isa, t, f"{_DW}{t}-{isa}.c",
             {"k": (int(t[0]), int(t[0])) if t != "kxk" else None},
             scratch="min(N x C, 8) planes x SW x Hp x Wq x 4 (one a thread)")
      for isa in ("avx2", "avx512", "neon") for t in ("3x3", "5x5", "kxk")),
    # channel-blocked depthwise for small maps: lanes channels interleaved per work item
    *(Kernel(f"f32_dwconv_cb__{isa}", "f32", "dwconv_cb", isa, f"c{lanes}", f"{_DW}cb-{isa}.c",
             {"lanes": lanes}, scratch="N x ceil(C/lanes) x Hp x Wp x lanes x 4")
      for isa, lanes in (("avx2", 8), ("avx512", 16), ("neon", 4))),
    # Winograd F(m,3) input/output transform pairs (3x3 stride-1 convs; the alpha^2 GEMMs run on the
    # isa's f32-gemm microkernel); the scalar ones are the reference, with the matrices as tables
    *(Kernel(f"f32_winograd_f{m}3__{isa}", "f32", "winograd", isa, f"f{m}3", f"f32-winograd/f32-winograd-f{m}3-{isa}.c",
             {"m": m, "in": f"f32_winograd_in_f{m}3__{isa}", "out": f"f32_winograd_out_f{m}3__{isa}",
              **({} if isa == "scalar" else {"outc": f"f32_winograd_outc_f{m}3__{isa}"})},
             scratch=_WG_SCRATCH)
      for isa in ("scalar", "avx2", "avx512", "neon") for m in (2, 4, 6)),
)


def usable(target: Target, op: str) -> list[Kernel]:
    """Kernels of op the target can run, best ISA first."""
    order = ISA_USES[target.isa]
    ks = [k for k in KERNELS if k.op == op and k.isa in order and (k.arch is None or k.arch == target.arch)]
    return sorted(ks, key=lambda k: order.index(k.isa))


def gemm_kernel(target: Target) -> Kernel:
    return usable(target, "gemm")[0]


def igemm_kernel(target: Target) -> Kernel:
    return usable(target, "igemm")[0]


def gspc_kernel(target: Target, kpg: int, wo: int | None = None) -> tuple[Kernel, int]:
    """(row kernel, T_O) for Kpg output channels per group: least padded work per FMA lane, each tile's lanes
    weighted by its row blocks' issue limits on wo-wide rows (gspc_tile_factor); the narrower tile on a tie
    (fewer weights a row, wider blocks). Counting a narrower last tile (gspc_tail_kernel) at its own cost here
    moved Kpg 24 / 18 from two zmm to one (with a ymm / xmm tail) and ran 1.05-1.08x slower (Zen 5, stride 2:
    96ch 112x112 g=4, 144ch 56x56 g=8, 192ch 28x28 g=8); at its vector instructions' cost it moved AVX2 layers
    to two-ymm tiles with tails, 1.09-1.26x slower there. So the tail only takes what the chosen tile leaves."""
    from edgec.codegen.costmodel import gspc_tile_factor
    from edgec.codegen.ops.conv import _owb

    best, seen = None, set()
    for k in usable(target, "gspc"):  # best isa first: a tile width counts once, in its best isa
        if k.params["t_o"] in seen:
            continue
        seen.add(k.params["t_o"])
        t = k.params["t_o"] or _largest_divisor(kpg, 16)
        padded = -(-kpg // t) * t
        f = 1.0
        if wo and k.params["t_o"]:
            f = gspc_tile_factor(wo, _owb(wo, k.params["bmax"]), k.params["bmax"], k.params.get("gv", 1))
        key = (round(padded / k.params["lpc"] * f, 6), padded - kpg, t)
        if best is None or key < best[0]:
            best = (key, k, t)
    return best[1], best[2]


def gspc_tail_kernel(target: Target, k: Kernel, kpg: int) -> Kernel | None:
    """A kernel of fewer vectors than T_O tile kernel k that holds a group's last Kpg % T_O channels: it runs that
    tile from k's packing (f32_gspc_shape.row_tail). Kpg 72 on two-zmm tiles: 32 + 32 + 8 lanes (the last on ymm,
    one FMA a pixel where the padded tile took two); Zen 5, stride 2, 1 thread: 576ch 14x14 g=8 0.208 -> 0.187 ms.
    A tile of as many vectors saves nothing (a ymm FMA issues like a zmm one)."""
    t_o, gv = k.params["t_o"], k.params.get("gv", 1)
    r = kpg % t_o if t_o else 0
    ks = [c for c in usable(target, "gspc") if c.params["t_o"] and r <= c.params["t_o"] < t_o
          and c.params.get("gv", 1) < gv] if r else []
    return min(ks, key=lambda c: (c.params.get("gv", 1), c.params["t_o"])) if ks else None


def gspc_ow_kernel(target: Target, kpg: int, sw: int, wo: int) -> Kernel | None:
    """The along-ow GSPC row kernel for few output channels per group at stride 1 (strided rows
    work through column phases but measured slower than the T_O tiles: 0.25 vs 0.13-0.15 ms on
    ResNet34's 64ch 56x56 stride-2 layer at g=8/16)."""
    ks = [k for k in usable(target, "gspc_ow") if kpg <= k.params["kmax"] and wo >= k.params["lanes"]]
    ks = ks if sw == 1 else []  # rows narrower than a vector leave lanes idle: T_O tiles then
    return ks[0] if ks else None


def gspc_mg_kernel(target: Target, kpg: int) -> Kernel | None:
    """The multi-group GSPC row kernel for Kpg channels per group: the best isa's narrowest
    lanes-per-group >= Kpg, if at least two groups then share a vector."""
    ks = [k for k in usable(target, "gspc_mg") if k.params["gb"] and k.params["kp"] >= kpg]
    if not ks:
        return None
    best = ISA_USES[target.isa].index(ks[0].isa)
    ks = [k for k in ks if ISA_USES[target.isa].index(k.isa) == best]
    return min(ks, key=lambda k: k.params["kp"])


def gspc_mg_wins(target: Target, mg: Kernel, kpg: int, g: dict | None = None) -> bool:
    """Whether the multi-group kernel beats one group per tile: this device's verdict for Kpg when its
    tuning records gave one (costmodel.fit_gspc), else gspc_mg_rule."""
    return _learned_verdict(f"gspc-mg-k{kpg}", gspc_mg_rule(target, mg, kpg, g))


def gspc_mg_rule(target: Target, mg: Kernel, kpg: int, g: dict | None = None) -> bool:
    """The estimate's verdict (costmodel.gspc_estimate): mg is cheaper than the best single-group T_O tile and
    the along-ow kernel on layer g (default: a 3x3 stride-1 28x28 layer with Cpg = Kpg)."""
    g = g or _typical_layer(kpg)
    est = _gspc_estimates(target, g)
    return est["mg"] < min(v for f, v in est.items() if f != "mg")


def gspc_ow_wins(target: Target, kpg: int, g: dict | None = None) -> bool:
    """Whether the along-ow kernel beats one group per T_O tile: this device's verdict for Kpg when its
    tuning records gave one (costmodel.fit_gspc), else gspc_ow_rule."""
    return _learned_verdict(f"gspc-ow-k{kpg}", gspc_ow_rule(target, kpg, g))


def gspc_ow_rule(target: Target, kpg: int, g: dict | None = None) -> bool:
    """The estimate's verdict (costmodel.gspc_estimate): the along-ow kernel is cheaper than the best T_O tile
    on layer g (default: a 3x3 stride-1 28x28 layer with Cpg = Kpg). Idle lanes of a tile wider than Kpg, a
    tile narrower than the ISA's widest, and the ow kernel's own idle lanes (Wo not a multiple of its vector)
    and few accumulators (Kpg below FMA latency x units) all enter as issue slots."""
    g = g or _typical_layer(kpg)
    est = _gspc_estimates(target, dict(g, SW=1))
    return "ow" in est and est["ow"] < est["tile"]


def _typical_layer(kpg: int) -> dict:
    return dict(N=1, C=8 * kpg, H=28, W=28, K=8 * kpg, Ho=28, Wo=28, G=8, KH=3, KW=3, SH=1, SW=1, DH=1, DW=1,
                PT=1, PL=1)


def gspc_candidates(target: Target, g: dict) -> dict:
    """Each GSPC family that can run layer g: family -> (kernel, T_O, T_I, ow block)."""
    from edgec.codegen.ops.conv import _owb

    kpg, cpg = g["K"] // g["G"], g["C"] // g["G"]
    k, t_o = gspc_kernel(target, kpg, g["Wo"])
    out = {"tile": (k, t_o, _largest_divisor(cpg, t_o), _owb(g["Wo"], k.params["bmax"] if k.params["t_o"] else 1))}
    mg = gspc_mg_kernel(target, kpg)
    if mg is not None:
        out["mg"] = (mg, mg.params["kp"], mg.params["gb"], _owb(g["Wo"], mg.params["bmax"]))
    ow = gspc_ow_kernel(target, kpg, g["SW"], g["Wo"])
    if ow is not None:
        out["ow"] = (ow, kpg, 1, 1)
    return out


def _gspc_estimates(target: Target, g: dict) -> dict:
    from edgec.codegen.costmodel import gspc_estimate

    return {f: gspc_estimate(target, g, k, t_o, owb) for f, (k, t_o, _, owb) in gspc_candidates(target, g).items()}


def _learned_verdict(name: str, rule: bool) -> bool:
    from edgec.codegen.costmodel import learned_value

    return learned_value(name, float(rule)) >= 0.5


def dwconv_kernel(target: Target, kh: int, kw: int) -> Kernel:
    ks = usable(target, "dwconv")
    exact = [k for k in ks if k.params["k"] == (kh, kw)]
    return exact[0] if exact else next(k for k in ks if k.params["k"] is None)


def dwconv_cb_kernel(target: Target) -> Kernel | None:
    ks = usable(target, "dwconv_cb")
    return ks[0] if ks else None


def winograd_kernel(target: Target, m: int) -> Kernel:
    """The F(m,3) transform pair of the target's best isa (the scalar pair always exists)."""
    return next(k for k in usable(target, "winograd") if k.params["m"] == m)


def _largest_divisor(n: int, cap: int) -> int:
    return max(d for d in range(1, min(n, cap) + 1) if n % d == 0)


# -- tests / builds: how to compile and run one kernel isa -------------------------------------
_ISA_TARGET = {("scalar", None): "generic", ("avx2", None): "x86_64-avx2", ("avx512", None): "x86_64-avx512",
               ("neon", "aarch64"): "aarch64-neon", ("neon", "armv7"): "armv7-neon", ("neon", None): "aarch64-neon"}


def build_target(k: Kernel) -> Target:
    """The target whose compiler/flags/emulator a test of kernel k uses."""
    return get_target(_ISA_TARGET.get((k.isa, k.arch)) or _ISA_TARGET[(k.isa, None)])
