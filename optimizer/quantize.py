"""int8 post-training quantization to QDQ ONNX, built on onnxruntime.quantization.

Scheme (chosen with the C kernels in mind): weights int8, symmetric, per output channel (zero point 0, so the
kernels need no weight-offset term); activations uint8 asymmetric by default (ReLU outputs use the whole
range) or int8 with `activations: int8`. `reduce_range` keeps weights to 7 bits: only worth it for
u8 x s8 pair products on AVX2 without VNNI (vpmaddubsw saturates int16); edgec's kernels widen before
adding, so it is off by default. Calibration ranges are computed once and cached for the accuracy guard.
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
        if not self.s.bias_correction:
            return self._quantize(self.src, excluded, only)
        if self.biases is None:
            from edgec.optimizer.equalize import bias_corrections

            t0 = time.perf_counter()
            plain = self._quantize(self.src, sorted(self.s.keep_float), None)
            self.biases = bias_corrections(self.model, plain, self._feeds(128))
            self.steps["bias_correction"] = {"layers": len(self.biases), "seconds": round(time.perf_counter() - t0, 3)}
            self.notes.append(f"bias correction: {len(self.biases)} layer biases corrected for weight rounding")
        from edgec.optimizer.equalize import with_biases

        names = {n.name for n in self.model.graph.node}
        rounded = (set(only) if only else names) - set(excluded)  # a layer kept float keeps its own bias
        src = Path(self.tmp.name) / "fp32-corrected.onnx"
        onnx.save(with_biases(self.model, self.biases, rounded), str(src))
        return self._quantize(src, excluded, only)

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
