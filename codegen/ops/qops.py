"""Int8 Add, MaxPool and GlobalAveragePool (the edgec-internal ops made by codegen/ops/qdq.py),
over runtime_c/q8-eltwise. Tensors in the u8 domain (see codegen/ops/quant.py)."""

from __future__ import annotations

import numpy as np

from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node
from edgec.codegen.ops import _par
from edgec.codegen.ops.pool import window_pads
from edgec.codegen.ops.qpack import act_clamp, quantize_multiplier, to_u8_domain
from edgec.codegen.ops.quant import _scalar, lut_kernel, qaddf_params
from edgec.codegen.registry import register
from edgec.errors import EdgecError

FILES = ("q8-eltwise/q8-eltwise.h", "q8-eltwise/q8-eltwise-scalar.c")


@register("EcQAdd")
def emit_qadd(node: Node, ctx: EmitContext) -> str:
    a, as_, az, b, bs, bz, ys, yz = node.inputs[:8]
    y = node.outputs[0]
    if a.shape != b.shape:
        raise EdgecError(f"node {node.name} (Add): int8 Add needs same-shape operands")
    ctx.require(*FILES)
    ctx.note(algo="q8-add", macs=y.size, kernel="q8_add_f32")
    # the float form: the model's DequantizeLinear -> Add -> QuantizeLinear rounding, not the fixed-point q8_add
    # (whose 1-LSB flips at near-ties compound through ResNet-50's 16 residual adds to 14 LSB at its output)
    return (f"const q8_addf_params p = {qaddf_params(node)};\n"
            f"q8_add_f32({y.size}u, (const uint8_t *){ctx.ptr(a)}, (const uint8_t *){ctx.ptr(b)}, &p, "
            f"(uint8_t *){ctx.ptr(y)});\n")


