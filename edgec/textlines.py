"""A labelled text-direction set for ppocr cls: text lines rendered with Pillow, upright (label 0) or turned
180 degrees (label 1), preprocessed as PaddleOCR's classifier expects.

Lines are words and numbers drawn in several fonts (Pillow's bundled default font at several sizes, and the
DejaVu TrueType fonts of Debian's fonts-dejavu-core where present), dark ink on a light, slightly noisy
background with a tight margin, as a text detector would crop them. PaddleOCR's preprocessing: BGR channel
order (it reads with OpenCV), resize to height 48 keeping the aspect ratio (width capped at 192), scale
(x/255 - 0.5)/0.5, pad on the right with zeros to width 192. Everything is drawn from one seed: the same seed
and fonts give the same arrays.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np

H, W = 48, 192
DEJAVU = Path("/usr/share/fonts/truetype/dejavu")
TTF = ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf", "DejaVuSansMono.ttf",
       "DejaVuSansMono-Bold.ttf")
WORDS = ("total", "invoice", "date", "amount", "paid", "order", "number", "street", "north", "station", "quality",
         "water", "return", "express", "delivery", "kg", "net", "price", "model", "serial", "Berlin", "Madrid",
         "Oslo", "Lisbon", "Tokyo", "BOARD", "EDGE", "CASH", "SALE", "TAX", "receipt", "phone", "email", "open",
         "closed", "monday", "friday", "page", "line", "text", "label", "batch", "lot", "exit", "entry")
SHORT = "0123456789NOSXZHIMWuxsozlpdbqn-+"


def fonts() -> list[tuple[str, object]]:
    """(name, font) pairs: Pillow's default font at three sizes and every DejaVu TTF present."""
    from PIL import ImageFont

    out = [(f"pillow-default-{s}", ImageFont.load_default(size=s)) for s in (22, 28, 34)]
    for name in TTF:
        if (DEJAVU / name).is_file():
            for size in (24, 32):
                out.append((f"{name[:-4]}-{size}", ImageFont.truetype(str(DEJAVU / name), size)))
    return out


def font_key() -> str:
    """Which fonts a set was drawn with (part of a cached set's name)."""
    h = hashlib.sha256()
    for name in TTF:
        p = DEJAVU / name
        h.update(name.encode() + (p.read_bytes() if p.is_file() else b"-"))
    return h.hexdigest()[:12]


def _phrase(rng) -> str:
    kind = rng.integers(0, 6)
    if kind == 0:
        return " ".join(rng.choice(WORDS, size=int(rng.integers(1, 3))))
    if kind == 1:
        return f"{rng.choice(WORDS)} {int(rng.integers(0, 10 ** int(rng.integers(1, 5))))}"
    if kind == 2:
        return f"{int(rng.integers(1, 29)):02d}.{int(rng.integers(1, 13)):02d}.{int(rng.integers(1990, 2030))}"
    if kind == 3:  # short: a few letters or digits, where direction has the least to go on
        return "".join(rng.choice(list(SHORT), size=int(rng.integers(1, 4))))
    if kind == 4:
        return str(rng.choice(WORDS)).upper()
    return f"{rng.integers(0, 1000)}.{rng.integers(0, 100):02d}"


def render_line(text: str, font, rng):
    """One RGB text line cropped around its ink with a small margin; contrast, blur, noise and a small tilt
    vary from line to line."""
    from PIL import Image, ImageDraw, ImageFilter

    left, top, right, bottom = ImageDraw.Draw(Image.new("RGB", (1, 1))).textbbox((0, 0), text, font=font)
    mx, my = int(rng.integers(1, 10)), int(rng.integers(1, 8))
    size = (right - left + 2 * mx, bottom - top + 2 * my)
    bg = rng.integers(150, 256)
    img = Image.new("RGB", size, tuple(int(v) for v in np.clip(bg + rng.integers(-20, 21, 3), 0, 255)))
    ink = rng.integers(0, max(1, bg - 60))
    ImageDraw.Draw(img).text((mx - left, my - top), text, font=font,
                             fill=tuple(int(v) for v in np.clip(ink + rng.integers(-15, 16, 3), 0, 255)))
    img = img.rotate(float(rng.uniform(-4, 4)), resample=Image.BILINEAR, fillcolor=img.getpixel((0, 0)))
    img = img.filter(ImageFilter.GaussianBlur(float(rng.uniform(0, 1.2))))
    arr = np.asarray(img).astype(np.float32) + rng.normal(0, rng.uniform(0, 18), (size[1], size[0], 1))
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def preprocess(img) -> np.ndarray:
    """PaddleOCR's classifier input: [3, 48, 192] float32 (BGR, height 48, aspect kept, zero-padded right)."""
    from PIL import Image

    w, h = img.size
    rw = min(W, int(math.ceil(H * w / float(h))))
    x = np.asarray(img.resize((rw, H), Image.BILINEAR), dtype=np.float32)[:, :, ::-1]  # RGB -> BGR
    x = (x.transpose(2, 0, 1) / 255.0 - 0.5) / 0.5
    out = np.zeros((3, H, W), np.float32)
    out[:, :, :rw] = x
    return out


def text_lines(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """n lines, half of them turned 180 degrees: (x [n,3,48,192] float32, labels [n] int64, font of each)."""
    rng = np.random.default_rng(seed)
    fs = fonts()
    xs, labels, used = np.zeros((n, 3, H, W), np.float32), np.zeros(n, np.int64), []
    for i in range(n):
        name, font = fs[int(rng.integers(0, len(fs)))]
        img = render_line(_phrase(rng), font, rng)
        labels[i] = int(rng.integers(0, 2))
        xs[i] = preprocess(img.rotate(180) if labels[i] else img)
        used.append(name)
    return xs, labels, used
