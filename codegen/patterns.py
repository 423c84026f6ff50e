"""IR pattern rewrites: the decomposed LayerNorm some exporters emit becomes one LayerNormalization.

    m = ReduceMean(x) ; d = Sub(x, m) ; v = ReduceMean(Pow(d, 2)) ; n = Div(d, Sqrt(Add(v, eps)))
    [; n = Mul(n, gamma)] [; n = Add(n, beta)]      (reductions over the trailing axes, keepdims)
"""

from __future__ import annotations

import numpy as np

from edgec.codegen.ir import Graph, Node, Tensor


def _axes(n: Node) -> list[int] | None:
    from edgec.codegen.ops.reduce import reduce_axes
    if n.op != "ReduceMean" or not n.attr("keepdims", 1):
        return None
    try:
        return reduce_axes(n)
    except Exception:
        return None


def _const_val(t: Tensor | None) -> float | None:
    if t is None or not t.is_const or t.size != 1:
        return None
    return float(t.const.reshape(-1)[0])


class _Match:
    def __init__(self, g: Graph):
        self.g = g
        self.prod = g.producers()
        self.users = g.consumers()

    def src(self, t: Tensor, op: str) -> Node | None:
        n = self.prod.get(id(t))
        return n if n is not None and n.op == op else None

    def private(self, t: Tensor, uses: int = 1) -> bool:
        return len(self.users.get(id(t), [])) == uses and not any(t is o for o in self.g.outputs)


def _layernorm_at(m: _Match, div: Node):
    """The nodes of a decomposed LayerNorm ending at div, with x, axis and eps; else None."""
    if div.op != "Div" or len(div.inputs) != 2:
        return None
    d, s = div.inputs
    sqrt = m.src(s, "Sqrt")
    add = sqrt and m.src(sqrt.inputs[0], "Add")
    sub = m.src(d, "Sub")
    if not (sqrt and add and sub):
        return None
    eps = _const_val(add.inputs[1]) if _const_val(add.inputs[1]) is not None else _const_val(add.inputs[0])
    var_t = add.inputs[0] if _const_val(add.inputs[1]) is not None else add.inputs[1]
    rvar = m.src(var_t, "ReduceMean")
    pow_ = rvar and m.src(rvar.inputs[0], "Pow")
    x = sub.inputs[0]
    rmean = m.src(sub.inputs[1], "ReduceMean")
    if not (eps is not None and rvar and pow_ and rmean) or pow_.inputs[0] is not d or _const_val(pow_.inputs[1]) != 2.0:
        return None
    if rmean.inputs[0] is not x:
        return None
    ax1, ax2, r = _axes(rmean), _axes(rvar), len(x.shape)
    if not ax1 or ax1 != ax2 or ax1 != list(range(ax1[0], r)):
        return None
    if not (m.private(d, 2) and all(m.private(t) for t in (s, add.outputs[0], var_t, pow_.outputs[0], sub.inputs[1]))):
        return None
    return [rmean, sub, pow_, rvar, add, sqrt, div], x, ax1[0], eps


def _affine(m: _Match, y: Tensor, op: str, norm_shape) -> tuple[Node, Tensor] | None:
    us = m.users.get(id(y), [])
    if len(us) != 1 or not m.private(y) or us[0].op != op:
        return None
    n = us[0]
    other = n.inputs[1] if n.inputs[0] is y else n.inputs[0]
    if not other.is_const or other.dtype != np.float32 or n.outputs[0].shape != y.shape:
        return None
    try:
        val = np.broadcast_to(other.const, norm_shape) if other.const.ndim <= len(norm_shape) else None
    except ValueError:
        return None
    return (n, val) if val is not None else None


def _replace(g: Graph, top: Node, chain: list[Node], new: Node) -> bool:
    """Put `new` where `top` was and drop the rest of the matched chain; True so callers can loop."""
    drop = {id(n) for n in chain}
    g.nodes[g.nodes.index(top)] = new
    g.nodes = [n for n in g.nodes if id(n) not in drop]
    return True


