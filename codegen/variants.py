"""The per-layer kernel variants a layer can be forced to, and the layer signature tuning records key on.

One table (VARIANTS): per op family the choices the emitters can be forced to for a single layer, each
with the predicate saying when it applies to that layer on a target. A variant forces CompileOptions
fields (the same ones EDGEC_CONV / EDGEC_GSPC / EDGEC_DW / EDGEC_SPARSE / EDGEC_Q8CONV force globally),
scoped to one layer by `emit()`, the dispatcher every layer goes through (codegen/project.py). The cost
model picks by default; a tuning record (CompileOptions.tuned, filled from the tuning database by the
commands) overrides it for the layers whose signature it names.

A signature is the op class with its fused epilogue, every shape that changes the code, the dtype, the
thread count, and the weights' zero fraction where sparse kernels could run; equal signatures compile
to the same code and are tuned once. `layer_class()` drops the shapes: transfer-tuning reuses a class's
recorded variants on layers of other shapes (after checking they still apply).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from edgec.codegen import costmodel, kernels, options
from edgec.errors import EdgecError


@dataclass(frozen=True)
class Variant:
    family: str                                  # conv3x3 | gspc | dw | sparse | q8conv | gemm1x1 | smallc | par | blk
    name: str                                    # unique: what a tuning record stores
    forced: tuple[tuple[str, str], ...]          # CompileOptions fields set for the layer
    applies: Callable[[dict, object], bool]      # (layer facts, target) -> bool
    doc: str

    def forced_str(self, facts: dict) -> str:
        f = dict(self.forced)
        if self.family in ("par", "blk"):  # the cost model's algorithm, partitioned or blocked otherwise
            return ";".join(f"{k}={v}" for k, v in sorted(f.items()))
        if facts.get("G") == 1 and facts["kind"] == "conv" and "sparse" not in f:
            f["sparse"] = "dense"  # a dense-algorithm variant must not be pre-empted by the sparse emitter
        return ";".join(f"{k}={v}" for k, v in sorted(f.items()))


def _wino_ok(f: dict, _t) -> bool:
    return f["kind"] == "conv" and (f["KH"], f["KW"], f["SH"], f["SW"], f["DH"], f["DW"]) == (3, 3, 1, 1, 1, 1) \
        and not f["dw"]


def _grouped_ok(f: dict, _t) -> bool:
    return f["kind"] == "conv" and f["G"] > 1 and not f["dw"] and f["KH"] * f["KW"] > 1


def _gspc_ok(f: dict, t) -> bool:
    """Grouped convs with a window, and dense strided ones (the row kernel as one group or the GEMM:
    conv.strided_direct), few-channel stems aside (the smallc family weighs theirs)."""
    if _grouped_ok(f, t):
        return True
    from edgec.codegen.ops.conv import smallc_kernel
    return f["kind"] == "conv" and f["G"] == 1 and f["KH"] * f["KW"] > 1 and f["SH"] * f["SW"] > 1 \
        and smallc_kernel(t, f) is None


def _gspc_direct(f: dict) -> tuple:
    return (("conv", "direct"),) if _wino_ok(f, None) else ()


def _sparse_ok(blk: str) -> Callable[[dict, object], bool]:
    br, bc = (int(v) for v in blk.split("x"))

    def ok(f: dict, t) -> bool:
        # below ~30% zero blocks no sparse kernel is near the dense one: not worth a measurement
        if f["kind"] == "q8conv":  # int8: 4x1 blocks only, 1x1 convs the sparse kernel takes (ops/quant.py)
            from edgec.codegen.ops.quant import _spmm_kernel
            if blk != "4x1" or f["w2d"] is None or _spmm_kernel(t) is None:
                return False
        return f["kind"] in ("conv", "gemv", "q8conv") and f.get("G", 1) == 1 and f["w2d"] is not None \
            and f["w2d"].shape[1] % bc == 0 and _block_sparsity(f["w2d"], br, bc) >= 0.3
    return ok


def _block_sparsity(w2d, br, bc) -> float:
    from edgec.codegen.costmodel import block_sparsity
    return block_sparsity(w2d, br, bc)


def _q8(f: dict, t, path: str) -> bool:
    if f["kind"] != "q8conv":
        return False
    if path == "q8-dwconv":
        return f["dw"]
    if path == "q8-gspc":
        from edgec.codegen.ops.quant import _gspc_variant
        return f["G"] > 1 and _gspc_variant(t) is not None
    if path == "q8-cgemm":  # the channel-lane GEMM (weights of any value: the VNNI GEMM it stands in for is exact)
        from edgec.codegen.ops.qpack import cgemm_variant, gemm_variant
        return not f["dw"] and \
            cgemm_variant(gemm_variant(t)[0], f["K"] // f["G"], f["C"] // f["G"], (f["KH"], f["KW"])) is not None
    return True


def _build_table() -> tuple[Variant, ...]:
    v = []
    for name in ("direct", "winograd-f23", "winograd-f43", "winograd-f63"):
        v.append(Variant("conv3x3", name, (("conv", name),), _wino_ok,
                         "3x3 stride-1 conv: the direct kernel the cost model would use, or Winograd F(m,3)"))
    v.append(Variant("gspc", "gspc-tile", (("gspc", "tile"),), _gspc_ok,
                     "grouped or dense strided conv: GSPC's T_O output-channel tiles per group"))
    v.append(Variant("gspc", "gspc-ow", (("gspc", "ow"),),
                     lambda f, t: _grouped_ok(f, t) and kernels.gspc_ow_kernel(t, f["K"] // f["G"], 1, f["Wo"]) is not None,
                     "grouped conv: vectors along the output row (few channels per group)"))
    v.append(Variant("gspc", "gspc-mg", (("gspc", "mg"),),
                     lambda f, t: _grouped_ok(f, t) and kernels.gspc_mg_kernel(t, f["K"] // f["G"]) is not None,
                     "grouped conv: several narrow groups per vector"))
    v.append(Variant("gspc", "gspc-gemm", (("gspc", "gemm"),), _gspc_ok,
                     "grouped or dense strided conv: a packed GEMM (one per group)"))
    v.append(Variant("dw", "dw-plane", (("dw", "plane"),), lambda f, t: f["kind"] == "conv" and f["dw"],
                     "depthwise: one plane at a time"))
    v.append(Variant("dw", "dw-cb", (("dw", "cb"),),
                     lambda f, t: f["kind"] == "conv" and f["dw"] and kernels.dwconv_cb_kernel(t) is not None
                     and f["Wo"] <= 256 and f["KH"] * f["KW"] <= 64,
                     "depthwise: channels interleaved, one vector of channels per tap"))
    v.append(Variant("sparse", "dense", (("sparse", "dense"),),
                     lambda f, t: any(_sparse_ok(b)(f, t) for b in ("1x1", "1x4", "4x1", "4x4")),
                     "dense kernels on pruned weights"))
    for blk in ("1x1", "1x4", "4x1", "4x4"):  # int8 1x1 convs: 4x1 only (q8-spmm)
        v.append(Variant("sparse", f"sparse-{blk}", (("sparse", f"sparse-{blk}"),), _sparse_ok(blk),
                         f"{blk}-block sparse weights x dense activations"))
    for path in ("q8-gemm", "q8-cgemm", "q8-gspc", "q8-dwconv"):
        v.append(Variant("q8conv", path, (("q8conv", path),), lambda f, t, p=path: _q8(f, t, p),
                         f"int8 conv through the {path[3:]} kernels"))
    # 1x1 stride-1 unpadded convs: packed B panels are the default (in place measured 5-11% slower on Zen 3's
    # 28x28 and 24x24 layers), in place saves the copy where a core's caches and TLB make strided rows cheap
    v.append(Variant("gemm1x1", "gemm1x1-pack", (("gemm1x1", "pack"),), _gemm1x1_ok,
                     "1x1 conv: B panels packed, each copy overlapping the previous panel's row strips"))
    v.append(Variant("gemm1x1", "gemm1x1-inplace", (("gemm1x1", "inplace"),), _gemm1x1_ok,
                     "1x1 conv: B rows read in place from the input (no copy)"))
    # dense convs with at most 4 input channels (stems): the direct kernel (output channels in the lanes, a row of
    # pixels in registers) or im2col + GEMM, whichever costmodel.choose_smallc does not pick
    v.append(Variant("smallc", "smallc-direct", (("smallc", "direct"),), _smallc_ok,
                     "few input channels: direct kernel, no im2col (output channels in the vector lanes)"))
    v.append(Variant("smallc", "smallc-gemm", (("smallc", "gemm"),), _smallc_ok,
                     "few input channels: im2col + GEMM (the path of wider layers)"))
    # work partitioning; every covered layer uses all of the pool's threads by default. Where a variant
    # changes nothing (a 1-thread build, a driver with one split) it emits the default's code, and tuning
    # drops it as such.
    v.append(Variant("par", "par-serial", (("par", "serial"),), lambda f, t: True,
                     "one thread for this layer: the pool's fork-join costs more than it saves on small layers"))
    v.append(Variant("par", "par-cols", (("par", "cols"),), _split_ok,
                     "split over column blocks only (narrower blocks, no output-channel chunks); Winograd: over "
                     "tile blocks"))
    v.append(Variant("par", "par-rows", (("par", "rows"),), _split_ok,
                     "split over output-channel chunks (column blocks as wide as the caches allow); Winograd: "
                     "over output-channel chunks of each tile block"))
    # cache blocking of the dense GEMM drivers (1x1, im2col, indirect, transposed) and of Winograd (its tile block
    # TB and KC), scaled from the cost model's cache-size formulas, its algorithm kept. Where the scaled block is the default's (K already whole, one column
    # block, a split that narrows it back) the variant emits the default's code, and tuning drops it as such.
    # kc-half (EDGEC_BLK=kc-half) is not measured: on Zen 3 it lost on 8 of ResNet-50's 9 GEMM and Winograd
    # layers (0.82-0.99x) and with it the full search of ResNet-50 ran out of the 300 s budget
    for mode, doc in (("nc-half", "column block (transposed: output-channel block; Winograd: tile block) half the cost model's"),
                      ("nc-double", "column block (transposed: output-channel block; Winograd: tile block) twice the cost "
                                    "model's"),
                      ("kc-whole", "K in one block (no partial sums written back), whatever the caches")):
        v.append(Variant("blk", f"blk-{mode}", (("blk", mode),), _blk_ok, doc))
    return tuple(v)


def _blk_ok(f: dict, _t) -> bool:
    # convs the GEMM drivers or Winograd may run (grouped 3x3 stride-1 included); a layer the cost model gives
    # the direct stem kernel, GSPC or a sparse kernel keeps that code (the variant is then "same code as default")
    return f["kind"] == "conv" and not f["dw"] and (f["G"] == 1 or f["KH"] * f["KW"] == 1 or _wino_ok(f, _t))


def _gemm1x1_ok(f: dict, _t) -> bool:
    return f["kind"] == "conv" and not f["dw"] and (f["KH"], f["KW"], f["SH"], f["SW"], f["PT"], f["PL"]) == \
        (1, 1, 1, 1, 0, 0) and (f["Ho"], f["Wo"]) == (f["H"], f["W"])


def _smallc_ok(f: dict, t) -> bool:
    from edgec.codegen.ops.conv import smallc_kernel
    return f["kind"] == "conv" and not f["dw"] and smallc_kernel(t, f) is not None


def _split_ok(f: dict, _t) -> bool:
    # the dense GEMM conv drivers: their work items are (column block, output-channel chunk); the Winograd
    # driver's (tile block, output-channel chunk) likewise, grouped or not
    return f["kind"] == "conv" and not f["dw"] and (f["G"] == 1 or f["KH"] * f["KW"] == 1 or _wino_ok(f, _t))


VARIANTS: tuple[Variant, ...] = _build_table()
BY_NAME = {v.name: v for v in VARIANTS}


def families() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for v in VARIANTS:
        out.setdefault(v.family, []).append(v.name)
    return out


# -- layer facts and signatures -------------------------------------------------------------------

def _epilogue_tag(node) -> str:
    ep = node.epilogue
    act = f"+{ep.act}" if ep.act else ""
    if ep.residual is None:
        return act
    return f"+add{act}" if ep.residual_before_act else f"{act}+add"


def facts(node) -> dict | None:
    """What the variant predicates and the signature read from a layer, or None for layers no variant
    covers (ops other than Conv / one-row Gemm-MatMul / QLinearConv, non-float32 Conv...)."""
    if node.op == "Conv":
        from edgec.codegen.ops.conv import geometry
        try:
            g = geometry(node)
        except EdgecError:
            return None
        w2d = node.inputs[1].const.reshape(g["K"], -1).astype(np.float32) if g["G"] == 1 else None
        return dict(g, kind="conv", dw=g["G"] == g["C"] == g["K"], w2d=w2d, dtype="f32")
    if node.op in ("Gemm", "MatMul"):
        from edgec.codegen.ops.sparse import _gemv_weights
        try:
            w2d = _gemv_weights(node)
        except (EdgecError, ValueError, IndexError):
            return None
        if w2d is None:
            return None
        return dict(kind="gemv", M=w2d.shape[0], K=w2d.shape[1], G=1, w2d=w2d, dtype="f32", dw=False)
    if node.op == "QLinearConv":
        x, w, y = node.inputs[0], node.inputs[3], node.outputs[0]
        if w is None or not w.is_const or len(x.shape) != 4:
            return None
        g = int(node.attr("group", 1))
        kh, kw = w.shape[2:]
        s = list(node.attr("strides", [1, 1]))
        d = list(node.attr("dilations", [1, 1]))
        p = list(node.attr("pads", [0, 0, 0, 0]))
        N, C, H, W = x.shape
        K, Ho, Wo = y.shape[1], y.shape[2], y.shape[3]
        w2d = None
        if g == 1 and (kh, kw, *s, *p[:2]) == (1, 1, 1, 1, 0, 0) and (Ho, Wo) == (H, W) and H * W > 1:
            # the 1x1 convs the int8 sparse kernel takes: its weights decide dense or sparse (and the signature)
            from edgec.codegen.ops.quant import _weights_s8
            try:
                w2d = _weights_s8(node, w, node.inputs[5]).reshape(K, C).astype(np.float32)
            except EdgecError:
                w2d = None
        return dict(kind="q8conv", N=N, C=C, H=H, W=W, K=K, Ho=Ho, Wo=Wo, G=g, KH=kh, KW=kw, SH=s[0], SW=s[1],
                    DH=d[0], DW=d[1], PT=p[0], PL=p[1], dw=g == C == K, w2d=w2d, dtype=np.dtype(x.dtype).name,
                    act=node.attr("ec_act"))
    return None


def layer_class(node, f: dict | None = None) -> str | None:
    """Op class with its fused epilogue, no sizes: conv3x3s1+relu, gconv3x3s1, dwconv5x5s2+hard_swish,
    gemv, q8conv1x1s1..."""
    f = f or facts(node)
    if f is None:
        return None
    if f["kind"] == "gemv":
        return "gemv" + _epilogue_tag(node)
    base = "dwconv" if f["dw"] else "gconv" if f["G"] > 1 else "conv"
    if f["kind"] == "q8conv":
        base = "q8" + base
    cls = f"{base}{f['KH']}x{f['KW']}s{f['SH']}" + (f"d{f['DH']}" if f["DH"] > 1 or f["DW"] > 1 else "")
    if f["kind"] == "q8conv":
        return cls + (f"+{f['act']}" if f.get("act") else "")
    return cls + _epilogue_tag(node)


def signature(node, threads: int, f: dict | None = None) -> str | None:
    """Stable, sizes-and-all description of a layer: equal signatures compile to the same code."""
    f = f or facts(node)
    if f is None:
        return None
    cls = layer_class(node, f)
    if f["kind"] == "gemv":
        shape = f"M{f['M']}K{f['K']}"
    else:
        shape = "N{N}C{C}H{H}W{W}K{K}G{G}k{KH}x{KW}s{SH}x{SW}d{DH}x{DW}p{PT}x{PL}o{Ho}x{Wo}".format(**f)
    sig = f"{cls}:{shape}:{f['dtype']}:t{threads}"
    if f["w2d"] is not None:
        z = float(np.mean(f["w2d"] == 0))
        if z >= 0.1:  # pruned weights: the sparse kernels' speed depends on how many zeros
            sig += f":z{round(z * 20) / 20:.2f}"
    return sig


def candidates(node, target, f: dict | None = None) -> list[Variant]:
    """The variants that apply to this layer on this target (registry order)."""
    f = f or facts(node)
    if f is None:
        return []
    return [v for v in VARIANTS if v.applies(f, target)]


def forcings(vs: list[Variant], f: dict, threads: int) -> list[tuple[str, str]]:
    """(name, forced fields) of every candidate a tune measures for a layer: each variant alone and, with
    more than one thread, each kernel variant under each partitioning as well ("winograd-f43+par-rows"):
    the best kernel split one way need not be the best split another, so a record holds both."""
    out = [(v.name, v.forced_str(f)) for v in vs]
    if threads > 1:  # blocking is measured under the default partitioning only (the search would triple)
        pars = [p for p in vs if p.family == "par"]
        out += [(f"{v.name}+{p.name}", f"{v.forced_str(f)};{p.forced_str(f)}")
                for v in vs if v.family not in ("par", "blk") for p in pars]
    return out


def parse_forced(text: str) -> dict:
    """'conv=direct;sparse=dense' -> dict, every field one a record may force, every value valid."""
    out = {}
    for kv in filter(None, text.split(";")):
        k, sep, val = kv.partition("=")
        if not sep or k not in options.PER_LAYER + options.PER_REGION:
            raise EdgecError(f"tuning record forces {kv!r}: not one of "
                             f"{', '.join(options.PER_LAYER + options.PER_REGION)}")
        if k == "wino":  # a region's Winograd tiles per conv shape (codegen/layout.py)
            from edgec.codegen.layout import WINO_SPEC
            if not all(WINO_SPEC.fullmatch(x) for x in val.split(",")):
                raise EdgecError(f"tuning record forces {kv!r}: wino is <C>x<K>x<H>x<W>g<G>:f23 or :f43, "
                                 "comma-separated")
        elif val not in options._CHOICES[k]:
            raise EdgecError(f"tuning record forces {kv!r}: {k} is one of {', '.join(options._CHOICES[k])}")
        out[k] = val
    return out


# -- the dispatcher hook ----------------------------------------------------------------------------

def emit(spec, node, ctx) -> str:
    """Run a layer's emitter; a tuning record for its signature forces its variant for this layer only."""
    opts = options.active()
    f = facts(node) if node.op in ("Conv", "Gemm", "MatMul", "QLinearConv") else None
    sig = signature(node, opts.threads, f) if f is not None else None
    rec = opts.tuned_for(sig) if sig is not None and opts.tuned else None
    costmodel.consulted.set({})
    forced, note = rec if rec is not None else ({}, None)
    forced = {k: v for k, v in forced.items() if k in options.PER_LAYER}
    par = forced.pop("par", opts.par if f is not None else "auto")  # EDGEC_PAR: every covered layer
    if "blk" not in forced and node.attr("ec_blk"):  # its channel-blocked region's record (codegen/layout.py)
        forced["blk"] = node.attr("ec_blk")
    if rec is None and "blk" not in forced and f is not None and opts.learned and opts.blk == "auto" and \
            _blk_ok(f, ctx.target):
        learned = costmodel.learned_blk()  # the blocking this device's records prefer (costmodel.fit_blk)
        if learned != "auto":
            forced["blk"] = learned
    blk = forced.get("blk", opts.blk)  # EDGEC_BLK: every layer, no note
    if blk != opts.blk and _trial(spec, node, ctx, opts.with_(**forced), par) == \
            _trial(spec, node, ctx, opts.with_(**{**forced, "blk": opts.blk}), par):
        blk = forced["blk"] = opts.blk  # the blocking the record forces is already this layer's: same code
    with options.using(opts.with_(**forced)):
        body = _emit_partitioned(spec, node, ctx, par) if par != "auto" else spec.emit(node, ctx)
    if blk != opts.blk:
        ctx.note(algo=f"{ctx.layer.algo}/{blk}", blocking=blk)
    lnote = node.attr("ec_layout_note")  # codegen/layout.py: a region record (or learned constant) chose its layout
    if note is not None or lnote:
        ctx.note(tuned="; ".join(x for x in (note, lnote) if x))
    used = costmodel.consulted.get()
    if used:  # the pick read constants fitted to this device's records: --explain says which
        ctx.note(learned=", ".join(f"{k} {v:g} (default {d:g})" for k, (v, d) in sorted(used.items())))
    if sig is not None:
        ctx.note(signature=sig)
    return body


