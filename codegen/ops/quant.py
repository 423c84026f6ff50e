"""Int8 emitters: QuantizeLinear / DequantizeLinear at region edges, QLinearConv (GEMM or depthwise),
QLinearMatMul and EcQGemm (from codegen/ops/qdq.py) over runtime_c/q8-*.

Every int8/uint8 activation is kept in the u8 domain (int8 value + 128; see q8-requant.h), so one
kernel family serves both; the ONNX dtype only changes the zero point the kernels see.
"""

from __future__ import annotations

import numpy as np

from edgec.codegen import costmodel
from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node, Tensor
from edgec.codegen.ops import _par
from edgec.codegen.ops._util import flt
from edgec.codegen.ops.pool import window_pads
from edgec.codegen.ops.qpack import (FP32_RQ_KERNELS, Q8_GEMM, Q8_GEMM_MADDUBS, Q8_GEMV, Q8_IGEMM_MIN_WO, act_clamp,
                                     add_multipliers, avx_vnni, ceil4, cgemm_variant, gemm_files, gemm_variant,
                                     igemm_variant, implicit_matrix, maddubs_exact, maddubs_kernels, pack_w,
                                     pack_w_c32, pack_w_for, pack_w_implicit, requant_scales, row_params,
                                     to_u8_domain)
from edgec.codegen.registry import register
from edgec.errors import EdgecError

THREAD_SLICES = 8  # per-thread scratch slices = EC_MAX_THREADS in ec_threadpool.h
DW_FILES = {"avx2": ("q8-dwconv/q8-dwconv-avx2.c",), "avx512": ("q8-dwconv/q8-dwconv-avx512.c",),
            "avx512vnni": ("q8-dwconv/q8-dwconv-avx512vnni.c", "q8-dwconv/q8-dwconv-avx512.c",
                           "q8-dwconv/q8-dwconv-c16-avx512vnni.c"),
            "neon": ("q8-dwconv/q8-dwconv-neon.c",), "avx2_maddubs": ("q8-dwconv/q8-dwconv-avx2-maddubs.c",),
            "avxvnni": ("q8-dwconv/q8-dwconv-avxvnni.c",),
            "avx2_maddubs_shared": ("q8-dwconv/q8-dwconv-avx2-maddubs.c",)}


def _scalar(node: Node, t: Tensor | None, what: str) -> float:
    if t is None or not t.is_const or t.size != 1:
        raise EdgecError(f"node {node.name} ({node.op}): {what} must be a per-tensor constant")
    return t.const.reshape(-1)[0].item()


def _dw_isa(target) -> str:
    if target.arch == "x86_64" and {"avx512_vnni", "avx512vbmi", "avx512bw"} <= set(target.features):
        return "avx512vnni"
    if target.arch == "x86_64" and target.isa == "avx512" and "avx512bw" in target.features:
        return "avx512"
    if avx_vnni(target):
        return "avxvnni"
    if target.arch == "x86_64" and target.isa in ("avx2", "avx512"):
        return "avx2"
    return "neon" if target.arch == "aarch64" else "scalar"


def _weights_s8(node: Node, w: Tensor, wz: Tensor | None) -> np.ndarray:
    """int8 weights with zero point 0 (uint8 weights with zero point 128 are shifted)."""
    if w is None or not w.is_const:
        raise EdgecError(f"node {node.name} ({node.op}): weights must be constant")
    z = np.zeros(1) if wz is None else wz.const.reshape(-1)
    if w.dtype == np.int8 and np.all(z == 0):
        return w.const
    if w.dtype == np.uint8 and np.all(z == 128):
        return (w.const.astype(np.int16) - 128).astype(np.int8)
    raise EdgecError(f"node {node.name} ({node.op}): int8 weights need zero point 0 (symmetric quantization)")


def lut_kernel(ctx: EmitContext) -> str:
    """The target's u8 -> u8 table function (q8-eltwise.h), its files required."""
    fn = "q8_lut"
    if ctx.target.arch == "x86_64" and "avx512vbmi" in ctx.target.features:
        fn = "q8_lut__avx512vbmi"
        ctx.require("q8-eltwise/q8-lut-avx512vbmi.c")
    elif ctx.target.arch == "aarch64":
        fn = "q8_lut__neon"
        ctx.require("q8-eltwise/q8-lut-neon.c")
    elif ctx.target.arch == "x86_64" and "avx2" in ctx.target.features:
        fn = "q8_lut__avx2"
        ctx.require("q8-eltwise/q8-lut-avx2.c")
    ctx.require("q8-eltwise/q8-eltwise.h", "q8-eltwise/q8-eltwise-scalar.c")
    return fn


def _fused_lut(node: Node, ctx: EmitContext) -> tuple[str, str] | None:
    """(table pointer, function) of a table fused into this conv (codegen/fuse.py fuse_q8_luts), or None."""
    lut = node.attr("ec_lut")
    if lut is None:
        return None
    return ctx.weight(f"{node.name}:lut", np.ascontiguousarray(lut, np.uint8)), lut_kernel(ctx)


def _rq_ptrs(ctx: EmitContext, key: str, rows) -> tuple[str, str, str]:
    return (ctx.weight(f"{key}:bias", rows.bias), ctx.weight(f"{key}:mult", rows.mult),
            ctx.weight(f"{key}:shift", rows.shift))


def _scale_ptr(ctx: EmitContext, key: str, kernel: str, scale: np.ndarray) -> str:
    """The fp32 requantization's scales for a kernel that reads them (FP32_RQ_KERNELS), else NULL."""
    return ctx.weight(f"{key}:scale", np.ascontiguousarray(scale, np.float32)) if kernel in FP32_RQ_KERNELS else "NULL"


QDQ_BLOCK = 1024  # elements per parallel item of a QuantizeLinear / DequantizeLinear (a multiple of the 64-element steps)


