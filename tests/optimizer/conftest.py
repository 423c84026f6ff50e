"""Synthetic text-line images for ppocr cls: real PNGs through the image loader and its preprocessing."""

from __future__ import annotations

import numpy as np
import pytest

WORDS = ["hello", "edge", "42 kg", "TEXT", "model", "onnx", "quant", "Pi 4", "arm64", "zoom"]


@pytest.fixture(scope="session")
def text_images(tmp_path_factory):
    """24 dark-on-light word images, every other one upside down, plus an edgec.yaml with ppocr's preprocessing."""
    pil = pytest.importorskip("PIL", reason="image folders need Pillow")
    from PIL import Image, ImageDraw, ImageFont

    root = tmp_path_factory.mktemp("text")
    folder = root / "images"
    folder.mkdir()
    rng = np.random.default_rng(0)
    font = ImageFont.load_default(size=30)
    for i in range(24):
        img = Image.new("RGB", (192, 48), tuple(int(v) for v in rng.integers(200, 256, 3)))
        ImageDraw.Draw(img).text((int(rng.integers(2, 30)), 6), WORDS[i % len(WORDS)],
                                 fill=tuple(int(v) for v in rng.integers(0, 60, 3)), font=font)
        (img.rotate(180) if i % 2 else img).save(folder / f"{i:03d}.png")
    cfg = root / "edgec.yaml"
    cfg.write_text('data:\n  input_shapes: ["x:1,3,48,192"]\n'
                   "  preprocess: {resize: [48, 192], mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5]}\n")
    del pil
    return folder, cfg


@pytest.fixture(scope="session")
def digits_split(digits_cnn, tmp_path_factory):
    """Calibrate on 120 held-out digits, evaluate on the other 240."""
    d = np.load(digits_cnn.data)
    folder = tmp_path_factory.mktemp("digits")
    np.savez(folder / "calib.npz", input=d["input"][:120])
    np.savez(folder / "eval.npz", input=d["input"][120:], labels=d["labels"][120:])
    return folder / "calib.npz", folder / "eval.npz"
