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
        self.model, self.calib, self.s, self.progress = model, calib, settings, progress
        self.tmp = tempfile.TemporaryDirectory(prefix="edgec-quant-")
        self.cache = Path(self.tmp.name) / "ranges.json"
        self.src = Path(self.tmp.name) / "fp32.onnx"  # a file: onnxruntime rewrites a ModelProto's weights in place
        onnx.save(model, str(self.src))

    def close(self) -> None:
        self.tmp.cleanup()

    def _calibrate(self) -> None:
        """Augment, collect, compute ranges: onnxruntime's calibrator, our settings; cached as JSON."""
        task = self.progress.add_task(f"calibrating ({self.s.method})", total=len(self.calib)) if self.progress else None
        reader = _Reader(self.calib, (lambda: self.progress.advance(task)) if task is not None else None)
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the histogram calibrators print progress
                cal = create_calibrator(self.src, None, augmented_model_path=str(Path(self.tmp.name) / "aug.onnx"),
                                        calibrate_method=METHODS[self.s.method],
                                        extra_options=METHOD_OPTIONS[self.s.method])
                cal.collect_data(reader)
                save_tensors_data(cal.compute_data(), self.cache)
        finally:
            if task is not None:
                self.progress.remove_task(task)

    def __call__(self, keep_float=(), only=None) -> onnx.ModelProto:
        out = Path(self.tmp.name) / "q.onnx"
        excluded = sorted(set(self.s.keep_float) | set(keep_float))
        act = QuantType.QUInt8 if self.s.activations == "uint8" else QuantType.QInt8
        extra = {"WeightSymmetric": True, "ActivationSymmetric": self.s.activations == "int8"}
        level = logging.getLogger().level
        logging.getLogger().setLevel(logging.ERROR)  # onnxruntime logs a pre-processing hint on every call
        try:
            if not self.cache.exists():
                self._calibrate()
            quantize_static(self.src, out, None, quant_format=QuantFormat.QDQ, per_channel=self.s.per_channel,
                            reduce_range=self.s.reduce_range, activation_type=act, weight_type=QuantType.QInt8,
                            nodes_to_exclude=excluded, nodes_to_quantize=list(only) if only else None, calibrate_method=METHODS[self.s.method],
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
