"""Data movement: views (Reshape & co: free aliases in the arena), copies, Transpose, Concat,
Split, Slice, Gather, Pad, Expand, Tile, Cast."""

from __future__ import annotations

import numpy as np

from edgec.codegen.emit import EmitContext
from edgec.codegen.ir import Node, Tensor
from edgec.codegen.ops import _par
from edgec.codegen.ops._util import block, cty, full_loops, loop_nest, strided_loops, strides
from edgec.errors import EdgecError
from edgec.codegen.registry import register


def _copy(ctx: EmitContext, y: Tensor, x: Tensor) -> str:
    # the printer drops the copy when the planner gave both tensors the same buffer
    return f"EC_VIEW_COPY({ctx.ptr(y)}, {ctx.ptr(x)}, {x.nbytes}u);\n"


@register("Reshape", "Flatten", "Squeeze", "Unsqueeze", view=True)
def emit_view(node: Node, ctx: EmitContext) -> str:
    """Same bytes, new shape: the planner gives the output the input's buffer, so this is usually a no-op."""
    ctx.note(algo="view")
    return _copy(ctx, node.outputs[0], node.inputs[0])


@register("Identity")
def emit_identity(node: Node, ctx: EmitContext) -> str:
    ctx.note(algo="copy")
    return _copy(ctx, node.outputs[0], node.inputs[0])


def _const_ints(node: Node, idx: int, what: str):
    t = node.input(idx)
    if t is None:
        return None
    if not t.is_const:
        raise EdgecError(f"node {node.name} ({node.op}): {what} must be known at compile time")
    return [int(v) for v in t.const.reshape(-1)]


