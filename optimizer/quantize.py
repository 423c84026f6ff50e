"""int8 post-training quantization to QDQ ONNX, built on onnxruntime.quantization.

Scheme (chosen with the C kernels in mind): weights int8, symmetric, per output channel (zero point 0, so the
kernels need no weight-offset term); activations uint8 asymmetric by default (ReLU outputs use the whole
range) or int8 with `activations: int8`. `reduce_range` keeps weights to 7 bits (|w| <= 64): then the
compiled model's GEMMs run the u8 x s8 vpmaddubsw kernel on AVX2 without VNNI (int16 pair sums cannot
saturate), measured 1.4-3.7x the widening kernel. It costs weight precision, so it is off unless asked
for or `edgec optimize --target` names such a CPU (reduce_range_for). Calibration ranges are computed once
and cached for the accuracy guard.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import onnx
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                      quantize_static)

from onnxruntime.quantization.calibrate import create_calibrator, save_tensors_data

from edgec.errors import EdgecError
from edgec.optimizer.data import Dataset

WEIGHTED = ("Conv", "ConvTranspose", "Gemm", "MatMul")
METHODS = {"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
           "entropy": CalibrationMethod.Entropy}
# Each calibrator's settings in one place (onnxruntime's create_calibrator options). quantize_static does not
# pass histogram sizes through, and with its 128/128 default entropy has no threshold left to choose.
METHOD_OPTIONS = {"minmax": {"symmetric": False, "moving_average": False},
                  "percentile": {"num_bins": 2048, "percentile": 99.999, "symmetric": False},
                  "entropy": {"num_bins": 512, "num_quantized_bins": 128, "symmetric": False}}


def reduce_range_for(target: str) -> tuple[bool, str]:
    """Whether int8 weights for this compile target should be 7-bit, and why (for the notes)."""
    from edgec.codegen.ops.qpack import maddubs_target
    from edgec.codegen.targets import get_target

    try:
        t = get_target(target)
    except Exception as e:
        raise EdgecError(f"--target {target}: {' '.join(str(e).split())[:200]}") from None
    if maddubs_target(t):
        return True, f"7-bit weights for {t.name}: AVX2 without VNNI runs u8 x s8 vpmaddubsw GEMMs on them"
    return False, f"8-bit weights for {t.name}: its int8 GEMM is exact on full-range weights"


class _Reader(CalibrationDataReader):
    def __init__(self, data: Dataset, advance=None):
        self.data, self.i, self.advance = data, 0, advance

    def get_next(self):
        if self.i >= len(self.data):
            return None
        self.i += 1
        if self.advance:
            self.advance()
        return self.data.feeds[self.i - 1]

    def __len__(self):
        return len(self.data)


@dataclass
class Int8Settings:
    method: str = "minmax"
    activations: str = "uint8"
    per_channel: bool = True
    reduce_range: bool = False
    keep_float: list = field(default_factory=list)
    # the steps before any fallback (off here: plain onnxruntime quantization; the pipeline turns them on)
    equalize: bool = False         # cross-layer equalization of Conv -> [Relu] -> Conv chains
    range_search: bool = False     # per-tensor activation ranges of least quantization error
    bias_correction: bool = False  # fp32 biases corrected for the mean shift weight rounding causes
    adaround: bool = False         # per-layer weight rounding of least output error (optimizer/adaround.py)
    adaround_seconds: float = 60.0  # its time budget, largest layers first

    def check(self) -> None:
        if self.method not in METHODS:
            raise EdgecError(f"unknown calibration method {self.method!r}; choose {', '.join(METHODS)}")
        if self.activations not in ("uint8", "int8"):
            raise EdgecError(f"activations must be uint8 or int8, got {self.activations!r}")


class Quantizer:
    """Quantizes one model many times (different float-kept layers) with calibration run only once."""

    def __init__(self, model: onnx.ModelProto, calib: Dataset, settings: Int8Settings,
                 progress=None):
        settings.check()
        self.calib, self.s, self.progress = calib, settings, progress
        self.notes: list[str] = []
        self.steps: dict = {}  # what each improvement step did, for the report
        self.tmp = tempfile.TemporaryDirectory(prefix="edgec-quant-")
        self.cache = Path(self.tmp.name) / "ranges.json"
        self.src = Path(self.tmp.name) / "fp32.onnx"  # a file: onnxruntime rewrites a ModelProto's weights in place
        self.biases: dict | None = None  # bias correction: node -> corrected bias, computed on first use
        self.weights: dict | None = None  # adaround: node -> fp32 weight on its chosen int8 grid points
        self.macs: dict = {}  # node -> MACs, to order adaround's time budget (set by the pipeline)
        if settings.equalize:
            from edgec.optimizer.equalize import equalize

            t0 = time.perf_counter()
            model, done = equalize(model, self._feeds(), self.notes)
            self.steps["equalize"] = {"chains": done, "seconds": round(time.perf_counter() - t0, 3)}
        self.model = model
        onnx.save(model, str(self.src))

    def _feeds(self, n: int = 64) -> list[dict]:
        return self.calib.feeds[:n]

    def close(self) -> None:
        self.tmp.cleanup()

    def _calibrate(self) -> None:
        """Augment, collect, compute ranges: onnxruntime's calibrator, our settings; cached as JSON."""
        task = self.progress.add_task(f"calibrating ({self.s.method})", total=len(self.calib)) if self.progress else None
        reader = _Reader(self.calib, (lambda: self.progress.advance(task)) if task is not None else None)
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the histogram calibrators print progress
                method = "minmax" if self.s.range_search else self.s.method
                cal = create_calibrator(self.src, None, augmented_model_path=str(Path(self.tmp.name) / "aug.onnx"),
                                        calibrate_method=METHODS[method], extra_options=METHOD_OPTIONS[method])
                cal.collect_data(reader)
                ranges = cal.compute_data()
            if self.s.range_search:
                from edgec.optimizer.calibrate import search_ranges

                t0 = time.perf_counter()
                ranges, summary = search_ranges(self.model, ranges, self.calib.feeds, self.s.activations == "int8")
                summary["seconds"] = round(time.perf_counter() - t0, 3)
                self.steps["range_search"] = summary
                self.notes.append(f"range search: {summary['clipped']} of {summary['tensors']} activation ranges "
                                  f"clipped below min/max (median error {summary['median_error_reduction']:.2f}x "
                                  "smaller on those)")
            save_tensors_data(ranges, self.cache)
        finally:
            if task is not None:
                self.progress.remove_task(task)

    def __call__(self, keep_float=(), only=None) -> onnx.ModelProto:
        excluded = sorted(set(self.s.keep_float) | set(keep_float))
        if not self.s.bias_correction and not self.s.adaround:
            return self._quantize(self.src, excluded, only)
        self._round_and_correct()
        from edgec.optimizer.adaround import with_weights
        from edgec.optimizer.equalize import with_biases

        names = {n.name for n in self.model.graph.node}
        rounded = (set(only) if only else names) - set(excluded)  # a layer kept float keeps its own weights and bias
        m = with_weights(self.model, self.weights, rounded) if self.weights else self.model
        if self.biases:
            m = with_biases(m, self.biases, rounded)
        src = Path(self.tmp.name) / "fp32-corrected.onnx"
        onnx.save(m, str(src))
        return self._quantize(src, excluded, only)

    def _round_and_correct(self) -> None:
        """Once: adaround's weights (fp32 on the int8 grid, so the quantizer stores exactly the chosen
        integers), then bias correction for the rounding actually used, both against the fp32 weights."""
        if self.s.adaround and self.weights is None:
            from edgec.optimizer.adaround import round_layers

            plain = self._quantize(self.src, sorted(self.s.keep_float), None)
            self.weights, summary = round_layers(self.model, plain, self._feeds(64), self.s.adaround_seconds,
                                                 macs=self.macs)
            self.steps["adaround"] = summary
            late = f"; {len(summary['over_budget'])} layer(s) past the {summary['budget_seconds']:g} s budget kept " \
                   "nearest rounding" if summary["over_budget"] else ""
            self.notes.append(f"adaround: {summary['changed_layers']} of {summary['layers']} layers re-rounded, layer "
                              f"output error {summary['median_error_ratio']:.2f}x nearest rounding's (median, held-out "
                              f"positions) in {summary['seconds']:.1f} s{late}")
        if self.s.bias_correction and self.biases is None:
            from edgec.optimizer.adaround import with_weights
            from edgec.optimizer.equalize import bias_corrections

            t0 = time.perf_counter()
            src = self.src
            if self.weights:
                src = Path(self.tmp.name) / "fp32-rounded.onnx"
                onnx.save(with_weights(self.model, self.weights), str(src))
            rounded = self._quantize(src, sorted(self.s.keep_float), None)
            self.biases = bias_corrections(self.model, rounded, self._feeds(128))
            self.steps["bias_correction"] = {"layers": len(self.biases), "seconds": round(time.perf_counter() - t0, 3)}
            self.notes.append(f"bias correction: {len(self.biases)} layer biases corrected for weight rounding")

    def _quantize(self, src: Path, excluded: list, only) -> onnx.ModelProto:
        out = Path(self.tmp.name) / "q.onnx"
        act = QuantType.QUInt8 if self.s.activations == "uint8" else QuantType.QInt8
        extra = {"WeightSymmetric": True, "ActivationSymmetric": self.s.activations == "int8"}
        level = logging.getLogger().level
        logging.getLogger().setLevel(logging.ERROR)  # onnxruntime logs a pre-processing hint on every call
        try:
            if not self.cache.exists():
                self._calibrate()
            method = METHODS["minmax" if self.s.range_search else self.s.method]
            quantize_static(src, out, None, quant_format=QuantFormat.QDQ, per_channel=self.s.per_channel,
                            reduce_range=self.s.reduce_range, activation_type=act, weight_type=QuantType.QInt8,
                            nodes_to_exclude=excluded, nodes_to_quantize=list(only) if only else None, calibrate_method=method,
                            extra_options=extra, calibration_cache_path=self.cache)
        except EdgecError:
            raise
        except Exception as e:
            raise EdgecError(f"int8 quantization failed: {' '.join(str(e).split())[:300]}") from None
        finally:
            logging.getLogger().setLevel(level)
        q = onnx.load(str(out))
        os.unlink(out)
        return q


def quantized_nodes(q: onnx.ModelProto) -> list[str]:
    """Compute nodes that run on int8 data: their activation input (and weight, for Conv/Gemm/MatMul) come
    from DequantizeLinear."""
    dq = {n.output[0] for n in q.graph.node if n.op_type == "DequantizeLinear"}
    names = []
    for n in q.graph.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear") or not n.input or n.input[0] not in dq:
            continue
        if n.op_type in WEIGHTED and (len(n.input) < 2 or n.input[1] not in dq):
            continue
        names.append(n.name)
    return names
