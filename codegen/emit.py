"""EmitContext: what an op emitter may ask of the framework while it writes one layer's C body.

Pointers to activations are placeholders until the memory planner has run (emission first
tells the planner how much scratch each layer needs); constants land in the weights blob at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from edgec.codegen.ir import Node, Tensor
from edgec.codegen.targets import Target
from edgec.errors import EdgecError

WEIGHT_ALIGN = 64
C_TYPES = {
    "float32": "float", "float64": "double", "float16": "uint16_t", "bfloat16": "uint16_t",
    "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t",
    "int32": "int32_t", "uint32": "uint32_t", "int64": "int64_t", "uint64": "uint64_t", "bool": "uint8_t",
}
_TOKEN = re.compile(r"@@([TSP])(\d+)@@")
POOL_TOKEN = "@@P0@@"  # the pool a layer's drivers get: the printer makes it the model's pool or none


def c_type(dtype) -> str:
    name = np.dtype(dtype).name
    if name not in C_TYPES:
        raise EdgecError(f"dtype {name} is not supported by the C code generator")
    return C_TYPES[name]


@dataclass
class LayerInfo:
    node: Node
    body: str = ""
    algo: str = ""
    details: dict = field(default_factory=dict)
    macs: int = 0
    scratch: list[int] = field(default_factory=list)  # scratch ids requested by this layer
    par: tuple[int, int] | None = None  # (items, grain): see EmitContext.parallel


class EmitContext:
    """Shared across all layers of one model; begin() switches to the next layer."""

    def __init__(self, target: Target, weights_symbol: str = "model_weights", pool_expr: str = "model_pool"):
        self.target = target
        self.weights = bytearray()
        self.weight_offsets: dict[str, list[tuple[int, str, int]]] = {}  # key -> (offset, C type, bytes)
        self.weights_symbol = weights_symbol
        self.pool_expr = pool_expr
        # emitters pass ctx.pool to drivers; for the model's pool (a name) the printer decides per layer whether
        # the layer gets it (ops/_par.py); any other expression (no pool) is used as is
        self.pool = POOL_TOKEN if re.fullmatch(r"\w+", pool_expr) else pool_expr
        self.required: list[str] = []
        self.tensors: list[Tensor] = []
        self._tensor_ids: dict[int, int] = {}
        self.scratch_sizes: list[int] = []
        self.layer: LayerInfo | None = None

    # -- used by emitters ------------------------------------------------------------------
    def ptr(self, t: Tensor) -> str:
        """C pointer expression of a tensor (typed; const-qualified for constants)."""
        if t.is_const:
            return self.weight(f"const:{t.name}", t.const)
        k = self._tensor_ids.get(id(t))
        if k is None:
            k = self._tensor_ids[id(t)] = len(self.tensors)
            self.tensors.append(t)
        return f"(({c_type(t.dtype)} *)@@T{k}@@)"

    def weight(self, key: str, array: np.ndarray) -> str:
        """Store a (pre-packed) array once, 64-byte aligned; returns a typed const pointer expression.

        The key only finds candidates for sharing: keys hold model names (node and tensor names, which ONNX does not
        require to be unique), so an array is shared only with an earlier one of the same key, type and bytes."""
        array = np.ascontiguousarray(array)
        ct = c_type(array.dtype)
        data = array.astype(array.dtype.newbyteorder("<"), copy=False)
        if array.dtype == np.bool_:
            data = array.astype(np.uint8)
        raw = data.tobytes()
        slots = self.weight_offsets.setdefault(key, [])
        for off, sct, n in slots:
            if sct == ct and n == len(raw) and self.weights[off:off + n] == raw:
                break
        else:
            self.weights += b"\0" * ((-len(self.weights)) % WEIGHT_ALIGN)
            off = len(self.weights)
            self.weights += raw
            slots.append((off, ct, len(raw)))
        return f"((const {ct} *)({self.weights_symbol} + {off}))"

    def scratch(self, nbytes: int) -> str:
        """A pointer valid during this layer only (planned into the arena)."""
        sid = len(self.scratch_sizes)
        self.scratch_sizes.append(int(nbytes))
        self.layer.scratch.append(sid)
        return f"((void *)@@S{sid}@@)"

    def require(self, *relpaths: str) -> None:
        """runtime_c files (relative to runtime_c/) this layer needs."""
        for p in relpaths:
            if p not in self.required:
                self.required.append(p)

    def note(self, algo: str | None = None, macs: int | None = None, **details) -> None:
        if algo is not None:
            self.layer.algo = algo
        if macs is not None:
            self.layer.macs = int(macs)
        self.layer.details.update(details)

    def parallel(self, items: int, grain: int = 1) -> None:
        """The layer body computes items [ec_b, ec_e) of `items`, on thread ec_tid (0..threads-1, for
        per-thread scratch slices); the pool hands out chunks of `grain` items. Items must not overlap
        in what they write, and the result must not depend on how they are chunked."""
        self.layer.par = (int(items), max(1, int(grain)))

    # -- used by the framework ------------------------------------------------------------
    def begin(self, node: Node) -> LayerInfo:
        self.layer = LayerInfo(node, algo=node.op.lower())
        self.layer.macs = max((o.size for o in node.outputs if o is not None), default=0)
        return self.layer

    def resolve(self, text: str, tensor_expr, scratch_expr, pool_expr: str | None = None) -> str:
        """Replace placeholders: tensor_expr(Tensor) / scratch_expr(id) give the final C expressions, pool_expr
        the layer's pool (default: the model's)."""
        def sub(m):
            k = int(m.group(2))
            if m.group(1) == "P":
                return self.pool_expr if pool_expr is None else pool_expr
            return tensor_expr(self.tensors[k]) if m.group(1) == "T" else scratch_expr(k)
        return _TOKEN.sub(sub, text)