@register("Transpose")
def emit_transpose(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    perm = node.attr("perm") or list(reversed(range(len(x.shape))))
    xs = strides(x.shape)
    ctx.note(algo="transpose")
    xp, yp = ctx.ptr(x), ctx.ptr(y)
    return block(strided_loops(y.shape, [[xs[p] for p in perm]], lambda i, o: [f"{yp}[{o}] = {xp}[{i[0]}];"],
                               ctx=ctx, work=2 * y.size))


def _blocks(shape, axis):
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    return outer, int(np.prod(shape[axis:], dtype=np.int64))


@register("Concat")
def emit_concat(node: Node, ctx: EmitContext) -> str:
    y = node.outputs[0]
    if y.block:  # channels of a channel-blocked region (codegen/layout.py)
        from edgec.codegen.ops import nchwc
        return nchwc.emit_concat(node, ctx)
    axis = node.attr("axis") % len(y.shape)
    outer, yin = _blocks(y.shape, axis)
    from edgec.codegen.memory import INPLACE_ATTR
    inplace = node.attr(INPLACE_ATTR) or [False] * len(node.inputs)
    segs, off = [], 0
    for x, nested in zip(node.inputs, inplace):
        if x is None or x.size == 0:
            continue
        _, xin = _blocks(x.shape, axis)
        if not nested:  # a nested input's layer wrote it into its place in y (codegen/memory.py)
            segs.append((ctx.ptr(x), xin, off))
        off += xin
    if not segs:
        ctx.note(algo="in-place")
        return "/* every input was written into its place in the output */\n"
    ctx.note(algo="copy" if not any(inplace) else "copy-part")
    return _segments(ctx, ctx.ptr(y), y, outer, yin, segs, into_big=True)


@register("ChannelShuffle")
def emit_channel_shuffle(node: Node, ctx: EmitContext) -> str:
    """Reshape [N,G,C/G,H,W] -> Transpose [0,2,1,3,4] -> Reshape [N,C,H,W], fused by codegen/layout.py: output
    channel c is input channel (c % G) * (C/G) + c / G, one plane copy each."""
    x, y = node.inputs[0], node.outputs[0]
    groups = node.attr("ec_shuffle_groups")
    if not isinstance(groups, int) or groups < 1 or len(x.shape) != 4 or x.shape != y.shape \
            or x.shape[1] % groups or x.dtype != y.dtype:
        raise EdgecError(f"node {node.name} ({node.op}): not an ONNX op; edgec fuses it from Reshape, Transpose, "
                         f"Reshape only")
    if y.block:
        from edgec.codegen.ops import nchwc
        return nchwc.emit_shuffle(node, ctx, groups)
    N, C = x.shape[:2]
    hw = int(np.prod(x.shape[2:], dtype=np.int64))
    ctx.note(algo=f"shuffle-g{groups}")
    xp, yp = ctx.ptr(x), ctx.ptr(y)
    lo, hi = "0", f"{N * C}u"
    if _par.split(ctx, N * C, 2 * x.size):
        lo, hi = "ec_b", "ec_e"
    return block([f"for (size_t i = {lo}; i < {hi}; i++) {{  /* output plane i = (n, c) */",
                  f"    const size_t n = i / {C}u, c = i % {C}u;",
                  f"    memcpy({yp} + i * {hw}u, {xp} + (n * {C}u + c % {groups}u * {C // groups}u + c / {groups}u)"
                  f" * {hw}u, {hw * x.dtype.itemsize}u);", "}"])


COPY_BLOCK = 4096  # elements per parallel item of a Concat/Split: 16 KB of float32


def _segments(ctx: EmitContext, big: str, bt: Tensor, outer: int, bin_: int, segs, into_big: bool) -> str:
    """Copies between a big tensor (outer rows of bin_ elements) and parts (ptr, n per row, offset in
    the row): Concat writes the big one, Split reads it. Split among threads by blocks of the big
    tensor's elements, each copying the parts' pieces that fall inside it."""
    esz = bt.dtype.itemsize

    def copy(dst, src, n):
        return f"memcpy({dst}, {src}, ({n}) * {esz}u);" if into_big else f"memcpy({src}, {dst}, ({n}) * {esz}u);"
    if not _par.split(ctx, _par.flat_items(bt.size, COPY_BLOCK), 2 * bt.size):
        if into_big:
            return block([f"for (size_t o = 0; o < {outer}u; o++) memcpy({big} + o * {bin_}u + {off}u, "
                          f"{p} + o * {n}u, {n * esz}u);" for p, n, off in segs])
        return block([f"for (size_t o = 0; o < {outer}u; o++) memcpy({p} + o * {n}u, "
                      f"{big} + o * {bin_}u + {off}u, {n * esz}u);" for p, n, off in segs])
    lines = [f"const size_t lo = ec_b * {COPY_BLOCK}u, hi = ec_e * {COPY_BLOCK}u < {bt.size}u ? "
             f"ec_e * {COPY_BLOCK}u : {bt.size}u;",
             f"for (size_t o = lo / {bin_}u; o < {outer}u && o * {bin_}u < hi; o++) {{"]
    for p, n, off in segs:
        lines += [f"    {{ /* part at [{off}, {off + n}) of the row, clipped to [lo, hi) */",
                  f"        size_t b = o * {bin_}u + {off}u, e = b + {n}u;",
                  "        if (b < lo) b = lo;", "        if (e > hi) e = hi;",
                  f"        if (b < e) {copy(f'{big} + b', f'{p} + o * {n}u + (b - o * {bin_}u - {off}u)', 'e - b')}",
                  "    }"]
    return block(lines + ["}"])


@register("Split")
def emit_split(node: Node, ctx: EmitContext) -> str:
    x = node.inputs[0]
    axis = node.attr("axis", 0) % len(x.shape)
    outer, xin = _blocks(x.shape, axis)
    if any(y is None for y in node.outputs):
        raise EdgecError(f"node {node.name} (Split): unused outputs are not supported")
    segs, off = [], 0
    for y in node.outputs:
        _, yin = _blocks(y.shape, axis)
        segs.append((ctx.ptr(y), yin, off))
        off += yin
    return _segments(ctx, ctx.ptr(x), x, outer, xin, segs, into_big=False)


@register("Slice")
def emit_slice(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    r = len(x.shape)
    starts, ends = _const_ints(node, 1, "starts"), _const_ints(node, 2, "ends")
    axes = _const_ints(node, 3, "axes") or list(range(len(starts)))
    steps = _const_ints(node, 4, "steps") or [1] * len(starts)
    begin, step = [0] * r, [1] * r
    for s, e, a, st in zip(starts, ends, axes, steps):
        a %= r
        d = x.shape[a]
        s = s + d if s < 0 else s
        s = min(max(s, 0), d) if st > 0 else min(max(s, -1), d - 1)
        begin[a], step[a] = s, st
    xs = strides(x.shape)
    base = sum(b * s for b, s in zip(begin, xs))
    xp, yp = ctx.ptr(x), ctx.ptr(y)
    if y.size == 0:
        return "/* empty slice */\n"
    ctx.note(algo="copy")
    return block(strided_loops(y.shape, [[s * k for s, k in zip(xs, step)]],
                               lambda i, o: [f"{yp}[{o}] = {xp}[{i[0]}];"], bases=[base], ctx=ctx, work=2 * y.size))


@register("Gather")
def emit_gather(node: Node, ctx: EmitContext) -> str:
    x, idx, y = node.inputs[0], node.inputs[1], node.outputs[0]
    axis = node.attr("axis", 0) % len(x.shape)
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    d, n = x.shape[axis], idx.size
    xp, ip, yp = ctx.ptr(x), ctx.ptr(idx), ctx.ptr(y)
    ctx.note(algo="gather")
    return block([f"for (size_t o = 0; o < {outer}u; o++)", f"    for (size_t j = 0; j < {n}u; j++) {{",
                  f"        int64_t k = (int64_t){ip}[j];", f"        if (k < 0) k += {d};",
                  f"        memcpy({yp} + (o * {n}u + j) * {inner}u, {xp} + (o * {d}u + (size_t)k) * {inner}u, "
                  f"{inner * x.dtype.itemsize}u);", "    }"])


@register("Expand")
def emit_expand(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    xp, yp = ctx.ptr(x), ctx.ptr(y)
    return block(loop_nest(y.shape, [x], lambda i, o: [f"{yp}[{o}] = {xp}[{i[0]}];"], ctx=ctx, work=2 * y.size))


@register("Cast", "CastLike")
def emit_cast(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    for t in (x, y):
        if t.dtype.name in ("float16", "bfloat16") or t.dtype.kind not in "biuf":
            raise EdgecError(f"node {node.name} ({node.op}): casts involving {t.dtype.name} are not supported")
    xp, yp = ctx.ptr(x), ctx.ptr(y)
    conv = (lambda v: f"({v} != 0)") if y.dtype == np.bool_ else (lambda v: f"({cty(y)}){v}")
    return block(loop_nest(y.shape, [x], lambda i, o: [f"{yp}[{o}] = {conv(f'{xp}[{i[0]}]')};"], ctx=ctx,
                           work=2 * y.size))


@register("Tile")
def emit_tile(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    xs = strides(x.shape)
    src = " + ".join(f"(i{k} % {d}) * {s}" for k, (d, s) in enumerate(zip(x.shape, xs))) or "0"
    dst = " + ".join(f"i{k} * {s}" for k, s in enumerate(strides(y.shape))) or "0"
    return block(full_loops(y.shape, [f"{ctx.ptr(y)}[{dst}] = {ctx.ptr(x)}[{src}];"], ctx=ctx, work=2 * y.size))


@register("Pad")
def emit_pad(node: Node, ctx: EmitContext) -> str:
    x, y = node.inputs[0], node.outputs[0]
    r = len(x.shape)
    pads = _const_ints(node, 1, "pads") if node.input(1) is not None else list(node.attr("pads", [0] * 2 * r))
    axes = _const_ints(node, 3, "axes") or list(range(r))
    before = [0] * r
    for k, a in enumerate(axes):
        before[a % r] = pads[k]
    mode = node.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise EdgecError(f"node {node.name} (Pad): mode {mode!r} is not supported")
    cv = node.input(2)
    value = f"{ctx.ptr(cv)}[0]" if cv is not None else "0"
    xs = strides(x.shape)
    lines = []
    for k, d in enumerate(x.shape):
        lines.append(f"long s{k} = i{k} - {before[k]};")
        if mode == "reflect":
            lines.append(f"if ({d} > 1) {{ long p_ = 2 * ({d} - 1); s{k} = ((s{k} % p_) + p_) % p_; "
                         f"if (s{k} >= {d}) s{k} = p_ - s{k}; }} else s{k} = 0;")
        elif mode == "edge":
            lines.append(f"s{k} = s{k} < 0 ? 0 : (s{k} >= {d} ? {d} - 1 : s{k});")
        elif mode == "wrap":
            lines.append(f"s{k} = ((s{k} % {d}) + {d}) % {d};")
    dst = " + ".join(f"i{k} * {s}" for k, s in enumerate(strides(y.shape))) or "0"
    src = " + ".join(f"s{k} * {s}" for k, s in enumerate(xs)) or "0"
    inside = " && ".join(f"s{k} >= 0 && s{k} < {d}" for k, d in enumerate(x.shape)) or "1"
    lines.append(f"{ctx.ptr(y)}[{dst}] = ({inside}) ? {ctx.ptr(x)}[{src}] : {value};")
    ctx.note(algo=f"pad-{mode}")
    return block(full_loops(y.shape, lines, ctx=ctx, work=2 * y.size))