SERIAL_POOL = "((ec_pool *)0)"  # drivers given no pool run on the calling thread


def _trial(spec, node, ctx, opts, par: str) -> tuple:
    """The layer's code under `opts` emitted into a throwaway context: (body, partition, weights, scratch)."""
    from edgec.codegen.emit import EmitContext

    c = EmitContext(ctx.target, ctx.weights_symbol, ctx.pool)
    c.begin(node)
    with options.using(opts):
        body = _emit_partitioned(spec, node, c, par) if par != "auto" else spec.emit(node, c)
    return body, c.layer.par, bytes(c.weights), c.scratch_sizes


def _emit_partitioned(spec, node, ctx, par: str) -> str:
    """The layer with a forced work partitioning. Emitted into throwaway contexts first, default and forced:
    where the forced one's code is the same (one thread to run on, or a driver with a single split) the layer
    keeps the default's code and algorithm name, so tuning sees it as the same candidate; otherwise the
    algorithm name says how it is partitioned (/serial, /cols, /rows)."""
    from edgec.codegen.emit import EmitContext

    opts = options.active()
    if opts.threads <= 1:
        return spec.emit(node, ctx)

    def trial(mode: str) -> tuple:
        c = EmitContext(ctx.target, ctx.weights_symbol, SERIAL_POOL if mode == "serial" else ctx.pool)
        c.begin(node)
        with options.using(opts.with_(par=mode if mode != "serial" else "auto")):
            body = spec.emit(node, c)
        par = c.layer.par
        if mode == "serial" and par is not None:
            par = (par[0], par[0])  # one chunk: the caller's thread runs it alone
        return body, par, bytes(c.weights), c.scratch_sizes

    if trial(par) == trial("auto"):
        return spec.emit(node, ctx)
    pool = ctx.pool
    if par == "serial":
        ctx.pool = SERIAL_POOL
    try:
        with options.using(opts.with_(par=par if par != "serial" else "auto")):
            body = spec.emit(node, ctx)
    finally:
        ctx.pool = pool
    if par == "serial" and ctx.layer.par is not None:
        ctx.layer.par = (ctx.layer.par[0], ctx.layer.par[0])
    ctx.note(algo=f"{ctx.layer.algo}/{par}", partition=par)
    return body
