"""MaxPool / AveragePool (1-D and 2-D, pads, auto_pad, dilations, ceil_mode, count_include_pad)
and the global pools, over NCHW float32 via runtime_c/f32-pool (channel-blocked layers: ops/nchwc.py)."""

from __future__ import annotations

import numpy as np

from edgec.codegen import kernels
from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node
from edgec.codegen.ops import _par
from edgec.codegen.registry import register
from edgec.errors import EdgecError

HEADER = "f32-pool/f32-pool-scalar.h"


def window_pads(node: Node, in_sp: list[int], out_sp: list[int], k: list[int], s: list[int], d: list[int]):
    """(begin pads, end pads) per spatial dim from pads or auto_pad, as ONNX defines them."""
    n = len(in_sp)
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(n):
            total = max(0, (out_sp[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in_sp[i])
            small = total // 2
            begin.append(small if auto == "SAME_UPPER" else total - small)
            end.append(total - begin[-1])
        return begin, end
    if auto == "VALID":
        return [0] * n, [0] * n
    pads = list(node.attr("pads", [0] * 2 * n))
    return pads[:n], pads[n:]


def _spatial(node: Node):
    x, y = node.inputs[0], node.outputs[0]
    if x.dtype != np.float32:
        raise EdgecError(f"node {node.name} ({node.op}): only float32 is supported, got {x.dtype.name}")
    nsp = len(x.shape) - 2
    if nsp not in (1, 2):
        raise EdgecError(f"node {node.name} ({node.op}): {nsp}-D pooling is not supported (1-D and 2-D are)")
    k = list(node.attr("kernel_shape"))
    s = list(node.attr("strides", [1] * nsp))
    d = list(node.attr("dilations", [1] * nsp))
    ins, outs = list(x.shape[2:]), list(y.shape[2:])
    b, e = window_pads(node, ins, outs, k, s, d)
    if nsp == 1:  # as 2-D with H = 1
        k, s, d, ins, outs, b, e = [1] + k, [1] + s, [1] + d, [1] + ins, [1] + outs, [0] + b, [0] + e
    return x, y, k, s, d, ins, outs, b, e


@register("MaxPool")
def emit_maxpool(node: Node, ctx: EmitContext) -> str:
    if len(node.outputs) > 1 and node.outputs[1] is not None:
        raise EdgecError(f"node {node.name} (MaxPool): the Indices output is not supported")
    x, y, k, s, d, ins, outs, b, e = _spatial(node)
    if y.block:  # inside a channel-blocked region (codegen/layout.py)
        from edgec.codegen.ops import nchwc
        return nchwc.emit_pool(node, ctx, k, s, d, ins, outs, b, e, None)
    planes = x.shape[0] * x.shape[1]
    n, xp, yp, tid = _planes(ctx, x, y, planes)
    ctx.note(algo="maxpool2d-2pass", macs=y.size * (k[0] + k[1]))
    if k[0] > 1 and k[1] > 1:
        # separable: horizontal max into a row buffer, then vertical max
        isa = "avx2" if ctx.target.isa in ("avx2", "avx512") else "scalar"  # AVX2: vector stride-2 row pass
        ctx.require(f"f32-pool/f32-maxpool-2pass-{isa}.h")
        if isa != "scalar":
            ctx.note(algo=f"maxpool2d-2pass-{isa}")
        per = _slice_floats(ins[0] * outs[1])
        rows = ctx.scratch(4 * per * (kernels.SCRATCH_THREADS if tid else 1))
        return (f"ec_f32_maxpool2d_2pass_{isa}({n}, {ins[0]}, {ins[1]}, {outs[0]}, {outs[1]}, {k[0]}, {k[1]}, "
                f"{s[0]}, {s[1]}, {d[0]}, {d[1]}, {b[0]}, {b[1]}, {xp}, {yp}, (float *){rows}{f' + ec_tid * {per}u' if tid else ''});\n")
    ctx.require(HEADER)
    ctx.note(algo="maxpool2d")
    return (f"ec_f32_maxpool2d_scalar({n}, {ins[0]}, {ins[1]}, {outs[0]}, {outs[1]}, {k[0]}, {k[1]}, "
            f"{s[0]}, {s[1]}, {d[0]}, {d[1]}, {b[0]}, {b[1]}, {xp}, {yp});\n")


def _slice_floats(n: int) -> int:
    """A thread's slice of a row buffer, n floats rounded up to whole 64-byte lines: ResNet-50's 7x7 average pool
    had 7-float slices side by side, both threads writing one line (26 us on 2 threads against 15 on 1)."""
    return -(-n // 16) * 16


def _planes(ctx: EmitContext, x, y, planes: int) -> tuple[str, str, str, bool]:
    """(plane count, x, y) C expressions of the planes this body runs, and whether it runs a share
    of them on one of several threads (then scratch needs a slice per thread)."""
    if not _par.split(ctx, planes, x.size + y.size):
        return f"{planes}u", ctx.ptr(x), ctx.ptr(y), False
    xs, ys = x.size // planes, y.size // planes
    return "ec_e - ec_b", f"{ctx.ptr(x)} + ec_b * {xs}u", f"{ctx.ptr(y)} + ec_b * {ys}u", True


@register("AveragePool")
def emit_avgpool(node: Node, ctx: EmitContext) -> str:
    x, y, k, s, d, ins, outs, b, e = _spatial(node)
    cip = int(node.attr("count_include_pad", 0))
    if y.block:
        from edgec.codegen.ops import nchwc
        return nchwc.emit_pool(node, ctx, k, s, d, ins, outs, b, e, cip)
    ctx.require(HEADER)
    planes = x.shape[0] * x.shape[1]
    n, xp, yp, tid = _planes(ctx, x, y, planes)
    # ceil_mode only adds output cells; their divisor is clipped to the declared end pad (as onnxruntime)
    if k[0] > 1 and k[1] > 1:
        ctx.require("f32-pool/f32-avgpool-2pass-scalar.h")
        ctx.note(algo="avgpool2d-2pass", macs=y.size * (k[0] + k[1]))
        per = _slice_floats(ins[0] * outs[1])
        rows = ctx.scratch(4 * per * (kernels.SCRATCH_THREADS if tid else 1))
        return (f"ec_f32_avgpool2d_2pass_scalar({n}, {ins[0]}, {ins[1]}, {outs[0]}, {outs[1]}, {k[0]}, {k[1]}, "
                f"{s[0]}, {s[1]}, {d[0]}, {d[1]}, {b[0]}, {b[1]}, {e[0]}, {e[1]}, {cip}, {xp}, {yp}, "
                f"(float *){rows}{f' + ec_tid * {per}u' if tid else ''});\n")
    ctx.note(algo="avgpool2d", macs=y.size * k[0] * k[1])
    return (f"ec_f32_avgpool2d_scalar({n}, {ins[0]}, {ins[1]}, {outs[0]}, {outs[1]}, {k[0]}, {k[1]}, "
            f"{s[0]}, {s[1]}, {d[0]}, {d[1]}, {b[0]}, {b[1]}, {e[0]}, {e[1]}, {cip}, {xp}, {yp});\n")


# global average pool kernel per ISA: (header, function); the scalar one is the reference
GAVGPOOL = {
    "scalar": ("f32-gavgpool/f32-gavgpool-1x-scalar.h", "ec_f32_gavgpool_1x_scalar"),
    "avx2": ("f32-gavgpool/f32-gavgpool-8x-avx2.h", "ec_f32_gavgpool_8x_avx2"),
    "avx512": ("f32-gavgpool/f32-gavgpool-16x-avx512.h", "ec_f32_gavgpool_16x_avx512"),
    "neon": ("f32-gavgpool/f32-gavgpool-4x-neon.h", "ec_f32_gavgpool_4x_neon"),
    "neon-v82": ("f32-gavgpool/f32-gavgpool-4x-neon.h", "ec_f32_gavgpool_4x_neon"),
}


@register("GlobalAveragePool", "GlobalMaxPool")
def emit_global_pool(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    if x.dtype != np.float32:
        raise EdgecError(f"node {node.name} ({node.op}): only float32 is supported")
    if y.block:
        from edgec.codegen.ops import nchwc
        return nchwc.emit_gavgpool(node, ctx)
    planes = x.shape[0] * x.shape[1]
    hw = x.size // max(planes, 1)
    n, xp, yp, _ = _planes(ctx, x, y, planes)
    if node.op == "GlobalAveragePool":
        header, fn = GAVGPOOL.get(ctx.target.isa, GAVGPOOL["scalar"])
        ctx.require(header)
        ctx.note(algo=f"gavgpool-{ctx.target.isa}", macs=x.size)
        return f"{fn}({n}, {hw}u, {xp}, {yp});\n"
    ctx.require(HEADER)
    ctx.note(algo="global-maxpool", macs=x.size)
    return f"ec_f32_global_maxpool_scalar({n}, {hw}u, {xp}, {yp});\n"
