"""One registry of op emitters; each op's file registers itself with a decorator.

    @register("Relu", inplace=True)
    def emit(node, ctx) -> str: ...

Flags tell the framework what it may do around the op:
  epilogue  the emitter applies node.epilogue (activation / residual) in its output loop
  inplace   output may share the buffer of input 0 when that input dies here
  view      output is input 0 reinterpreted (Reshape & co): no code, same buffer
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class OpSpec:
    op: str
    emit: Callable
    epilogue: bool = False
    inplace: bool = False
    view: bool = False
    priority: int = 0


_REGISTRY: dict[str, OpSpec] = {}
_loaded = False


def register(*ops: str, epilogue: bool = False, inplace: bool = False, view: bool = False, priority: int = 0):
    """Register `emit(node, ctx) -> str` for ops; a higher priority replaces a fallback."""
    def deco(fn):
        for op in ops:
            old = _REGISTRY.get(op)
            if old is None or priority >= old.priority:
                _REGISTRY[op] = OpSpec(op, fn, epilogue, inplace, view, priority)
        return fn
    return deco


def load_all() -> None:
    """Import every module of codegen/ops so their decorators run."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    from edgec.codegen import ops
    for info in sorted(pkgutil.iter_modules(ops.__path__), key=lambda i: i.name):
        importlib.import_module(f"{ops.__name__}.{info.name}")


def get(op: str) -> OpSpec | None:
    load_all()
    return _REGISTRY.get(op)


def registered_ops() -> frozenset[str]:
    load_all()
    return frozenset(_REGISTRY)
