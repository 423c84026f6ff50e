"""edgec.yaml: the whole pipeline in one file; command-line flags override it.

    optimize:
      fuse: true                 # graph passes (false = --no-fuse)
      disable_passes: [cse]      # any pass name from the report
      prune: [channel:0.3]       # unstructured:S, block:RxC:S, nm:N:M, channel:R
      prune_scope: layer         # or global (unstructured only)
      prune_layers: {conv3: 0.5} # per-layer sparsity / ratio
      prune_skip: [conv1]
      prune_first_last: false
      prune_compensate: true     # channel pruning: fold removed channels' means into biases (needs calib)
      sensitivity: false
      quantize: int8             # or fp16
      calib_method: minmax       # percentile, entropy
      calib_samples: 256
      activations: uint8         # or int8
      per_channel: true
      reduce_range: false
      keep_float: []             # nodes never quantized
      max_accuracy_drop: 1.0     # or min_cosine: 0.99
      max_float_layers: 3        # the guard may keep at most this many layers float
      fix_shapes: false          # true: the output's inputs/outputs get the analysis shapes (else kept as declared)
      equalize: true             # int8: cross-layer equalization of Conv -> [Relu] -> Conv chains (--no-equalize)
      range_search: true         # int8: per-tensor activation ranges of least error (--no-range-search)
      bias_correction: true      # int8: biases corrected for weight rounding (--no-bias-correction)
      adaround: false            # int8: per-layer weight rounding of least output error (--adaround)
      adaround_seconds: 60       # its time budget (largest layers first; the rest keep nearest rounding)
      target: x86_64-avx2        # int8: the compile target its predicted speed-up is for (default native)
      guard: true                # int8 below the fidelity floor falls back to float layers (false = --no-guard)
      floor_cosine: 0.99         # the floor: mean cosine vs fp32 on held-out samples ...
      floor_agreement: 0.95      # ... and argmax agreement with fp32
    data:
      calib: calib.npz
      eval: eval.npz
      input_shapes: ["x:1,3,48,192"]
      preprocess: {resize: [48, 192], mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5]}

Other top-level sections (target, device) belong to other commands and are carried over untouched.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import yaml

from edgec import yamlfile
from edgec.errors import EdgecError


@dataclass
class OptimizeConfig:
    fuse: bool = True
    disable_passes: list = field(default_factory=list)
    prune: list = field(default_factory=list)
    prune_scope: str = "layer"
    prune_layers: dict = field(default_factory=dict)
    prune_skip: list = field(default_factory=list)
    prune_first_last: bool = False
    prune_compensate: bool = True
    sensitivity: bool = False
    quantize: str | None = None
    calib_method: str = "minmax"
    calib_samples: int = 256
    activations: str = "uint8"
    per_channel: bool = True
    reduce_range: bool = False
    keep_float: list = field(default_factory=list)
    max_float_layers: int | None = None
    max_accuracy_drop: float | None = None
    min_cosine: float | None = None
    fix_shapes: bool = False
    equalize: bool = True
    range_search: bool = True
    bias_correction: bool = True
    adaround: bool = False  # opt-in: no top-1 gain measured for its 30-50 s (docs/benchmarks.md)
    adaround_seconds: float = 60.0
    target: str | None = None
    guard: bool = True
    floor_cosine: float = 0.99
    floor_agreement: float = 0.95
    calib: str | None = None
    eval: str | None = None
    input_shapes: list = field(default_factory=list)
    preprocess: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)  # other sections, saved back as they were

    def check(self) -> None:
        self._check_types()
        if self.quantize not in (None, "int8", "fp16"):
            raise EdgecError(f"--quantize must be int8 or fp16, got {self.quantize!r}")
        if self.prune_scope not in ("layer", "global"):
            raise EdgecError(f"prune_scope must be layer or global, got {self.prune_scope!r}")
        if self.quantize == "int8" and not self.calib:
            raise EdgecError("--quantize int8 needs calibration data: --calib DATA (.npz, .npy folder or image folder)")
        if self.max_float_layers is not None and self.max_float_layers < 0:
            raise EdgecError("max_float_layers must be >= 0")
        if not -1 <= self.floor_cosine <= 1 or not 0 <= self.floor_agreement <= 1:
            raise EdgecError(f"floor_cosine must be in [-1, 1] and floor_agreement in [0, 1], got "
                             f"{self.floor_cosine!r} and {self.floor_agreement!r}")
        if self.adaround_seconds < 0:
            raise EdgecError(f"adaround_seconds must be >= 0, got {self.adaround_seconds!r}")
        if self.calib_samples < 1:
            raise EdgecError("calib_samples must be at least 1")
        for name, value in self.prune_layers.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 1:
                raise EdgecError(f"prune_layers.{name}: sparsity must be in [0, 1), got {value!r}")
        # specs and shapes are checked here, before the model is loaded and measured
        from edgec.model import parse_input_shapes
        from edgec.optimizer.prune import parse_spec

        for spec in self.prune:
            parse_spec(spec)
        parse_input_shapes(self.input_shapes)

    def _check_types(self) -> None:
        check_types({f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}, "")

    def to_yaml(self, model: str, output: str) -> str:
        d = asdict(self)
        extra = d.pop("extra")
        data = {k: d.pop(k) for k in DATA_KEYS}
        doc = {**extra, "model": model, "output": output, "optimize": d, "data": data}
        return yaml.safe_dump(doc, sort_keys=False)


DATA_KEYS = ("calib", "eval", "input_shapes", "preprocess")
_NAMES = {f.name for f in fields(OptimizeConfig)} - {"extra"}
# the check each setting gets, from its annotation ("str | None" -> str); data paths must not be empty
_BY_ANNOTATION = {"bool": "bool", "int": "int", "float": "float", "str": "str", "list": "strs", "dict": "map"}
_KINDS = {f.name: _BY_ANNOTATION.get(str(f.type).split("|")[0].split("[")[0].strip())
          for f in fields(OptimizeConfig) if f.name != "extra"}
_KINDS.update(calib="path", eval="path")
_OK = {"bool": lambda v: isinstance(v, bool),
       "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
       "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
       "str": lambda v: isinstance(v, str),
       "path": lambda v: isinstance(v, str) and v != "",
       "strs": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
       "map": lambda v: isinstance(v, dict) and all(isinstance(k, str) for k in v)}
_NULLABLE = {f.name for f in fields(OptimizeConfig) if f.default is None}


def check_types(values: dict, where: str) -> None:
    """Every setting has the type its flag would give it (YAML happily yields "x" where a number belongs)."""
    for name, value in values.items():
        kind = _KINDS.get(name)
        if kind is None or value is None and name in _NULLABLE:
            continue
        if not _OK[kind](value):
            raise EdgecError(f"{where}setting {name}: expected {_KIND_TEXT[kind]}, got {value!r}"[:300])


_KIND_TEXT = {"bool": "true or false", "int": "a whole number", "float": "a number", "str": "a string",
              "path": "a file or folder path", "strs": "a list of strings", "map": "a mapping"}


def load_config(path: str | Path | None, overrides: dict) -> OptimizeConfig:
    """Read edgec.yaml (if given), then apply flags that were set (None means not given)."""
    doc: dict = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise EdgecError(f"config file not found: {p}")
        doc = yamlfile.read(p)
        if doc is None:
            raise EdgecError(f"{p} is empty; expected 'optimize:' and 'data:' sections (or leave out --config)")
        if not isinstance(doc, dict):
            raise EdgecError(f"{p}: expected a mapping with 'optimize:' and 'data:' sections")
    section: dict = {}
    for key in ("optimize", "data"):
        part = doc.get(key)
        if part is None:
            continue
        if not isinstance(part, dict):
            raise EdgecError(f"{path}: '{key}:' must be a mapping of settings, got {type(part).__name__}")
        section.update(part)
    unknown = sorted(set(map(str, section)) - _NAMES)
    if unknown:
        raise EdgecError(f"{path}: unknown setting {unknown[0]!r}; known: {', '.join(sorted(_NAMES))}")
    check_types(section, f"{path}: ")
    extra = {k: v for k, v in doc.items() if k not in ("optimize", "data", "model", "output")}
    for k, v in overrides.items():
        if v is not None and v != [] and v != ():
            section[k] = list(v) if isinstance(v, tuple) else v
    try:
        cfg = OptimizeConfig(**section, extra=extra)
    except TypeError as e:
        raise EdgecError(f"bad optimize settings: {e}") from None
    cfg.check()
    return cfg
