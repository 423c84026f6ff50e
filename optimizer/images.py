"""Image folders as model input: resize, crop, scale, mean/std, channel order and layout.

Preprocessing spec (the `data.preprocess` section of edgec.yaml; every key optional):
  resize: [H, W] exact size, or an int for the shorter side (aspect kept); default: the model's H x W
  crop: [H, W] centre crop (default: the model's H x W when resize is given)
  scale: multiply pixels (0..255) by this first (default 1/255)
  mean, std: per channel, applied after scale (default 0 and 1)
  channel_order: RGB or BGR (default RGB); grayscale when the model has one channel
  layout: NCHW or NHWC (default NCHW)
Images directly in the folder have no labels; images in sub-folders are labelled by sorted sub-folder index.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from edgec.errors import EdgecError
from edgec.model import graph_inputs

IMAGE_EXTS = {".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm", ".gif", ".webp", ".tif", ".tiff"}
KEYS = {"resize", "crop", "scale", "mean", "std", "channel_order", "layout"}


def _target(info, layout: str) -> tuple[int, int, int]:
    if len(info.shape) != 4:
        raise EdgecError(f"image data needs a 4-D model input; {info.name!r} has shape {list(info.shape)}")
    _, a, b, c = info.shape
    return (a, b, c) if layout == "NCHW" else (c, a, b)  # (channels, H, W)


def _pair(v, name):
    if isinstance(v, int):
        return v
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, int) and x > 0 for x in v):
        return tuple(v)
    raise EdgecError(f"preprocess {name}: expected [H, W] or an int, got {v!r}")


def preprocess_image(img, spec: dict, chans: int, h: int, w: int) -> np.ndarray:
    """One PIL image -> float32 array in the model's layout (no batch dim)."""
    from PIL import Image

    img = img.convert("L" if chans == 1 else "RGB")
    resize = _pair(spec["resize"], "resize") if "resize" in spec else (h, w)
    if isinstance(resize, int):
        s = resize / min(img.size)
        resize = (max(1, round(img.size[1] * s)), max(1, round(img.size[0] * s)))
    img = img.resize((resize[1], resize[0]), Image.BILINEAR)
    ch, cw = _pair(spec.get("crop", [h, w]), "crop")
    if ch > img.size[1] or cw > img.size[0]:
        raise EdgecError(f"preprocess crop {ch}x{cw} is larger than the resized image {img.size[1]}x{img.size[0]}")
    top, left = (img.size[1] - ch) // 2, (img.size[0] - cw) // 2
    img = img.crop((left, top, left + cw, top + ch))
    x = np.asarray(img, dtype=np.float32).reshape(ch, cw, chans) * float(spec.get("scale", 1 / 255))
    if chans == 3 and str(spec.get("channel_order", "RGB")).upper() == "BGR":
        x = x[:, :, ::-1]
    x = (x - np.asarray(spec.get("mean", 0.0), np.float32)) / np.asarray(spec.get("std", 1.0), np.float32)
    if (ch, cw) != (h, w):
        raise EdgecError(f"preprocessed images are {ch}x{cw}, the model expects {h}x{w}; fix resize/crop")
    return np.ascontiguousarray(x.transpose(2, 0, 1) if spec.get("layout", "NCHW").upper() == "NCHW" else x)


def _list(path: Path) -> tuple[list[Path], list[int] | None, list[str] | None]:
    subdirs = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    if subdirs:
        files, labels = [], []
        for k, d in enumerate(subdirs):
            for f in sorted(d.iterdir()):
                if f.suffix.lower() in IMAGE_EXTS:
                    files.append(f)
                    labels.append(k)
        return files, labels, [d.name for d in subdirs]
    return sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_EXTS), None, None


def load_images(path: Path, model: onnx.ModelProto, spec: dict, what: str, limit: int | None):
    from edgec.optimizer.data import Dataset

    unknown = set(spec) - KEYS
    if unknown:
        raise EdgecError(f"unknown preprocess key {sorted(unknown)[0]!r}; known: {', '.join(sorted(KEYS))}")
    infos = graph_inputs(model)
    if len(infos) != 1 or np.dtype(infos[0].dtype).kind != "f":
        raise EdgecError(f"{what} data {path}: image folders need a model with one float input")
    layout = str(spec.get("layout", "NCHW")).upper()
    if layout not in ("NCHW", "NHWC"):
        raise EdgecError(f"preprocess layout must be NCHW or NHWC, got {layout!r}")
    chans, h, w = _target(infos[0], layout)
    if chans not in (1, 3):
        raise EdgecError(f"image data needs a 1- or 3-channel input; {infos[0].name!r} has {chans} channels")
    files, labels, classes = _list(path)
    if not files:
        raise EdgecError(f"{what} data folder {path} is empty (no .npy files or images)")
    files = files[:limit] if limit else files
    try:
        from PIL import Image
    except ImportError:
        raise EdgecError("image folders need Pillow: pip install pillow") from None
    feeds = []
    for f in files:
        try:
            with Image.open(f) as img:
                x = preprocess_image(img, spec, chans, h, w)
        except EdgecError:
            raise
        except Exception as e:
            raise EdgecError(f"cannot read image {f}: {' '.join(str(e).split())[:200] or type(e).__name__}") from None
        if not np.isfinite(x).all():
            raise EdgecError(f"preprocessing {f} gave NaN/inf values: check preprocess scale, mean and std (std 0?)")
        feeds.append({infos[0].name: x[None].astype(infos[0].dtype)})
    lab = None if labels is None else np.asarray(labels[: len(feeds)], np.int64)
    return Dataset(feeds, lab, str(path), classes)