@register("QuantizeLinear")
def emit_quantize(node: Node, ctx: EmitContext) -> str:
    x, s, z = node.inputs[0], node.input(1), node.input(2)
    y = node.outputs[0]
    if x.dtype != np.float32 or y.dtype not in (np.int8, np.uint8):
        raise EdgecError(f"node {node.name} (QuantizeLinear): only float32 -> int8/uint8 is supported")
    scale = _scalar(node, s, "y_scale")
    zp = to_u8_domain(z.const if z is not None else 0, y.dtype)
    ctx.require("q8-eltwise/q8-eltwise.h", "q8-eltwise/q8-eltwise-scalar.c")
    ctx.note(algo="q8-quantize", macs=y.size)
    sc = f"{float(np.float32(scale))!r}f"
    split = _par.flat_call(ctx, y.size, QDQ_BLOCK, 2 * y.size,  # a division each
                           f"q8_quantize(e_ - b_, {ctx.ptr(x)} + b_, {sc}, {zp}, (uint8_t *){ctx.ptr(y)} + b_);")
    return split or f"q8_quantize({y.size}u, {ctx.ptr(x)}, {sc}, {zp}, (uint8_t *){ctx.ptr(y)});\n"


@register("DequantizeLinear")
def emit_dequantize(node: Node, ctx: EmitContext) -> str:
    x, s, z = node.inputs[0], node.input(1), node.input(2)
    y = node.outputs[0]
    if x.dtype not in (np.int8, np.uint8):
        raise EdgecError(f"node {node.name} (DequantizeLinear): only int8/uint8 activations are supported")
    scale = _scalar(node, s, "x_scale")
    zp = to_u8_domain(z.const if z is not None else 0, x.dtype)
    ctx.require("q8-eltwise/q8-eltwise.h", "q8-eltwise/q8-eltwise-scalar.c")
    ctx.note(algo="q8-dequantize", macs=y.size)
    sc = f"{float(np.float32(scale))!r}f"
    split = _par.flat_call(ctx, y.size, QDQ_BLOCK, y.size,
                           f"q8_dequantize(e_ - b_, (const uint8_t *){ctx.ptr(x)} + b_, {sc}, {zp}, {ctx.ptr(y)} + b_);")
    return split or f"q8_dequantize({y.size}u, (const uint8_t *){ctx.ptr(x)}, {sc}, {zp}, {ctx.ptr(y)});\n"


def _conv_geometry(node: Node, x: Tensor, y: Tensor, w: np.ndarray):
    if len(x.shape) not in (3, 4):
        raise EdgecError(f"node {node.name} (QLinearConv): only 1-D and 2-D convolutions are supported")
    k = list(node.attr("kernel_shape", list(w.shape[2:])))
    nsp = len(k)
    s, d = list(node.attr("strides", [1] * nsp)), list(node.attr("dilations", [1] * nsp))
    ins, outs = list(x.shape[2:]), list(y.shape[2:])
    b, _ = window_pads(node, ins, outs, k, s, d)
    if nsp == 1:
        k, s, d, ins, outs, b = [1] + k, [1] + s, [1] + d, [1] + ins, [1] + outs, [0] + b
    return k, s, d, ins, outs, b


def qadd_params(add: Node, first: Tensor | None = None) -> str:
    """q8_add_params of an EcQAdd as a C initializer; with `first` (one of its operands) that operand is a
    (the integer sum is the same either way round)."""
    a, as_, az, b, bs, bz, ys, yz = add.inputs[:8]
    if first is not None and first is b:
        a, as_, az, b, bs, bz = b, bs, bz, a, as_, az
    ys_f = _scalar(add, ys, "y_scale")
    ma, mb, shift = add_multipliers(_scalar(add, as_, "a_scale"), _scalar(add, bs, "b_scale"), ys_f)
    za, zb, zy = to_u8_domain(az.const, a.dtype), to_u8_domain(bz.const, b.dtype), to_u8_domain(yz.const, add.outputs[0].dtype)
    lo, hi = act_clamp(add.attr("ec_act"), {}, ys_f, zy)
    return f"{{{za}, {zb}, {ma}, {mb}, {shift}, {zy}, {lo}, {hi}}}"


def qaddf_params(add: Node, first: Tensor | None = None) -> str:
    """q8_addf_params of an EcQAdd (the float form, q8_add_f32: the oracle's rounding) as a C initializer; with
    `first` (one of its operands) that operand is a."""
    a, as_, az, b, bs, bz, ys, yz = add.inputs[:8]
    if first is not None and first is b:
        a, as_, az, b, bs, bz = b, bs, bz, a, as_, az
    ys_f = _scalar(add, ys, "y_scale")
    za, zb, zy = to_u8_domain(az.const, a.dtype), to_u8_domain(bz.const, b.dtype), to_u8_domain(yz.const, add.outputs[0].dtype)
    lo, hi = act_clamp(add.attr("ec_act"), {}, ys_f, zy)
    fs = [flt(float(np.float32(v))) for v in (_scalar(add, as_, "a_scale"), _scalar(add, bs, "b_scale"), ys_f)]
    return f"{{{za}, {zb}, {zy}, {lo}, {hi}, {fs[0]}, {fs[1]}, {fs[2]}}}"


def _fused_add(node: Node) -> tuple[Node, Tensor, Tensor] | None:
    """(EcQAdd, the conv's own output as the Add saw it, the other operand) of a residual Add fused into
    this conv (codegen/fuse.py fuse_q8_adds), or None."""
    add = node.attr("ec_qadd")
    if add is None:
        return None
    r = node.epilogue.residual
    return add, (add.inputs[3] if add.inputs[0] is r else add.inputs[0]), r


def _pointwise(k, s, pads, ins, outs) -> bool:
    return k == [1, 1] and s == [1, 1] and pads == (0, 0) and ins == outs