def _fixpoint(g: Graph, rewrite_once) -> Graph:
    """Apply a one-match rewrite until nothing matches (a loop: models can hold thousands of matches)."""
    while rewrite_once(g):
        pass
    return g


def _merged(nodes: list[Node]) -> list[str]:
    return [nm for n in nodes for nm in n.onnx_names]


def fuse_layernorm(g: Graph) -> Graph:
    return _fixpoint(g, _layernorm_once)


def _layernorm_once(g: Graph) -> bool:
    m = _Match(g)
    for div in list(g.nodes):
        found = _layernorm_at(m, div)
        if not found:
            continue
        nodes, x, axis, eps = found
        norm_shape = x.shape[axis:]
        y = div.outputs[0]
        scale, bias = np.ones(norm_shape, np.float32), np.zeros(norm_shape, np.float32)
        for op in ("Mul", "Add"):
            hit = _affine(m, y, op, norm_shape)
            if hit:
                n, val = hit
                if op == "Mul":
                    scale = val.astype(np.float32)
                else:
                    bias = val.astype(np.float32)
                nodes.append(n)
                y = n.outputs[0]
        ln = Node(div.name + "__layernorm", "LayerNormalization",
                  [x, Tensor(y.name + "__scale", norm_shape, np.float32, scale),
                   Tensor(y.name + "__bias", norm_shape, np.float32, bias)], [y],
                  {"axis": axis, "epsilon": eps}, onnx_names=_merged(nodes))
        return _replace(g, nodes[-1], nodes, ln)
    return False


def fuse_hardswish(g: Graph) -> Graph:
    """x * Clip(x + 3, 0, 6) / 6 (Div by 6 or Mul by 1/6, in either order) -> HardSwish(x)."""
    return _fixpoint(g, _hardswish_once)


def _hardswish_once(g: Graph) -> bool:
    from edgec.codegen.fuse import activation_of

    m = _Match(g)
    for top in list(g.nodes):
        found = _scaled_product(m, top, activation_of)
        if found:
            x, chain = found
            hs = Node(top.name + "__hardswish", "HardSwish", [x], [top.outputs[0]], onnx_names=_merged(chain + [top]))
            return _replace(g, top, chain, hs)
    for mul in list(g.nodes):
        if mul.op != "Mul" or len(mul.inputs) != 2:
            continue
        for x, other in ((mul.inputs[0], mul.inputs[1]), (mul.inputs[1], mul.inputs[0])):
            chain = _relu6_over_6(m, x, other, activation_of)
            if chain is not None:
                hs = Node(mul.name + "__hardswish", "HardSwish", [x], [mul.outputs[0]],
                          onnx_names=_merged(chain + [mul]))
                return _replace(g, mul, chain, hs)
    return False


def _is_sixth(n: Node) -> bool:
    k = _const_val(n.inputs[1]) if len(n.inputs) == 2 else None
    return (n.op == "Div" and k == 6.0) or (n.op == "Mul" and k is not None and abs(k - 1 / 6) < 1e-6)


def _relu6(m: _Match, x: Tensor, t: Tensor, activation_of) -> list[Node] | None:
    """Nodes computing t = Clip(x + 3, 0, 6), each result used once; else None."""
    clip = m.src(t, "Clip")
    if clip is None or not m.private(t) or activation_of(clip) != ("clip", {"min": 0.0, "max": 6.0}):
        return None
    add = m.src(clip.inputs[0], "Add")
    if add is None or not m.private(add.outputs[0]) or len(add.inputs) != 2:
        return None
    a, b = add.inputs
    if not ((a is x and _const_val(b) == 3.0) or (b is x and _const_val(a) == 3.0)):
        return None
    return [add, clip]


