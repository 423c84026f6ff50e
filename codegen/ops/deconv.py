"""ConvTranspose (1-D as 2-D with H = 1, 2-D), groups, dilations, pads/auto_pad/output_shape,
bias and fused epilogue, via runtime_c/f32-deconv."""

from __future__ import annotations

import numpy as np

from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node
from edgec.codegen.ops._util import block, epilogue_lines
from edgec.codegen.registry import register
from edgec.errors import EdgecError


def _begin_pads(node: Node, ins, outs, k, s, d) -> list[int]:
    n = len(ins)
    auto = node.attr("auto_pad", "NOTSET")
    opad = list(node.attr("output_padding", [0] * n))
    if node.attr("output_shape") is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        total = [s[i] * (ins[i] - 1) + opad[i] + (k[i] - 1) * d[i] + 1 - outs[i] for i in range(n)]
        if auto == "SAME_UPPER":
            return [t // 2 for t in total]
        return [t - t // 2 for t in total]
    if auto == "VALID":
        return [0] * n
    return list(node.attr("pads", [0] * 2 * n))[:n]


@register("ConvTranspose", epilogue=True)
def emit_deconv(node: Node, ctx: EmitContext) -> str:
    x, w, y = node.inputs[0], node.inputs[1], node.outputs[0]
    if x.dtype != np.float32 or not w.is_const:
        raise EdgecError(f"node {node.name} (ConvTranspose): needs float32 data and constant weights")
    nsp = len(x.shape) - 2
    if nsp not in (1, 2):
        raise EdgecError(f"node {node.name} (ConvTranspose): {nsp}-D is not supported (1-D and 2-D are)")
    k = list(w.shape[2:])
    s = list(node.attr("strides", [1] * nsp))
    d = list(node.attr("dilations", [1] * nsp))
    ins, outs = list(x.shape[2:]), list(y.shape[2:])
    pb = _begin_pads(node, ins, outs, k, s, d)
    if nsp == 1:
        k, s, d, ins, outs, pb = [1] + k, [1] + s, [1] + d, [1] + ins, [1] + outs, [0] + pb
    g = int(node.attr("group", 1))
    wp = ctx.weight(f"w:{w.name}", w.const.astype(np.float32))
    bias = node.input(2)
    bp = ctx.ptr(bias) if bias is not None else "NULL"
    yp = ctx.ptr(y)
    ctx.require("f32-deconv/f32-deconv-scalar.h")
    ctx.note(algo="deconv-scatter", macs=x.size * w.shape[1] * int(np.prod(k)))
    call = (f"ec_f32_deconv2d_scalar({x.shape[0]}, {x.shape[1]}, {ins[0]}, {ins[1]}, {y.shape[1]}, {outs[0]}, "
            f"{outs[1]}, {g}, {k[0]}, {k[1]}, {s[0]}, {s[1]}, {d[0]}, {d[1]}, {pb[0]}, {pb[1]}, {ctx.ptr(x)}, "
            f"{wp}, {bp}, {yp});\n")
    if node.epilogue.empty:
        return call
    ep = ["for (size_t i = 0; i < %du; i++) {" % y.size, f"    float v = {yp}[i];"]
    ep += ["    " + ln for ln in epilogue_lines(node, ctx, "v", "i")] + [f"    {yp}[i] = v;", "}"]
    return call + block(ep)
