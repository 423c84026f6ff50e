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
GSPC_MODES = ("auto", "tile", "ow", "mg", "gemm")
DW_MODES = ("auto", "plane", "cb")
CONV_MODES = ("auto", "direct", "winograd", "winograd-f23", "winograd-f43", "winograd-f63")
Q8CONV_MODES = ("auto", "q8-gemm", "q8-cgemm", "q8-gspc", "q8-dwconv")
LAYOUT_MODES = ("auto", "nchw", "nchwc")  # codegen/layout.py
# work partitioning: serial (one thread for the layer), or split only over column / tile blocks (cols) or
# over output-channel chunks (rows) where the layer's driver offers both
PAR_MODES = ("auto", "serial", "cols", "rows")
# 1x1 stride-1 unpadded convs: B panels packed (each copy overlapping the previous panel's GEMM) or the
# input rows read in place
GEMM1X1_MODES = ("auto", "pack", "inplace")
# dense convs with at most 4 input channels (stems): the direct kernel or the GEMM path
SMALLC_MODES = ("auto", "direct", "gemm")
# cache blocking of the dense GEMM conv drivers (and Gemm/MatMul): the column block (NC; output channels per item
# on the transposed path) or the K block (KC) scaled from the cost model's values, which follow the target's cache
# sizes (codegen/ops/conv.py blocking())
BLK_MODES = ("auto", "nc-half", "nc-double", "kc-half", "kc-whole")

# field -> environment variable that fills it
ENV = {"sparse": "EDGEC_SPARSE", "gspc": "EDGEC_GSPC", "dw": "EDGEC_DW", "conv": "EDGEC_CONV",
       "q8conv": "EDGEC_Q8CONV", "par": "EDGEC_PAR", "gemm1x1": "EDGEC_GEMM1X1", "smallc": "EDGEC_SMALLC", "blk": "EDGEC_BLK",
       "layout": "EDGEC_LAYOUT", "tuning_db": "EDGEC_TUNING_DB",
       "tuning": "EDGEC_TUNING"}
_CHOICES = {"sparse": SPARSE_MODES, "gspc": GSPC_MODES, "dw": DW_MODES, "conv": CONV_MODES,
            "q8conv": Q8CONV_MODES, "par": PAR_MODES, "gemm1x1": GEMM1X1_MODES, "smallc": SMALLC_MODES, "blk": BLK_MODES,
            "layout": LAYOUT_MODES, "tuning": ("auto", "off")}
# the fields a tuning record may force for one layer (codegen/variants.py)
PER_LAYER = ("sparse", "gspc", "dw", "conv", "q8conv", "par", "gemm1x1", "smallc", "blk")
# the fields a tuning record of a channel-blocked region may force (codegen/layout.py region_signature)
PER_REGION = ("layout", "wino")  # wino: <shape>:f23|f43,... (layout.wino_forced)


@dataclass(frozen=True)
class CompileOptions:
    target: str = "native"
    threads: int = 1
    sparse: str = "auto"          # sparse kernels: auto (cost model), dense, or one block format everywhere
    gspc: str = "auto"            # grouped convs: force one GSPC row-kernel family where it runs, or a GEMM per group
    dw: str = "auto"              # depthwise convs: force the plane or channel-blocked kernels
    conv: str = "auto"            # 3x3 stride-1 convs: direct, or Winograd (F chosen by the cost model, or forced)
    q8conv: str = "auto"          # int8 convs: force the GEMM, GSPC or depthwise path where it runs
    layout: str = "auto"          # activations: NCHW, channel-blocked NCHWc regions, or the pass's choice
    par: str = "auto"             # covered layers (codegen/variants.py): one thread, or one split axis
    gemm1x1: str = "auto"         # 1x1 stride-1 convs: packed B panels (auto) or the input read in place
    smallc: str = "auto"          # convs with <= 4 input channels: direct kernel or GEMM, or the cost model's pick
    blk: str = "auto"             # GEMM-path cache blocking: the cost model's NC / KC, or one of them scaled
    tuning_db: str | None = None  # JSON of measured per-layer choices, consulted before the cost model
    tuning: str = "auto"          # auto: apply the device's tuning records (filled into `tuned`); off: ignore them
    # tuning records that apply: (layer signature, forced fields as "k=v;k=v", explain text), sorted
    tuned: tuple = ()
    # the cost model's constants fitted to this device's tuning records: (name, value) pairs, sorted
    learned: tuple = ()

    def __post_init__(self) -> None:
        for name, choices in _CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                raise EdgecError(f"{ENV[name]}={value!r} is not one of {', '.join(choices)}")
        if not isinstance(self.threads, int) or self.threads < 1:
            raise EdgecError(f"--threads must be at least 1, got {self.threads}")
        tuned = tuple(sorted(tuple(str(x) for x in r) for r in self.tuned))
        if any(len(r) != 3 for r in tuned):
            raise EdgecError("tuning records must be (signature, forced, note) triples")
        object.__setattr__(self, "tuned", tuned)
        if self.tuning == "off" and tuned:
            object.__setattr__(self, "tuned", ())
        learned = tuple(sorted((str(k), float(v)) for k, v in self.learned))
        object.__setattr__(self, "learned", () if self.tuning == "off" else learned)

    def tuned_for(self, signature: str) -> tuple[dict, str] | None:
        """(forced fields, explain text) of the tuning record for a layer signature, if one applies."""
        for sig, forced, note in self.tuned:
            if sig == signature:
                return dict(kv.split("=", 1) for kv in forced.split(";") if kv), note
        return None

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
        t = get_target(self.target)
        key["target"] = t.name
        key["caches"] = [t.l1d_bytes, t.l2_bytes]  # native blocking follows this machine's caches
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
