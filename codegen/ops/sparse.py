"""Sparse Conv (groups = 1) and one-row Gemm/MatMul: CSR / BSR weights x dense activations over
runtime_c/f32-spmm.

Registered above the dense Conv emitter; per layer the cost model (codegen/costmodel.py, measured
break-even sparsity per ISA and block) decides. 1x1 stride-1 convs read the NCHW input directly;
other kernel sizes go through an im2col buffer (the GEMM form). Everything else is handed to the
dense emitter unchanged. Override for every layer with EDGEC_SPARSE=dense|auto|sparse-<block>
(block 1x1, 1x4, 4x1, 4x4), or per layer through the tuning database.
"""

from __future__ import annotations


import numpy as np

from edgec.codegen import costmodel, options
from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node
from edgec.codegen.ops import conv as dense
from edgec.codegen.ops import gemm as dense_gemm
from edgec.codegen.registry import register

MODES = options.SPARSE_MODES
SIMD = {  # isa family -> blocks whose SIMD kernel is used (AVX-512 4x4 measured slower than AVX2's)
    "avx512": {"1x1"}, "avx2": {"1x1", "1x4", "4x1", "4x4"}, "neon": {"1x1", "1x4", "4x1", "4x4"}}


def to_bsr(w2d: np.ndarray, br: int, bc: int):
    """[M][K] -> (row_ptr, col, val) keeping blocks with any nonzero; rows padded to br."""
    m, k = w2d.shape
    mp = -(-m // br) * br
    wp = np.zeros((mp, k), np.float32)
    wp[:m] = w2d
    blocks = wp.reshape(mp // br, br, k // bc, bc).transpose(0, 2, 1, 3)  # [rb][cb][br][bc]
    keep = np.any(blocks != 0, axis=(2, 3))
    row_ptr = np.concatenate([[0], np.cumsum(keep.sum(axis=1))]).astype(np.int32)
    rb, cb = np.nonzero(keep)
    col = (cb * bc).astype(np.int32)
    val = np.ascontiguousarray(blocks[rb, cb]).astype(np.float32).reshape(-1)
    return row_ptr, col, (val if val.size else np.zeros(1, np.float32))


def _mode() -> str:
    return options.active().sparse


def kernel_for(target, block: str) -> tuple[str, str]:
    """(C function, runtime file) of the sparse kernel for a target and block: the widest SIMD
    family that has this block (AVX-512 targets also run the AVX2 ones), else the portable one."""
    fam = "neon" if target.arch in ("aarch64", "armv7") and "neon" in target.features else \
        costmodel._isa_family(target)
    for f in {"avx512": ("avx512", "avx2")}.get(fam, (fam,)):
        if block in SIMD.get(f, ()):
            return f"f32_spmm_{block}__{f}", f"f32-spmm/f32-spmm-{block}-{f}.c"
    return "f32_spmm__scalar", "f32-spmm/f32-spmm-scalar.c"


@register("Conv", epilogue=True, priority=1)
def emit_conv(node: Node, ctx: EmitContext) -> str:
    w = node.input(1)
    if w is None or not w.is_const or int(node.attr("group", 1)) != 1 or w.dtype != np.float32 \
            or _mode() == "dense" or node.outputs[0].block:  # blocked (codegen/layout.py): no sparse kernel
        return _dense(node, ctx)
    mode = _mode()
    g = dense.geometry(node)
    w2d = w.const.reshape(g["K"], -1).astype(np.float32, copy=False)
    px = g["Ho"] * g["Wo"]
    choice = costmodel.choose_sparse(ctx.target, w2d, px, None if mode == "auto" else mode)
    if choice.algo == "dense":
        return _dense(node, ctx, choice.why)
    block = choice.algo.split("-", 1)[1]
    br, bc = (int(v) for v in block.split("x"))
    if w2d.shape[1] % bc:
        br, bc, block = 1, 1, "1x1"  # K not a multiple of the block width: CSR
    return _emit_sparse(node, ctx, g, w2d, br, bc, block, choice)


def _dense(node: Node, ctx: EmitContext, sparse_why: str | None = None) -> str:
    out = dense.emit(node, ctx)
    x = node.inputs[0]
    why = ctx.layer.details.get("why") or costmodel.describe_dense_conv(ctx.layer.algo, int(node.attr("group", 1)),
                                                                        x.shape[1])
    if ctx.layer.details.get("winograd"):  # 3x3 stride 1 kept direct: say why
        why = f"{why}; {ctx.layer.details['winograd']}"
    ctx.note(why=why + (f"; {sparse_why}" if sparse_why else ""))
    return out


def _emit_sparse(node: Node, ctx: EmitContext, g: dict, w2d: np.ndarray, br: int, bc: int, block: str,
                 choice) -> str:
    row_ptr, col, val = to_bsr(w2d, br, bc)
    fn, src = kernel_for(ctx.target, block)
    ctx.require("f32-spmm/f32-spmm.h", "f32-spmm/f32-spmm-scalar.c", "f32-spmm/f32-spmm-im2col.c", src)
    key = f"{node.name}:bsr{block}"
    rp, cp, vp = (ctx.weight(f"{key}:{n}", a) for n, a in (("rp", row_ptr), ("col", col), ("val", val)))
    M, K, px = g["K"], w2d.shape[1], g["Ho"] * g["Wo"]
    nnz = int(np.count_nonzero(w2d))
    ctx.note(algo=f"spmm-{block}", macs=g["N"] * nnz * px, kernel=fn, why=choice.why,
             density=round(nnz / w2d.size, 3))
    x, y = ctx.ptr(node.inputs[0]), ctx.ptr(node.outputs[0])
    bias = node.input(2)
    fields = dense.epilogue_fields(node, ctx, ctx.ptr(bias) if bias is not None else "NULL")
    pointwise = g["KH"] == g["KW"] == g["SH"] == g["SW"] == 1 and g["PT"] == g["PL"] == 0 and \
        (g["Ho"], g["Wo"]) == (g["H"], g["W"])
    lines = [f"const f32_bsr w = {{{br}, {bc}, {rp}, {cp}, {vp}}};",
             f"ec_epilogue ep = {{{fields}}};",
             "const float *res0 = ep.residual;"]
    if pointwise:
        src_x = f"{x} + (size_t)b * {g['C'] * px}"
    else:
        buf = ctx.scratch(K * px * 4)
        lines.append(f"float *col = (float *){buf};")
        src_x = "col"
    lines.append(f"for (int b = 0; b < {g['N']}; b++) {{")
    if not pointwise:
        shape = ", ".join(str(g[k]) for k in "C H W KH KW SH SW DH DW PT PL Ho Wo".split())
        lines.append(f"    static const int geo[13] = {{{shape}}};")
        lines.append(f"    f32_spmm_im2col(geo, {x} + (size_t)b * {g['C'] * g['H'] * g['W']}, col);")
    lines.append(f"    ep.residual = res0 ? res0 + (size_t)b * {M * px} : NULL;")
    lines.append(f"    {fn}({M}u, {px}u, &w, {src_x}, {px}u, {y} + (size_t)b * {M * px}, {px}u, &ep);")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _gemv_weights(node: Node):
    """[N][K] weight matrix of a one-row Gemm / MatMul with constant fp32 weights, else None."""
    a, b = node.inputs[0], node.input(1)
    if b is None or not b.is_const or b.dtype != np.float32 or a.dtype != np.float32 or b.const.ndim != 2:
        return None
    if node.op == "Gemm":
        if node.attr("transA", 0) or float(node.attr("alpha", 1.0)) != 1.0 or float(node.attr("beta", 1.0)) != 1.0:
            return None
        c = node.input(2)
        n = b.shape[0] if node.attr("transB", 0) else b.shape[1]
        if c is not None and (not c.is_const or c.size != n):
            return None
        w = b.const if node.attr("transB", 0) else b.const.T
    else:
        w = b.const.T
    rows = int(np.prod(a.shape[:-1])) if len(a.shape) > 1 else 1
    return np.ascontiguousarray(w, np.float32) if rows == 1 and a.shape[-1] == w.shape[1] else None


def _emit_gemv(node: Node, ctx: EmitContext, dense_emit) -> str:
    """One-row Gemm/MatMul (fully connected layer at batch 1): sparse GEMV when it pays off."""
    w2d = _gemv_weights(node) if _mode() != "dense" else None
    if w2d is None:
        return dense_emit(node, ctx)
    mode = _mode()
    choice = costmodel.choose_sparse(ctx.target, w2d, 1, None if mode == "auto" else mode)
    if choice.algo == "dense":
        out = dense_emit(node, ctx)
        ctx.note(why=f"dense GEMV; {choice.why}")
        return out
    block = choice.algo.split("-", 1)[1]
    br, bc = (int(v) for v in block.split("x"))
    if w2d.shape[1] % bc:
        br, bc, block = 1, 1, "1x1"
    row_ptr, col, val = to_bsr(w2d, br, bc)
    ctx.require("f32-spmm/f32-spmm.h", "f32-spmm/f32-spmm-scalar.c")
    rp, cp, vp = (ctx.weight(f"{node.name}:gemv{block}:{n}", a) for n, a in (("rp", row_ptr), ("col", col), ("val", val)))
    c = node.input(2) if node.op == "Gemm" else None
    bias = ctx.weight(f"{node.name}:gemv-bias", np.ascontiguousarray(c.const.reshape(-1), np.float32)) \
        if c is not None else "NULL"
    nnz = int(np.count_nonzero(w2d))
    # one pixel: the vector kernels would run 1 of their lanes; the portable kernel is the right one
    ctx.note(algo=f"spmv-{block}", macs=nnz, kernel="f32_spmm__scalar", why=choice.why,
             density=round(nnz / w2d.size, 3))
    return (f"const f32_bsr w = {{{br}, {bc}, {rp}, {cp}, {vp}}};\n"
            f"const ec_epilogue ep = {{{dense.epilogue_fields(node, ctx, bias)}}};\n"
            f"f32_spmm__scalar({w2d.shape[0]}u, 1u, &w, {ctx.ptr(node.inputs[0])}, 1u, {ctx.ptr(node.outputs[0])}, "
            f"1u, &ep);\n")


@register("Gemm", epilogue=True, priority=1)
def emit_gemm(node: Node, ctx: EmitContext) -> str:
    return _emit_gemv(node, ctx, dense_gemm.emit_gemm)


@register("MatMul", epilogue=True, priority=1)
def emit_matmul(node: Node, ctx: EmitContext) -> str:
    return _emit_gemv(node, ctx, dense_gemm.emit_matmul)
