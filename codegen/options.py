"""CompileOptions: everything besides the model and its input shapes that changes the generated code.

One frozen value that `edgec compile`, `verify`, `deploy` and `bench` pass down. Build caches key on
cache_key(), so a forced kernel family or another tuning database never reuses a project generated without it.
The EDGEC_* switches are read in one place, from_env(), at the entry points (the command line, and library
calls given no options); emitters read the options of the compile in progress through active().
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Iterator, Mapping

from edgec.errors import EdgecError

SPARSE_MODES = ("auto", "dense", "sparse-1x1", "sparse-1x4", "sparse-4x1", "sparse-4x4")
GSPC_MODES = ("auto", "tile", "ow", "mg")
DW_MODES = ("auto", "plane", "cb")
CONV_MODES = ("auto", "direct", "winograd", "winograd-f23", "winograd-f43", "winograd-f63")

# field -> environment variable that fills it
ENV = {"sparse": "EDGEC_SPARSE", "gspc": "EDGEC_GSPC", "dw": "EDGEC_DW", "conv": "EDGEC_CONV",
       "tuning_db": "EDGEC_TUNING_DB"}
_CHOICES = {"sparse": SPARSE_MODES, "gspc": GSPC_MODES, "dw": DW_MODES, "conv": CONV_MODES}


@dataclass(frozen=True)
class CompileOptions:
    target: str = "native"
    threads: int = 1
    sparse: str = "auto"          # sparse kernels: auto (cost model), dense, or one block format everywhere
    gspc: str = "auto"            # grouped convs: force one GSPC row-kernel family where it runs
    dw: str = "auto"              # depthwise convs: force the plane or channel-blocked kernels
    conv: str = "auto"            # 3x3 stride-1 convs: direct, or Winograd (F chosen by the cost model, or forced)
    tuning_db: str | None = None  # JSON of measured per-layer choices, consulted before the cost model

    def __post_init__(self) -> None:
        for name, choices in _CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                raise EdgecError(f"{ENV[name]}={value!r} is not one of {', '.join(choices)}")
        if not isinstance(self.threads, int) or self.threads < 1:
            raise EdgecError(f"--threads must be at least 1, got {self.threads}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **fields) -> "CompileOptions":
        """Options from the EDGEC_* variables (unset or empty: the default), then the given fields."""
        env = os.environ if environ is None else environ
        found = {name: env[var] for name, var in ENV.items() if env.get(var)}
        return cls(**{**found, **fields})

    def with_(self, **fields) -> "CompileOptions":
        return replace(self, **fields)

    def cache_key(self) -> dict:
        """What a cached project depends on: the resolved target ("native" differs per CPU) and the tuning
        database's content, not just its path."""
        from edgec.codegen.targets import get_target

        key = asdict(self)
        key["target"] = get_target(self.target).name
        if self.tuning_db:
            p = Path(self.tuning_db).expanduser()
            key["tuning_db"] = [str(p), hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "missing"]
        return key


_ACTIVE: contextvars.ContextVar[CompileOptions | None] = contextvars.ContextVar("edgec_compile_options",
                                                                               default=None)


def active() -> CompileOptions:
    """The options of the compile in progress (code generation outside one: the environment's)."""
    opts = _ACTIVE.get()
    return opts if opts is not None else CompileOptions.from_env()


@contextlib.contextmanager
def using(opts: CompileOptions) -> Iterator[CompileOptions]:
    token = _ACTIVE.set(opts)
    try:
        yield opts
    finally:
        _ACTIVE.reset(token)