@register("EcQMaxPool")
def emit_qmaxpool(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    if len(x.shape) != 4:
        raise EdgecError(f"node {node.name} (MaxPool): int8 MaxPool supports 2-D pooling only")
    k = list(node.attr("kernel_shape"))
    s, d = list(node.attr("strides", [1, 1])), list(node.attr("dilations", [1, 1]))
    b, _ = window_pads(node, list(x.shape[2:]), list(y.shape[2:]), k, s, d)
    if x.block or y.block:  # the blocked layout (codegen/q8layout.py): 4-channel planes of 4-byte pixels
        if x.block != y.block or x.shape[1] % x.block:
            raise EdgecError(f"internal: node {node.name} (MaxPool) reads {x.layout} and writes {y.layout}")
        fn = "q8_maxpool_c4"
        if ctx.target.arch == "x86_64" and "avx512bw" in ctx.target.features:  # strides 1-2 (its own fallback)
            fn = "q8_maxpool_c4__avx512"
        ctx.require("q8-eltwise/q8-maxpool-c4.c", "q8-gemm/q8-gemm.h", "q8-gemm/q8-pack.c")
        ctx.note(layout=y.layout)
        planes = x.shape[0] * x.shape[1] // 4
    else:
        fn = "q8_maxpool"
        if ctx.target.arch == "x86_64" and "avx512bw" in ctx.target.features:  # any window (its own fallback)
            fn = "q8_maxpool__avx512"
            ctx.require("q8-eltwise/q8-maxpool-avx512.c")
        elif ctx.target.arch == "x86_64":  # else the portable code
            if "avx2" in ctx.target.features:
                fn = "q8_maxpool__avx2"
                ctx.require("q8-eltwise/q8-maxpool-avx2.c")
        planes = x.shape[0] * x.shape[1]
    ctx.require(*FILES)
    ctx.note(algo="q8-maxpool", macs=y.size * k[0] * k[1], kernel=fn)
    pi, po = x.nbytes // planes, y.nbytes // planes  # bytes a plane (blocked: 4 channels, the 16-pixel pitch)
    rest = ", ".join(str(v) for v in (x.shape[2], x.shape[3], k[0], k[1], s[0], s[1], d[0], d[1], b[0], b[1],
                                      y.shape[2], y.shape[3]))
    # planes among the threads: a window's bytes cost about a float's worth of vector work per 16 outputs, and each
    # output row about 12 floats' worth of set-up (SqueezeNet's 13x13 pool, 256 planes, took 28 us on one Zen 5 core
    # where the windows alone came to 10)
    if _par.split(ctx, planes, y.size * k[0] * k[1] // 16 + planes * y.shape[2] * 12):
        return (f"const q8_pool_shape s = {{1, (int)(ec_e - ec_b), {rest}}};\n"
                f"{fn}(&s, (const uint8_t *){ctx.ptr(x)} + ec_b * {pi}u, (uint8_t *){ctx.ptr(y)} + ec_b * {po}u);\n")
    return (f"const q8_pool_shape s = {{1, {planes}, {rest}}};\n"
            f"{fn}(&s, (const uint8_t *){ctx.ptr(x)}, (uint8_t *){ctx.ptr(y)});\n")


@register("EcQGlobalAveragePool")
def emit_qgap(node: Node, ctx: EmitContext) -> str:
    x, xs, xz, ys, yz = node.inputs[:5]
    y = node.outputs[0]
    hw = int(np.prod(x.shape[2:]))
    # onnxruntime: x_scale / (y_scale * image_size) in float32
    scale = np.float32(_scalar(node, xs, "x_scale")) / (np.float32(_scalar(node, ys, "y_scale")) * np.float32(hw))
    mult, shift = quantize_multiplier(scale)
    zx, zy = to_u8_domain(xz.const, x.dtype), to_u8_domain(yz.const, y.dtype)
    ctx.require(*FILES)
    ctx.note(algo="q8-gavgpool", macs=x.size)
    return (f"q8_gavgpool({x.shape[0] * x.shape[1]}u, {hw}u, (const uint8_t *){ctx.ptr(x)}, {zx}, {mult}, {shift}, "
            f"{zy}, (uint8_t *){ctx.ptr(y)});\n")


LUT_BLOCK = 4096  # bytes per parallel item of a table lookup (a multiple of every kernel's 64-byte step)


@register("EcQLut")
def emit_qlut(node: Node, ctx: EmitContext) -> str:
    x, lut = node.inputs[0], node.inputs[1]
    y = node.outputs[0]
    fn = lut_kernel(ctx)
    ctx.note(algo="q8-lut", macs=y.size, kernel=fn)
    if lut.size == 256:  # bytewise: over the stored bytes (a blocked tensor's too, codegen/q8layout.py)
        if x.block != y.block:
            raise EdgecError(f"internal: node {node.name} (EcQLut) reads {x.layout} and writes {y.layout}")
        n = y.nbytes
        split = _par.flat_call(ctx, n, LUT_BLOCK, n // 4,  # blocks among the threads
                               f"{fn}(e_ - b_, (const uint8_t *){ctx.ptr(x)} + b_, {ctx.ptr(lut)}, "
                               f"(uint8_t *){ctx.ptr(y)} + b_);")
        if split:
            return split
        return f"{fn}({n}u, (const uint8_t *){ctx.ptr(x)}, {ctx.ptr(lut)}, (uint8_t *){ctx.ptr(y)});\n"
    # one table per channel ([C, 256], codegen/ops/qlut.py) over NC... planes
    C = lut.shape[0]
    if len(x.shape) < 2 or x.shape[1] != C or lut.size != C * 256:
        raise EdgecError(f"node {node.name} (EcQLut): per-channel table [{C}, 256] does not fit input {x.shape}")
    inner = int(np.prod(x.shape[2:]))
    return (f"for (size_t p = 0; p < {x.shape[0] * C}u; p++)\n"
            f"    {fn}({inner}u, (const uint8_t *){ctx.ptr(x)} + p * {inner}u, {ctx.ptr(lut)} + p % {C}u * 256u, "
            f"(uint8_t *){ctx.ptr(y)} + p * {inner}u);\n")


def mul_fixed_point(scale, za: int, zb: int, zy: int) -> np.ndarray:
    """[256, 2] int16 for q8_mul_outer_fx: per gate byte g, (M, k) such that
    clamp((((a - za) << k) * M + 2^14 >> 15) + zy, 0, 255) equals q8_mul_outer's float formula
    clamp(nearbyintf((float)(a - za) * ((float)(g - zb) * scale)) + zy, 0, 255) for all 256 bytes a, checked here
    on every one of them; (0, -1) where no M near s * 2^(15 - k), k = 7..0, is (the kernel takes the float formula
    for that plane). Largest k first: the most bits of s."""
    v = np.arange(256, dtype=np.int64) - za
    vf = v.astype(np.float32)
    out = np.zeros((256, 2), np.int16)
    out[:, 1] = -1
    for g in range(256):
        s = np.float32(np.float32(g - zb) * np.float32(scale))
        ref = np.clip(np.clip(np.rint(vf * s), -1e6, 1e6).astype(np.int64) + zy, 0, 255)  # no int overflow
        for k in range(7, -1, -1):
            m0 = int(np.rint(float(s) * 2.0 ** (15 - k)))
            cand = (m0, m0 - 1, m0 + 1, m0 - 2, m0 + 2, max(-32767, min(32767, m0)))  # the last: large s, clamped
            ms = np.array([m for m in cand if -32768 < m <= 32767], np.int64)
            if not ms.size:
                continue
            got = np.clip(((((v << k)[None, :] * ms[:, None]) + (1 << 14)) >> 15) + zy, 0, 255)
            hit = np.nonzero((got == ref[None, :]).all(1))[0]
            if hit.size:
                out[g] = (ms[hit[0]], k)
                break
    return out


@register("EcQMul")
def emit_qmul(node: Node, ctx: EmitContext) -> str:
    a, as_, az, b, bs, bz, ys, yz = node.inputs[:8]
    y = node.outputs[0]
    scale = np.float32(_scalar(node, as_, "a_scale")) * np.float32(_scalar(node, bs, "b_scale")) / \
        np.float32(_scalar(node, ys, "y_scale"))
    za, zb, zy = to_u8_domain(az.const, a.dtype), to_u8_domain(bz.const, b.dtype), to_u8_domain(yz.const, y.dtype)
    outer = b.size
    inner = a.size // outer
    ctx.require(*FILES)
    ctx.note(algo="q8-mul", macs=y.size)
    simd = ctx.target.arch == "x86_64" and "avx2" in ctx.target.features or "neon" in ctx.target.features
    if inner >= 32 and simd:  # the fixed-point planes' vector paths: AVX2 vpmulhrsw, NEON vqrdmulh
        fx = mul_fixed_point(scale, za, zb, zy)
        if (fx[:, 1] >= 0).any():
            ctx.note(kernel="q8_mul_outer_fx")
            return (f"q8_mul_outer_fx({outer}u, {inner}u, (const uint8_t *){ctx.ptr(a)}, "
                    f"(const uint8_t *){ctx.ptr(b)}, {za}, {zb}, {float(scale)!r}f, {zy}, {ctx.weight(f'{node.name}:fx', fx)}, "
                    f"(uint8_t *){ctx.ptr(y)});\n")
    return (f"q8_mul_outer({outer}u, {inner}u, (const uint8_t *){ctx.ptr(a)}, (const uint8_t *){ctx.ptr(b)}, "
            f"{za}, {zb}, {float(scale)!r}f, {zy}, 0, 255, (uint8_t *){ctx.ptr(y)});\n")