def conv_route(node: Node, target) -> tuple[str, object]:
    """How QLinearConv `node` runs on `target`, as its emitter takes it: (route, the cost model's choice), route one
    of dw, gemv, spmm, gspc, conv1x1-add (the vpmaddubsw GEMM with the Add in its store), or q8_conv's gemm / cgemm /
    igemm (q8_conv_kernels). The int8 layout pass (codegen/q8layout.py) asks it which convs read and write the
    blocked layout."""
    x, w, wz, y = node.inputs[0], node.inputs[3], node.inputs[5], node.outputs[0]
    wq = _weights_s8(node, w, wz)
    k, s, d, (H, W), (Ho, Wo), (pt, pl) = _conv_geometry(node, x, y, wq)
    C, OC, g = x.shape[1], wq.shape[0], int(node.attr("group", 1))
    gv = _gspc_variant(target, OC // g, wq) if g > 1 else None  # the GSPC kernel these weights would get
    cg = cgemm_variant(gemm_variant(target, wq.reshape(OC, -1))[0], OC // g, C // g, k)
    choice = costmodel.choose_int8_conv(target, C, OC, g, k, Ho * Wo, gspc=_gspc_variant(target) is not None,
                                        gspc_kernel=gv[0] if gv else None, cgemm=cg is not None)
    pointwise = g == 1 and _pointwise(k, s, (pt, pl), (H, W), (Ho, Wo))
    if choice.algo == "q8-dwconv":
        return "dw", choice
    if g == 1 and k == [1, 1] and (H, W, Ho, Wo) == (1, 1, 1, 1) and _gemv_kernel(target) is not None:
        return "gemv", choice  # squeeze-excite convs
    if pointwise and _spmm_kernel(target) is not None:
        sp = costmodel.choose_int8_sparse(target, wq.reshape(OC, C), _sparse_mode())
        if sp.algo == "q8-spmm":
            return "spmm", sp
    if choice.algo == "q8-gspc":
        return "gspc", choice
    if _fused_add(node) and pointwise and gemm_variant(target, wq.reshape(OC, -1)) == Q8_GEMM_MADDUBS:
        return "conv1x1-add", choice
    kern = q8_conv_kernels(target, wq, g, k, s, d, Ho, Wo, choice)
    return ("cgemm" if kern[3] else "igemm" if kern[4] else "gemm"), choice


def q8_conv_kernels(target, wq, g, k, s, d, Ho, Wo, choice):
    """q8_conv's kernels for a layer: (GEMM, its file, reads X signed, channel-lane GEMM or None, implicit GEMM or
    None). kxk convs take the implicit path where the channels' padding to 4 adds at most 1/8 of the multiply-adds
    (3-channel stems: a third more; SqueezeNet's ran 0.17 -> 0.25 ms that way, ResNet-50's was a tie), the narrow
    maps too when the extra columns fit in the 16-pixel vectors' padding (7x7: 63 for 49, both 64)."""
    OC, cg = wq.shape[0], wq.shape[1]
    ocg = OC // g
    fn, src, signed = gemm_variant(target, wq.reshape(OC, -1))
    cgemm = cgemm_variant(fn, ocg, cg, k) if choice.algo == "q8-cgemm" else None
    ne = Ho * -(-((Wo - 1) * s[1] + (k[1] - 1) * d[1] + 1) // s[1])  # the extended rows' pixels
    implicit = (k[0] * k[1] > 1 and (Wo >= Q8_IGEMM_MIN_WO or -(-ne // 16) <= -(-(Ho * Wo) // 16))
                and 8 * 4 * ((cg + 3) // 4) <= 9 * cg)
    igemm = igemm_variant(fn, wq, g) if implicit and not cgemm else None
    return fn, src, signed, cgemm, igemm


C4_GEMMS = {"q8_gemm_8x32__avx512vnni"}  # pixel-lane GEMMs with a _c4 form; their channel-lane GEMMs have one too


def blocked_io(node: Node, target) -> tuple[bool, bool]:
    """Whether QLinearConv `node` reads its input / writes its output in the blocked int8 layout
    (q8_conv_params.io): one group; input: channels a multiple of 4, a 1x1 without padding (read in place, or the
    strided pick) or a kxk on the channel-lane GEMM (its padded copy from the blocked rows); output: channels a
    multiple of 4 through a GEMM with a _c4 form, not the implicit pixel-lane GEMM (whose rows are compacted)."""
    x, w, wz, y = node.inputs[0], node.inputs[3], node.inputs[5], node.outputs[0]
    if int(node.attr("group", 1)) != 1 or len(x.shape) != 4:
        return False, False
    wq = _weights_s8(node, w, wz)
    if gemm_variant(target, wq.reshape(wq.shape[0], -1))[0] not in C4_GEMMS:  # no _c4 GEMM on this target
        return False, False
    route, _ = conv_route(node, target)
    if route not in ("gemm", "cgemm"):
        return False, False
    k = _conv_geometry(node, x, y, wq)[0]
    pointwise_in = k == [1, 1] and not any(node.attr("pads", [0] * 4))  # 1x1 windows never leave the input
    reads = x.shape[1] % 4 == 0 and ((route == "cgemm" and k[0] * k[1] > 1) or pointwise_in)
    return reads, wq.shape[0] % 4 == 0


@register("QLinearConv", epilogue=True)  # the epilogue: a residual EcQAdd (attr ec_qadd), nothing else
def emit_qlinearconv(node: Node, ctx: EmitContext) -> str:
    x, xs, xz, w, ws, wz, ys, yz = node.inputs[:8]
    bias, y = node.input(8), node.outputs[0]
    wq = _weights_s8(node, w, wz)
    k, s, d, (H, W), (Ho, Wo), (pt, pl) = _conv_geometry(node, x, y, wq)
    N, C, OC, g = x.shape[0], x.shape[1], wq.shape[0], int(node.attr("group", 1))
    zx, zy = to_u8_domain(xz.const, x.dtype), to_u8_domain(yz.const, y.dtype)
    ys_f = _scalar(node, ys, "y_scale")
    scales = requant_scales(_scalar(node, xs, "x_scale"), ws.const, ys_f, OC)
    q = (zx, zy, *act_clamp(node.attr("ec_act"), {}, ys_f, zy))
    b = None if bias is None else bias.const.astype(np.int32)
    macs = N * OC * Ho * Wo * (C // g) * k[0] * k[1]
    geo = (k, s, d, pt, pl, Ho, Wo)
    route, choice = conv_route(node, ctx.target)
    if (x.block or y.block) and route not in ("gemm", "cgemm"):
        raise EdgecError(f"internal: {node.name} runs on {route}, which reads and writes NCHW only")
    fused = _fused_add(node)
    if route == "dw":
        return _emit_dw(node, ctx, wq, b, scales, (N, C, H, W), geo, q, macs, choice)
    if route == "gemv":
        code = _emit_gemv(node, ctx, wq.reshape(OC, C), b, scales, N, q, macs)
    elif route == "spmm":
        code = _emit_spmm(node, ctx, wq.reshape(OC, C), b, scales, (N, C, H * W), q, macs, choice)
    elif route == "gspc":
        gv = _gspc_variant(ctx.target, OC // g, wq)
        code = _emit_gspc(node, ctx, wq, b, scales, (N, C, H, W, OC, g), geo, q, macs, choice, gv)
    elif route == "conv1x1-add":
        return _emit_conv1x1_add(node, ctx, wq, b, scales, (N, C, H, W, OC), q, macs, choice, fused)
    else:
        code = _emit_gemm_conv(node, ctx, wq, b, scales, (N, C, H, W, OC, g), geo, q, macs, choice)
    lut = _fused_lut(node, ctx)  # a fused table: q8_conv applies it per task (its params), other drivers after
    Y = f"(uint8_t *){ctx.ptr(y)}"
    if lut:
        ctx.note(fused_lut=lut[1])
    if lut and route not in ("gemm", "cgemm", "igemm"):  # elementwise, over the stored bytes (a blocked tensor's too)
        ctx.require("q8-eltwise/q8-lut-pool.c")
        code = "{\n" + code + f"}}\nq8_lut_pool({y.nbytes}u, {Y}, {lut[0]}, {Y}, {lut[1]}, {ctx.pool});\n"
    if fused:  # a kernel without the Add in its store: the Add as its own pass, in place on the output
        add, mine, r = fused
        if r.block != y.block:
            raise EdgecError(f"internal: {node.name}'s residual {r.name} is stored unlike its output")
        ctx.require("q8-eltwise/q8-eltwise.h", "q8-eltwise/q8-eltwise-scalar.c", "q8-eltwise/q8-add-pool.c")
        ctx.note(residual_add="q8_add_f32")
        code = ("{\n" + code + f"}}\n{{\nconst q8_addf_params ap = {qaddf_params(add, mine)};\n"
                f"q8_add_f32_pool({y.nbytes}u, {Y}, (const uint8_t *){ctx.ptr(r)}, &ap, {Y}, {ctx.pool});\n}}\n")
    return code


def _emit_conv1x1_add(node: Node, ctx: EmitContext, wq, b, scales, dims, q, macs, choice, fused) -> str:
    """1x1 conv + residual Add in one pass: the Add runs in the maddubs GEMM's requantize-and-store
    (runtime_c/q8-gemm/q8-conv1x1-add.h), so the conv's output tensor and the separate Add pass go away."""
    N, C, H, W, OC = dims
    zx, zy, lo, hi = q
    add, mine, r = fused
    ctx.require("q8-conv/q8-conv.h", "q8-conv/q8-conv.c", "q8-gemm/q8-pack.c", Q8_GEMM_MADDUBS[1],
                "q8-gemm/q8-conv1x1-add.h", "q8-gemm/q8-conv1x1-add.c", "q8-eltwise/q8-eltwise.h")
    w2d = wq.reshape(OC, C)
    rows = row_params(w2d, b, zx, scales, False)
    wp = ctx.weight(f"{node.name}:wp", pack_w(w2d))
    bp, mp, sp = _rq_ptrs(ctx, node.name, rows)
    scr = ctx.scratch(ceil4(C) * ((H * W + 15) // 16 * 16) + C * H * W + 32)  # = q8_conv_scratch_bytes
    fn = Q8_GEMM_MADDUBS[0] + "_add"
    ctx.note(algo="q8-gemm", macs=macs, kernel=Q8_GEMM_MADDUBS[0], why=choice.why, residual_add=fn)
    shape = f"{{{C}, {H}, {W}, 1, 1, 1, 1, 1, 1, 0, 0, {H}, {W}}}"
    return (f"const q8_conv_params p = {{{shape}, {N}, 1, {OC}, {wp}, {bp}, {mp}, {sp}, {zy}, {lo}, {hi}, "
            f"{zx}, 0, {Q8_GEMM_MADDUBS[0]}, NULL, NULL, Q8_WLAYOUT_PACK, NULL, 0, NULL, NULL}};\n"
            f"const q8_add_params ap = {qadd_params(add, mine)};\n"
            f"q8_conv1x1_add(&p, {fn}, (const uint8_t *){ctx.ptr(node.inputs[0])}, (const uint8_t *){ctx.ptr(r)}, "
            f"&ap, (uint8_t *){ctx.ptr(node.outputs[0])}, (uint8_t *){scr}, {ctx.pool});\n")


def dw_quads(w: np.ndarray, zx: int) -> tuple[np.ndarray, np.ndarray]:
    """The VNNI depthwise kernel's weights (q8_dw_params.quad, .zrow; runtime_c/q8-dwconv/q8-dwconv.h), packed
    here once instead of per channel on every run: W[C][kh][kw] int8 -> quads [C][kh][ceil(kw/4)] int32 (taps
    4k..4k+3 of a row, tap 4k+t in byte t, zero past kw) and zx * each row's weight sum [C][kh] int32."""
    C, kh, kw = w.shape
    nq = (kw + 3) // 4
    padded = np.zeros((C, kh, 4 * nq), np.int8)
    padded[:, :, :kw] = w
    quad = np.ascontiguousarray(padded).view("<i4").reshape(C, kh, nq)
    zrow = w.astype(np.int32).sum(axis=2) * np.int32(zx)
    return quad.astype(np.int32), zrow.astype(np.int32)


DW_C16_MAX_BYTES = 65536  # Q8_DW_C16_MAX_BYTES in runtime_c/q8-dwconv/q8-dwconv.h


def dw_c16_bytes(H: int, W: int, k, s, d, pl: int, Wo: int) -> int | None:
    """q8_dw_c16_bytes: the channel-lane depthwise kernel's scratch, or None where it does not run
    (q8_dw_c16_ok without the fp32-scales condition)."""
    if d[1] != 1 or k[0] * k[1] > 64:
        return None
    wins = (Wo + 15) // 16 * 16 * s[1] + 4 * ((k[1] + 3) // 4 - 1)
    n = ((k[0] - 1) * d[0] + 1) * (wins + 4 + 16) * 64  # Q8_DW_C16_LEAD / _TAIL windows of slack per row
    return n if n <= DW_C16_MAX_BYTES else None


def dw_scratch_bytes(H: int, W: int, k, s, d, pl: int, Ho: int, Wo: int, scaled: bool) -> int:
    """q8_dwconv_scratch_bytes (runtime_c/q8-dwconv/q8-dwconv.h): one thread's slice; scaled = fp32 scales set."""
    rows = (Ho - 1) * s[0] + (k[0] - 1) * d[0] + 1
    flat_wp = Wo - 1 + (k[1] - 1) * d[1] + 1
    n = max(s[1] * rows * ((((Wo - 1) * s[1] + (k[1] - 1) * d[1] + 1) + s[1] - 1) // s[1] + 32),
            rows * flat_wp + 64 + (Ho - 1) * flat_wp + Wo)
    c16 = dw_c16_bytes(H, W, k, s, d, pl, Wo) if scaled else None
    return max(n, c16 or 0)


def _emit_dw(node: Node, ctx: EmitContext, wq, b, scales, dims, geo, q, macs, choice) -> str:
    """Depthwise: direct kernel over a zero-point padded, stride-phase-split copy of each channel, or on
    AVX-512 VNNI with 16 channels in the lanes where its buffers fit (q8-dwconv-c16-avx512vnni.c)."""
    N, C, H, W = dims
    k, s, d, pt, pl, Ho, Wo = geo
    zx, zy, lo, hi = q
    isa = _dw_isa(ctx.target)
    if isa == "avx2" and maddubs_kernels(ctx.target) and maddubs_exact(wq.reshape(C, -1)):
        isa = "avx2_maddubs"  # tap pairs cannot saturate vpmaddubsw's int16 sums (7-bit weights)
        if maddubs_exact(wq.reshape(C, -1)[:, 1:]):  # the odd pairs (t, t+1) too: output rows may share taps
            isa = "avx2_maddubs_shared"
    fn = f"q8_dwconv__{isa}"
    # 16 channels in the lanes, except for a half group or less over rows of 2+ pixel vectors: ppocr cls's 8-channel
    # 3x3 s2x1 layer (24x96) took 0.70x the channel-lane kernel's time on the pixel-lane one (24 channels: 1.01x;
    # Zen 4, PROFILE=1 builds alternating)
    if isa == "avx512vnni" and dw_c16_bytes(H, W, k, s, d, pl, Wo) is not None and not (C <= 8 and Wo >= 32):
        fn = "q8_dwconv_c16__avx512vnni"
    ctx.require("q8-dwconv/q8-dwconv.h", "q8-dwconv/q8-dwconv-scalar.c", "q8-dwconv/q8-dwconv-run.c",
                *DW_FILES.get(isa, ()))
    rows_ = row_params(wq.reshape(C, -1), b, zx, scales, False)
    wp = ctx.weight(f"{node.name}:w", np.ascontiguousarray(wq.reshape(C, -1)))
    bp, mp, sp = _rq_ptrs(ctx, node.name, rows_)
    shape = f"{N}, {C}, {H}, {W}, {k[0]}, {k[1]}, {s[0]}, {s[1]}, {d[0]}, {d[1]}, {pt}, {pl}, {Ho}, {Wo}"
    scaled = fn in FP32_RQ_KERNELS
    scr = ctx.scratch(dw_scratch_bytes(H, W, k, s, d, pl, Ho, Wo, scaled) * THREAD_SLICES)
    lut = _fused_lut(node, ctx)
    ctx.note(algo="q8-dwconv", macs=macs, kernel=fn, why=choice.why)
    if lut:
        ctx.note(fused_lut=lut[1])
    X, Y = f"(const uint8_t *){ctx.ptr(node.inputs[0])}", f"(uint8_t *){ctx.ptr(node.outputs[0])}"
    run = f"q8_dwconv_run_lut({fn}, &p, {lut[0]}, {lut[1]}, " if lut else f"q8_dwconv_run({fn}, &p, "
    packed = "NULL, NULL"
    if isa == "avx512vnni":
        quad, zrow = dw_quads(wq.reshape(C, k[0], k[1]), zx)
        packed = f"{ctx.weight(f'{node.name}:quad', quad)}, {ctx.weight(f'{node.name}:zrow', zrow)}"
    scp = _scale_ptr(ctx, node.name, fn, rows_.scale)
    return (f"const q8_dw_params p = {{{shape}, {wp}, {bp}, {mp}, {sp}, {zy}, {lo}, {hi}, {zx}, {packed}, {scp}}};\n"
            f"{run}{X}, {Y}, (uint8_t *){scr}, {ctx.pool});\n")


def _gemv_kernel(target) -> tuple[str, str] | None:
    if target.arch == "x86_64" and "avx512_vnni" in target.features:
        return Q8_GEMV["avx512vnni"]
    return Q8_GEMV["avx2"] if target.arch == "x86_64" and "avx2" in target.features else None


def _emit_gemv(node: Node, ctx: EmitContext, w2d, b, scales, batch: int, q, macs, rows: int = 1) -> str:
    """One-pixel conv / one-row GEMM as matrix-vector products (runtime_c/q8-gemm/q8-gemv.h): the packed
    GEMM's 16-pixel tiles would compute 15 padding columns."""
    zx, zy, lo, hi = q
    M, K = w2d.shape
    fn, src = _gemv_kernel(ctx.target)
    ctx.require("q8-gemm/q8-gemv.h", "q8-gemm/q8-gemv-scalar.c", src)
    r = row_params(w2d, b, zx, scales, False)
    wp = ctx.weight(f"{node.name}:wv", np.ascontiguousarray(w2d, np.int8))
    bp, mp, sp = _rq_ptrs(ctx, node.name, r)
    scp = _scale_ptr(ctx, node.name, fn, r.scale)
    ctx.note(algo="q8-gemv", macs=macs, kernel=fn)
    X, Y = f"(const uint8_t *){ctx.ptr(node.inputs[0])}", f"(uint8_t *){ctx.ptr(node.outputs[0])}"
    return (f"const q8_rq rq = {{{bp}, {mp}, {sp}, {zy}, {lo}, {hi}, {scp}}};\n"
            f"for (size_t b = 0; b < {batch * rows}u; b++)\n"
            f"    {fn}({M}u, {K}u, {wp}, {X} + b * {K}u, {Y} + b * {M}u, &rq);\n")


def _wlayout(fn: str) -> str:
    """The C weight-layout constant of GEMM fn's packed weights (q8-conv.h)."""
    return "Q8_WLAYOUT_AMX" if fn == Q8_GEMM["amx"][0] else "Q8_WLAYOUT_PACK"


def _emit_gemm_conv(node: Node, ctx: EmitContext, wq, b, scales, dims, geo, q, macs, choice) -> str:
    """Dense / grouped conv as one packed GEMM per group (im2col, or a plain interleave for 1x1)."""
    N, C, H, W, OC, g = dims
    k, s, d, pt, pl, Ho, Wo = geo
    zx, zy, lo, hi = q
    fn, src, signed, cgemm, igemm = q8_conv_kernels(ctx.target, wq, g, k, s, d, Ho, Wo, choice)
    ctx.require("q8-conv/q8-conv.h", "q8-conv/q8-conv.c", "q8-gemm/q8-pack.c", *gemm_files(fn, src))
    ocg, cg = OC // g, C // g
    wgs = [wq[j * ocg:(j + 1) * ocg].reshape(ocg, -1) for j in range(g)]
    brs = [row_params(wg, None if b is None else b[j * ocg:(j + 1) * ocg], zx, scales[j * ocg:(j + 1) * ocg], signed)
           for j, wg in enumerate(wgs)]
    K = cg * k[0] * k[1]
    hp, wp_ = (Ho - 1) * s[0] + (k[0] - 1) * d[0] + 1, (Wo - 1) * s[1] + (k[1] - 1) * d[1] + 1
    # the implicit copy (q8_conv_pad4_bytes) and its k4 offsets; mirrors q8_conv_scratch_bytes
    c4n, hq, wq_ = (cg + 3) // 4, -(-hp // s[0]), -(-wp_ // s[1])
    pad4 = c4n * s[0] * s[1] * hq * wq_ * 4 + 4 * (32 + k[1] * d[1]) + 64
    koffs = 4 * c4n * k[0] * k[1] + 64
    if cgemm:  # channel-lane GEMM: kxk over the padded copy (compact rows), 1x1 over packed input
        ctx.require(cgemm[1])
        if k[0] * k[1] > 1:
            wp = ctx.weight(f"{node.name}:wp", np.concatenate([pack_w_c32(implicit_matrix(wq[j * ocg:(j + 1) * ocg]))
                                                               for j in range(g)]))
            scr = ctx.scratch(pad4 + koffs)
        else:
            wp = ctx.weight(f"{node.name}:wp", np.concatenate([pack_w_c32(wg) for wg in wgs]))
            scr = ctx.scratch(ceil4(K) * ((Ho * Wo + 15) // 16 * 16) + cg * hp * wp_ + 32 + ceil4(K) + 4)
        ctx.note(algo="q8-cgemm", macs=macs, kernel=cgemm[0], why=choice.why)
    elif igemm:  # no im2col: the padded, phase-split copy read in place (q8-conv.h), extended rows compacted
        wp = ctx.weight(f"{node.name}:wp", np.concatenate([pack_w_implicit(wq[j * ocg:(j + 1) * ocg], fn)
                                                           for j in range(g)]))
        scr = ctx.scratch(pad4 + ocg * Ho * wq_ + koffs)
        ctx.note(algo="q8-gemm", macs=macs, kernel=igemm,
                 why=f"{choice.why}; implicit: no im2col, the padded input read in place ({wq_ - Wo} extra "
                     f"column{'s' if wq_ - Wo != 1 else ''} a row)")
    else:
        wp = ctx.weight(f"{node.name}:wp", np.concatenate([pack_w_for(fn, wg) for wg in wgs]))
        scr = ctx.scratch(ceil4(K) * ((Ho * Wo + 15) // 16 * 16) + cg * hp * wp_ + 32)  # packed + padded input
        ctx.note(algo="q8-gemm", macs=macs, kernel=fn, why=choice.why)
    bp, mp, sp = (ctx.weight(f"{node.name}:{f}", np.concatenate([getattr(r, f) for r in brs]))
                  for f in ("bias", "mult", "shift"))
    scp = _scale_ptr(ctx, node.name, cgemm[0] if cgemm else fn, np.concatenate([r.scale for r in brs]))
    shape = f"{{{cg}, {H}, {W}, {k[0]}, {k[1]}, {s[0]}, {s[1]}, {d[0]}, {d[1]}, {pt}, {pl}, {Ho}, {Wo}}}"
    wl = _wlayout(fn)
    # the blocked int8 layout (codegen/q8layout.py): flags for q8_conv, the GEMMs' _c4 forms for a blocked output
    x, y = node.inputs[0], node.outputs[0]
    reads, writes = blocked_io(node, ctx.target) if x.block or y.block else (False, False)
    if (x.block and not reads) or (y.block and not writes):
        raise EdgecError(f"internal: {node.name} cannot read or write the blocked int8 layout")
    io = ("Q8_X_C4" if x.block else "") + (" | " if x.block and y.block else "") + ("Q8_Y_C4" if y.block else "")
    c4 = "_c4" if y.block else ""
    if x.block or y.block:
        ctx.note(layout=f"{x.layout} -> {y.layout}")
    cg_fn = cgemm[0] + c4 if cgemm else "NULL"
    lut = _fused_lut(node, ctx)  # applied by q8_conv's tasks as they store
    lut_args = f", {lut[0]}, {lut[1]}" if lut else ", NULL, NULL"
    return (f"const q8_conv_params p = {{{shape}, {N}, {g}, {ocg}, {wp}, {bp}, {mp}, {sp}, {zy}, {lo}, {hi}, "
            f"{zx}, {0x80 if signed else 0}, {fn + c4}, {scp}, {igemm or 'NULL'}, {wl}, {cg_fn}, {io or 0}"
            f"{lut_args}}};\n"
            f"q8_conv(&p, (const uint8_t *){ctx.ptr(node.inputs[0])}, (uint8_t *){ctx.ptr(node.outputs[0])}, "
            f"(uint8_t *){scr}, {ctx.pool});\n")


GSPC = {  # (C function, file, T_O, T_I)
    "vnni": ("q8_gspc_o16__avx512vnni", "q8-gspc/q8-gspc-o16-avx512vnni.c", 16, 4),
    "vnni-o8": ("q8_gspc_o8__avx512vnni", "q8-gspc/q8-gspc-o16-avx512vnni.c", 8, 4),
    "avx2": ("q8_gspc_o8__avx2", "q8-gspc/q8-gspc-o8-avx2.c", 8, 2),
    "avx2-maddubs": ("q8_gspc_o8__avx2_maddubs", "q8-gspc/q8-gspc-o8-avx2-maddubs.c", 8, 4),
    "avxvnni": ("q8_gspc_o8__avxvnni", "q8-gspc/q8-gspc-o8-avxvnni.c", 8, 4),
    "neon": ("q8_gspc_o8__neon", "q8-gspc/q8-gspc-o8-neon.c", 8, 1),
}


def gspc_maddubs_exact(wq: np.ndarray) -> bool:
    """Whether vpmaddubsw's pair sums stay exact for int8 weights [OC][C/g][kh][kw] in the GSPC order, where a
    pair is input channels (4c, 4c+1) or (4c+2, 4c+3) of one tap (channels padded with zeros to 4)."""
    oc, cpg = wq.shape[:2]
    w = np.pad(wq.reshape(oc, cpg, -1), ((0, 0), (0, -cpg % 4), (0, 0)))
    return maddubs_exact(w.reshape(oc, -1, 4, w.shape[2]).transpose(0, 1, 3, 2).reshape(oc, -1))


def _gspc_variant(target, kpg: int = 16, wq: np.ndarray | None = None):
    """The target's int8 GSPC kernel; wq (the layer's weights) allows the vpmaddubsw one where it is exact."""
    if target.arch == "x86_64" and "avx512_vnni" in target.features:
        return GSPC["vnni-o8" if kpg <= 8 else "vnni"]  # <= 8 channels per group: ymm, no idle lanes
    if avx_vnni(target):
        return GSPC["avxvnni"]  # the maddubs kernel's tiling, exact on any weights
    if target.arch == "x86_64" and "avx2" in target.features:
        if wq is not None and maddubs_kernels(target) and gspc_maddubs_exact(wq):
            return GSPC["avx2-maddubs"]
        return GSPC["avx2"]
    return GSPC["neon"] if target.arch == "aarch64" else None


def pack_gspc(wq: np.ndarray, g: int, t_o: int = 16, t_i: int = 4) -> np.ndarray:
    """int8 [OC][C/g][kh][kw] -> per group [ceil(K_PG/T_O)][ceil(C_PG/T_I)][kh][kw][T_O][T_I] (q8-gspc.h)."""
    oc, cpg, kh, kw = wq.shape
    kpg = oc // g
    kp, cp = -(-kpg // t_o) * t_o, -(-cpg // t_i) * t_i
    z = np.zeros((g, kp, cp, kh, kw), np.int8)
    z[:, :kpg, :cpg] = wq.reshape(g, kpg, cpg, kh, kw)
    z = z.reshape(g, kp // t_o, t_o, cp // t_i, t_i, kh, kw).transpose(0, 1, 3, 5, 6, 2, 4)
    return np.ascontiguousarray(z).ravel()


def _sparse_mode() -> str | None:
    from edgec.codegen.ops.sparse import _mode
    mode = _mode()
    return None if mode == "auto" else mode


def _spmm_kernel(target):
    if target.arch == "x86_64" and "avx2" in target.features:
        return "q8_spmm_4x1__avx2", "q8-spmm/q8-spmm-4x1-avx2.c"
    if target.arch == "aarch64":
        return "q8_spmm_4x1__neon", "q8-spmm/q8-spmm-4x1-neon.c"
    return None


def _emit_spmm(node: Node, ctx: EmitContext, w2d, b, scales, dims, q, macs, choice) -> str:
    """int8 1x1 conv with 4x1-block sparse weights (runtime_c/q8-spmm)."""
    from edgec.codegen.ops.sparse import to_bsr
    N, C, px = dims
    zx, zy, lo, hi = q
    M = w2d.shape[0]
    r = row_params(w2d, b, zx, scales, False)
    row_ptr, col, val = to_bsr(w2d.astype(np.float32), 4, 1)
    fn, src = _spmm_kernel(ctx.target)
    ctx.require("q8-spmm/q8-spmm.h", "q8-spmm/q8-spmm-scalar.c", src)
    rp, cp = ctx.weight(f"{node.name}:rp", row_ptr), ctx.weight(f"{node.name}:col", col)
    vp = ctx.weight(f"{node.name}:val", val.astype(np.int8))
    bp, mp, sp = _rq_ptrs(ctx, node.name, r)
    nnz = int(np.count_nonzero(w2d))
    ctx.note(algo="q8-spmm-4x1", macs=N * nnz * px, kernel=fn, why=choice.why, density=round(nnz / w2d.size, 3))
    X, Y = f"(const uint8_t *){ctx.ptr(node.inputs[0])}", f"(uint8_t *){ctx.ptr(node.outputs[0])}"
    return (f"const q8_bsr w = {{4, 1, {rp}, {cp}, {vp}}};\n"
            f"const q8_rq rq = {{{bp}, {mp}, {sp}, {zy}, {lo}, {hi}, NULL}};\n"
            f"for (int b = 0; b < {N}; b++)\n"
            f"    {fn}({M}u, {px}u, &w, {X} + (size_t)b * {C * px}, {px}u, {Y} + (size_t)b * {M * px}, {px}u, &rq);\n")


def _emit_gspc(node: Node, ctx: EmitContext, wq, b, scales, dims, geo, q, macs, choice, variant) -> str:
    N, C, H, W, OC, g = dims
    k, s, d, pt, pl, Ho, Wo = geo
    zx, zy, lo, hi = q
    kpg, cpg = OC // g, C // g
    fn, src, t_o, t_i = variant or _gspc_variant(ctx.target, kpg, wq)  # None: a 1-group layer (a forced record)
    kp = -(-kpg // t_o) * t_o
    bias, mult, shift = (np.zeros(g * kp, np.int32) for _ in range(3))
    mult[:], shift[:] = 1 << 30, 40  # padded lanes: defined, never stored
    scale = np.ones(g * kp, np.float32)
    for j in range(g):
        r = row_params(wq[j * kpg:(j + 1) * kpg].reshape(kpg, -1), None if b is None else b[j * kpg:(j + 1) * kpg],
                       zx, scales[j * kpg:(j + 1) * kpg], False)
        bias[j * kp:j * kp + kpg], mult[j * kp:j * kp + kpg], shift[j * kp:j * kp + kpg] = \
            r.bias[:kpg], r.mult[:kpg], r.shift[:kpg]
        scale[j * kp:j * kp + kpg] = r.scale[:kpg]
    wp = ctx.weight(f"{node.name}:gspc", pack_gspc(wq, g, t_o, t_i))
    bp, mp, sp = (ctx.weight(f"{node.name}:{n}", a) for n, a in (("bias", bias), ("mult", mult), ("shift", shift)))
    hp, wpx = (Ho - 1) * s[0] + (k[0] - 1) * d[0] + 1, (Wo - 1) * s[1] + (k[1] - 1) * d[1] + 1
    slice_ = -(-cpg // 4) * hp * wpx * 4 + 32 * s[1] + 64  # q8_gspc_scratch_bytes
    scr = ctx.scratch(THREAD_SLICES * slice_ * (2 if fn == GSPC["avx2"][0] else 1))  # x2: packed as int16
    ctx.require("q8-gspc/q8-gspc.h", "q8-gspc/q8-gspc-scalar.c", src)
    ctx.note(algo="q8-gspc", macs=macs, kernel=fn, why=choice.why)
    shape = ", ".join(str(v) for v in (N, g, cpg, kpg, H, W, k[0], k[1], s[0], s[1], d[0], d[1], pt, pl, Ho, Wo))
    scp = _scale_ptr(ctx, node.name, fn, scale)
    return (f"const q8_gspc_params p = {{{shape}, {wp}, {bp}, {mp}, {sp}, {zy}, {lo}, {hi}, {zx}, {scp}}};\n"
            f"{fn}(&p, (const uint8_t *){ctx.ptr(node.inputs[0])}, (uint8_t *){ctx.ptr(node.outputs[0])}, "
            f"(uint8_t *){scr}, {ctx.pool});\n")


def _emit_matmul(node: Node, ctx: EmitContext, a, as_, az, bmat: np.ndarray, bs, ys, yz, bias) -> str:
    """Y[rows][N] = A[rows][K] x B[K][N] with B constant int8 (per-column or per-tensor scales)."""
    y = node.outputs[0]
    K, Nn = bmat.shape
    if a.shape[-1] != K:
        raise EdgecError(f"node {node.name} ({node.op}): inner dimensions differ ({a.shape[-1]} vs {K})")
    rows = a.size // K
    zx, zy = to_u8_domain(az.const, a.dtype), to_u8_domain(yz.const, y.dtype)
    ys_f = _scalar(node, ys, "y_scale")
    scales = requant_scales(_scalar(node, as_, "a_scale"), bs.const, ys_f, Nn)
    lo, hi = act_clamp(node.attr("ec_act"), {}, ys_f, zy)
    wt = np.ascontiguousarray(bmat.T)
    fn, src, signed = gemm_variant(ctx.target, wt)
    ctx.require("q8-conv/q8-conv.h", "q8-conv/q8-conv.c", "q8-gemm/q8-pack.c", *gemm_files(fn, src))
    r = row_params(wt, bias, zx, scales, signed)
    wp = ctx.weight(f"{node.name}:wp", pack_w_for(fn, wt))
    bp, mp, sp = _rq_ptrs(ctx, node.name, r)
    scp = _scale_ptr(ctx, node.name, fn, r.scale)
    scr = ctx.scratch(ceil4(K) * ((rows + 15) // 16 * 16) + rows * ceil4(Nn))
    ctx.note(algo="q8-gemm", macs=rows * K * Nn, kernel=fn)
    return (f"const q8_rq rq = {{{bp}, {mp}, {sp}, {zy}, {lo}, {hi}, {scp}}};\n"
            f"q8_matmul({rows}u, {Nn}u, {K}u, (const uint8_t *){ctx.ptr(a)}, {wp}, &rq, {0x80 if signed else 0}, "
            f"{fn}, {_wlayout(fn)}, (uint8_t *){ctx.ptr(y)}, "
            f"(uint8_t *){scr}, {ctx.pool});\n")


@register("QLinearMatMul")
def emit_qlinearmatmul(node: Node, ctx: EmitContext) -> str:
    a, as_, az, b, bs, bz, ys, yz = node.inputs[:8]
    if b is None or not b.is_const or b.const.ndim != 2:
        raise EdgecError(f"node {node.name} (QLinearMatMul): the second input must be a constant 2-D matrix")
    return _emit_matmul(node, ctx, a, as_, az, _weights_s8(node, b, bz), bs, ys, yz, None)


@register("EcQGemm")
def emit_qgemm(node: Node, ctx: EmitContext) -> str:
    a, as_, az, b, bs, bz, ys, yz = node.inputs[:8]
    c = node.input(8)
    w = _weights_s8(node, b, bz)
    w = w.T if int(node.attr("transB", 0)) else w
    if len(a.shape) != 2:
        raise EdgecError(f"node {node.name} (Gemm): input must be 2-D")
    bias = None if c is None else np.broadcast_to(c.const.astype(np.int32).reshape(-1), (w.shape[1],))
    return _emit_matmul(node, ctx, a, as_, az, np.ascontiguousarray(w), bs, ys, yz, bias)