def _scaled_product(m: _Match, top: Node, activation_of):
    """top = (x * Clip(x + 3, 0, 6)) / 6: returns (x, nodes before top)."""
    if not _is_sixth(top):
        return None
    mul = m.src(top.inputs[0], "Mul")
    if mul is None or not m.private(mul.outputs[0]) or len(mul.inputs) != 2:
        return None
    for x, other in ((mul.inputs[0], mul.inputs[1]), (mul.inputs[1], mul.inputs[0])):
        chain = _relu6(m, x, other, activation_of)
        if chain:
            return x, chain + [mul]
    return None


def _relu6_over_6(m: _Match, x: Tensor, t: Tensor, activation_of) -> list[Node] | None:
    """Nodes computing t = Clip(x + 3, 0, 6) / 6 from x, each result used once; else None."""
    scale = m.prod.get(id(t))
    if scale is None or not m.private(t):
        return None
    k = _const_val(scale.inputs[1]) if len(scale.inputs) == 2 else None
    if not ((scale.op == "Div" and k == 6.0) or (scale.op == "Mul" and k is not None and abs(k - 1 / 6) < 1e-6)):
        return None
    clip = m.src(scale.inputs[0], "Clip")
    if clip is None or not m.private(clip.outputs[0]) or activation_of(clip) != ("clip", {"min": 0.0, "max": 6.0}):
        return None
    add = m.src(clip.inputs[0], "Add")
    if add is None or not m.private(add.outputs[0]) or len(add.inputs) != 2:
        return None
    a, b = add.inputs
    if not ((a is x and _const_val(b) == 3.0) or (b is x and _const_val(a) == 3.0)):
        return None
    return [add, clip, scale]


def fuse_gelu(g: Graph) -> Graph:
    """x * (1 + Erf(x / sqrt(2))) * 0.5 (the exact GELU exporters emit before opset 20) -> Gelu(x)."""
    return _fixpoint(g, _gelu_once)


def _gelu_once(g: Graph) -> bool:
    m = _Match(g)
    for top in list(g.nodes):
        found = _gelu_at(m, top)
        if found:
            x, chain = found
            ge = Node(top.name + "__gelu", "Gelu", [x], [top.outputs[0]], onnx_names=_merged(chain + [top]))
            return _replace(g, top, chain, ge)
    return False


def _other(n: Node, t: Tensor) -> Tensor | None:
    if len(n.inputs) != 2:
        return None
    return n.inputs[1] if n.inputs[0] is t else (n.inputs[0] if n.inputs[1] is t else None)


def _const_operand(n: Node) -> tuple[Tensor, float] | None:
    """(the other input, value) when exactly one input of a binary node is a scalar constant."""
    if len(n.inputs) != 2:
        return None
    a, b = n.inputs
    if _const_val(b) is not None and not a.is_const:
        return a, _const_val(b)
    if _const_val(a) is not None and not b.is_const:
        return b, _const_val(a)
    return None


def _gelu_at(m: _Match, top: Node):
    half = _const_operand(top) if top.op == "Mul" else None
    if not half or abs(half[1] - 0.5) > 1e-6:
        return None
    mul = m.src(half[0], "Mul")
    if mul is None or not m.private(mul.outputs[0]):
        return None
    for x in mul.inputs:
        add_t = _other(mul, x)
        add = add_t is not None and m.src(add_t, "Add")
        one = add and _const_operand(add)
        erf = one and abs(one[1] - 1.0) < 1e-6 and m.src(one[0], "Erf")
        scaled = erf and _const_operand(m.prod[id(erf.inputs[0])]) if erf and id(erf.inputs[0]) in m.prod else None
        if not scaled or scaled[0] is not x:
            continue
        sn = m.prod[id(erf.inputs[0])]
        k = scaled[1] if sn.op == "Mul" else (1 / scaled[1] if sn.op == "Div" and sn.inputs[1].is_const else None)
        if k is None or abs(k - 0.7071067811865476) > 1e-4:
            continue
        chain = [sn, erf, add, mul]
        if all(m.private(n.outputs[0]) for n in chain):
            return x, chain
    return None
