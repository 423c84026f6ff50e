"""The lowered graph the emitters see: static shapes, constants resolved, epilogues fused.

A Tensor is either an activation (const is None) placed by the memory planner, or a
constant whose bytes go into the weights blob. Tensors compare by identity so the
planner can key on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

ACTIVATIONS = ("relu", "clip", "leaky_relu", "sigmoid", "hard_sigmoid", "hard_swish", "silu", "tanh", "gelu")


@dataclass(eq=False)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    const: np.ndarray | None = None
    # 0: NCHW (or any unblocked layout); c > 0: channel-blocked NCHWc, stored [N][ceil(C/c)][H][W][c] with the
    # channels past C padded (codegen/layout.py); shape stays the logical one. Int8 activations (1-byte elements)
    # block by 4 with the pixels of a plane padded to a multiple of 16 (codegen/q8layout.py; q8-gemm.h)
    block: int = 0

    def __post_init__(self):
        self.shape = tuple(int(d) for d in self.shape)
        self.dtype = np.dtype(self.dtype)
        if self.const is not None:
            self.const = np.ascontiguousarray(self.const, dtype=self.dtype).reshape(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def stored_size(self) -> int:
        """Elements the tensor occupies: its size, or with the channels padded to whole blocks."""
        if not self.block:
            return self.size
        c = self.shape[1]
        if self.dtype.itemsize == 1:
            hw = self.size // max(self.shape[0] * c, 1)
            return self.shape[0] * -(-c // self.block) * self.block * -(-hw // 16) * 16
        return self.size // max(c, 1) * (-(-c // self.block) * self.block)

    @property
    def nbytes(self) -> int:
        return self.stored_size * self.dtype.itemsize

    @property
    def layout(self) -> str:
        return f"nchw{self.block}c" if self.block else "nchw"

    @property
    def is_const(self) -> bool:
        return self.const is not None

    def __repr__(self) -> str:
        kind = "const " if self.is_const else ""
        return f"Tensor({kind}{self.name!r}, {self.shape}, {self.dtype.name})"


@dataclass
class Epilogue:
    residual: Tensor | None = None
    residual_before_act: bool = True
    act: str | None = None
    act_params: dict = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.residual is None and self.act is None


@dataclass(eq=False)
class Node:
    name: str
    op: str
    inputs: list[Tensor | None]
    outputs: list[Tensor]
    attrs: dict = field(default_factory=dict)
    epilogue: Epilogue = field(default_factory=Epilogue)
    onnx_names: list[str] = field(default_factory=list)  # every ONNX node folded into this one

    def input(self, i: int) -> Tensor | None:
        return self.inputs[i] if i < len(self.inputs) else None

    def attr(self, key: str, default=None):
        return self.attrs.get(key, default)

    def operands(self) -> list[Tensor]:
        """Every tensor read while this node runs, the fused residual included."""
        ts = [t for t in self.inputs if t is not None]
        if self.epilogue.residual is not None:
            ts.append(self.epilogue.residual)
        return ts


@dataclass
class Graph:
    name: str
    inputs: list[Tensor]
    outputs: list[Tensor]
    nodes: list[Node]
    source: dict = field(default_factory=dict)  # provenance: path, sha256, opset

    def consumers(self) -> dict[int, list[Node]]:
        users: dict[int, list[Node]] = {}
        for n in self.nodes:
            for t in n.operands():
                users.setdefault(id(t), []).append(n)
        return users

    def producers(self) -> dict[int, Node]:
        return {id(t): n for n in self.nodes for t in n.outputs}

    def is_io(self, t: Tensor) -> bool:
        return any(t is x for x in self.inputs) or any(t is x for x in self.outputs)
