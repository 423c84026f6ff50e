"""Gemm (transA/transB/alpha/beta/C) and MatMul (batched, numpy broadcasting) over float32,
via the packed GEMM driver in runtime_c/f32-gemm/f32-gemm.h.

A constant operand is packed here, alpha folded in; a run-time operand is packed by the
driver into scratch. Gemm's C becomes a per-column / per-row bias or a full-matrix residual;
the fused activation / residual run in the microkernel's store loop.
"""

from __future__ import annotations

import numpy as np

from edgec.codegen import kernels
from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Epilogue, Node, Tensor
from edgec.codegen.ops._util import flt
from edgec.codegen.ops.conv import act_literal, k_block, scale_kc, scale_nc
from edgec.codegen.registry import register
from edgec.errors import EdgecError


def pack_a(a: np.ndarray, mr: int) -> np.ndarray:
    """[.., M, K] -> [.., ceil(M/MR)][K][MR]."""
    *bt, m, k = a.shape
    mp = -(-m // mr) * mr
    out = np.zeros((*bt, mp, k), np.float32)
    out[..., :m, :] = a
    return np.ascontiguousarray(out.reshape(*bt, mp // mr, mr, k).swapaxes(-1, -2))


def pack_b(b: np.ndarray, nr: int) -> np.ndarray:
    """[.., K, N] -> [.., ceil(N/NR)][K][NR]."""
    *bt, k, n = b.shape
    np_ = -(-n // nr) * nr
    out = np.zeros((*bt, k, np_), np.float32)
    out[..., :n] = b
    return np.ascontiguousarray(out.reshape(*bt, k, np_ // nr, nr).swapaxes(-2, -3))


def _check_f32(node: Node):
    for t in [*node.inputs, *node.outputs]:
        if t is not None and t.dtype != np.float32:
            raise EdgecError(f"node {node.name} ({node.op}): only float32 is supported here, got {t.dtype.name}")


def _emit(node: Node, ctx: EmitContext, a: Tensor, b: Tensor, *, M: int, N: int, K: int, trans_a: bool,
          trans_b: bool, alpha: float, batch: int = 1, ab: int = 1, bb: int = 1, a_idx=None, b_idx=None,
          bias_r="NULL", bias_c="NULL", res: str | None = None, epilogue: Epilogue | None = None) -> str:
    k = kernels.gemm_kernel(ctx.target)
    mr, nr = k.params["mr"], k.params["nr"]
    a_rs, a_cs = (1, M) if trans_a else (K, 1)
    b_rs, b_cs = (1, K) if trans_b else (N, 1)
    b_packed = b.is_const  # the constant side is packed offline
    a_packed = a.is_const and not b.is_const
    if alpha != 1.0 and not (a_packed or b_packed):
        raise EdgecError(f"node {node.name} ({node.op}): alpha != 1 needs a constant A or B")
    if b_packed:
        bm = b.const.reshape(bb, *((N, K) if trans_b else (K, N)))
        bm = np.swapaxes(bm, -1, -2) if trans_b else bm
        b_expr = ctx.weight(f"gemm-b-{nr}:{node.name}", pack_b(bm.astype(np.float32) * np.float32(alpha), nr))
    else:
        b_expr = ctx.ptr(b)
    if a_packed:
        am = a.const.reshape(ab, *((K, M) if trans_a else (M, K)))
        am = np.swapaxes(am, -1, -2) if trans_a else am
        a_expr = ctx.weight(f"gemm-a-{mr}:{node.name}", pack_a(am.astype(np.float32) * np.float32(alpha), mr))
    else:
        a_expr = ctx.ptr(a)
    kc = scale_kc(k_block(ctx.target, K, nr), K)  # EDGEC_BLK scales both (Gemm/MatMul have no tuning records)
    nch = scale_nc(max(nr, min(-(-N // nr) * nr, (ctx.target.l2_bytes // 4) // (4 * K) // nr * nr)), N, nr)
    idx = [ctx.weight(f"gemm-{s}idx:{node.name}", i.astype(np.uint32)) if i is not None else "NULL"
           for s, i in (("a", a_idx), ("b", b_idx))]
    shape = dict(M=M, N=N, K=K, MR=mr, NR=nr, KC=kc, BATCH=batch, A_BATCHES=ab, B_BATCHES=bb)
    sh = f"{', '.join(f'{v}u' for v in shape.values())}, {int(a_packed)}, {int(b_packed)}, " \
         f"{a_rs}u, {a_cs}u, {b_rs}u, {b_cs}u, {nch}u, {k.name}"
    s = ctx.scratch(4 * ((0 if a_packed else ab * -(-M // mr) * mr * K) + (0 if b_packed else bb * -(-N // nr) * nr * K)))
    ep = node.epilogue if epilogue is None else epilogue
    if ep.residual is not None and res is not None:
        raise EdgecError(f"node {node.name} ({node.op}): a full-matrix C and a fused residual together")
    res_expr = res or (ctx.ptr(ep.residual) if ep.residual is not None else "NULL")
    before = int(ep.residual_before_act if ep.residual is not None else 1)
    ctx.require(k.file, "f32-gemm/f32-gemm.h")
    ctx.note(algo=f"gemm-{k.tile}-{k.isa}", macs=batch * M * N * K, kernel=k.name, kc=kc, nc=nch)
    return (f"static const f32_gemm_shape S = {{{sh}}};\n"
            f"const f32_gemm_args A = {{{a_expr}, {b_expr}, {ctx.ptr(node.outputs[0])}, {idx[0]}, {idx[1]}, "
            f"{{{bias_r}, {bias_c}, {res_expr}, {before}, {act_literal(ep.act, ep.act_params)}}}, (float *){s}}};\n"
            f"f32_gemm_run(&S, &A, {ctx.pool});\n")


def _gemm_c(node: Node, ctx: EmitContext, c: Tensor | None, beta: float, M: int, N: int) -> dict:
    """Gemm's C as bias_c (per column), bias_r (per row) or res (full matrix)."""
    if c is None or beta == 0.0:
        return {}
    shp = (1,) * (2 - len(c.shape)) + tuple(c.shape)
    if c.is_const:
        v = np.broadcast_to(c.const.reshape(shp).astype(np.float32) * np.float32(beta), (M, N))
        if shp[0] == 1:
            return {"bias_c": ctx.weight(f"gemm-c:{node.name}", np.ascontiguousarray(v[0]))}
        if shp[1] == 1:
            return {"bias_r": ctx.weight(f"gemm-c:{node.name}", np.ascontiguousarray(v[:, 0]))}
        return {"res": ctx.weight(f"gemm-c:{node.name}", np.ascontiguousarray(v))}
    if beta != 1.0:
        raise EdgecError(f"node {node.name} (Gemm): beta != 1 with a run-time C is not supported")
    if shp == (1, N):
        return {"bias_c": ctx.ptr(c)}
    if shp == (M, 1):
        return {"bias_r": ctx.ptr(c)}
    if shp == (M, N):
        return {"res": ctx.ptr(c)}
    raise EdgecError(f"node {node.name} (Gemm): C of shape {c.shape} is not supported")


def _c_fits(c: Tensor | None, beta: float, M: int, N: int) -> bool:
    """Whether C can ride in the GEMM's store loop (a constant, or a run-time bias/matrix with beta 1)."""
    if c is None or beta == 0.0 or c.is_const:
        return True
    shp = (1,) * (2 - len(c.shape)) + tuple(c.shape)
    return beta == 1.0 and shp in ((1, N), (M, 1), (M, N))


def _emit_general(node: Node, ctx: EmitContext, a: Tensor, b: Tensor, c: Tensor | None, *, M: int, N: int,
                  K: int, ta: bool, tb: bool, alpha: float, beta: float) -> str:
    """Y = alpha*A*B + beta*C for run-time operands: a plain GEMM, then one pass that scales, adds the
    broadcast C and applies the fused epilogue (rare in exported models; the fused path is the fast one)."""
    code = _emit(node, ctx, a, b, M=M, N=N, K=K, trans_a=ta, trans_b=tb, alpha=1.0, epilogue=Epilogue())
    ep = node.epilogue
    c_term, use_c = "0.0f", c is not None and beta != 0.0
    if use_c:
        c0, c1 = (1,) * (2 - len(c.shape)) + tuple(c.shape)
        cptr = ctx.ptr(c) if not c.is_const else ctx.weight(f"gemm-craw:{node.name}", c.const.astype(np.float32))
        c_term = f"{flt(beta)} * ((const float *){cptr})[{'m' if c0 > 1 else '0'} * {c1}u + {'n' if c1 > 1 else '0'}]"
    res = f"({ctx.ptr(ep.residual)}) + m * {N}u + n" if ep.residual is not None else "NULL"
    return code + (
        f"{{ float *y = {ctx.ptr(node.outputs[0])};\n"
        f"  for (size_t m = 0; m < {M}u; m++) for (size_t n = 0; n < {N}u; n++)\n"
        f"    y[m * {N}u + n] = ec_epi_value({flt(alpha)} * y[m * {N}u + n] + {c_term}, {res}, "
        f"{int(ep.residual_before_act)}, (ec_act){act_literal(ep.act, ep.act_params)}); }}\n")


@register("Gemm", epilogue=True)
def emit_gemm(node: Node, ctx: EmitContext) -> str:
    _check_f32(node)
    a, b, c = node.inputs[0], node.inputs[1], node.input(2)
    ta, tb = bool(node.attr("transA", 0)), bool(node.attr("transB", 0))
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    M, K = (a.shape[1], a.shape[0]) if ta else a.shape
    N = b.shape[0] if tb else b.shape[1]
    if (alpha != 1.0 and not (a.is_const or b.is_const)) or not _c_fits(c, beta, M, N):
        return _emit_general(node, ctx, a, b, c, M=M, N=N, K=K, ta=ta, tb=tb, alpha=alpha, beta=beta)
    cx = _gemm_c(node, ctx, c, beta, M, N)
    return _emit(node, ctx, a, b, M=M, N=N, K=K, trans_a=ta, trans_b=tb, alpha=alpha, **cx)


@register("MatMul", epilogue=True)
def emit_matmul(node: Node, ctx: EmitContext) -> str:
    _check_f32(node)
    a, b = node.inputs
    sa = (1,) + tuple(a.shape) if len(a.shape) == 1 else tuple(a.shape)
    sb = tuple(b.shape) + (1,) if len(b.shape) == 1 else tuple(b.shape)
    M, K, N = sa[-2], sa[-1], sb[-1]
    if sb[-2] != K:
        raise EdgecError(f"node {node.name} (MatMul): inner dims {a.shape} x {b.shape} differ")
    bt = np.broadcast_shapes(sa[:-2], sb[:-2])
    nb = int(np.prod(bt, dtype=np.int64))
    a_idx = np.broadcast_to(np.arange(int(np.prod(sa[:-2], dtype=np.int64))).reshape(sa[:-2]), bt).ravel()
    b_idx = np.broadcast_to(np.arange(int(np.prod(sb[:-2], dtype=np.int64))).reshape(sb[:-2]), bt).ravel()
    ab, bb = int(a_idx.max(initial=0)) + 1, int(b_idx.max(initial=0)) + 1
    if bb == 1 and np.array_equal(a_idx, np.arange(nb)):
        M, nb, ab = M * nb, 1, 1  # shared B: batches are just more rows
    ident = np.arange(nb)
    a_idx = None if ab == 1 or np.array_equal(a_idx, ident) else a_idx
    b_idx = None if bb == 1 or np.array_equal(b_idx, ident) else b_idx
    return _emit(node, ctx, a, b, M=M, N=N, K=K, trans_a=False, trans_b=False, alpha=1.0, batch=nb,
                 ab=ab, bb=bb, a_idx=a_idx, b_idx=b_idx)
