"""Real test models, fetched or trained on first use and cached by content hash.

- ppocr_cls / ppocr_det / ppocr_rec: PaddleOCR's trained text-direction classifier, PP-OCRv4 text detector
  (DBNet, fully convolutional) and PP-OCRv4 recogniser (SVTR-style: conv stem, attention blocks, CTC head),
  read out of the rapidocr-onnxruntime wheel on PyPI.
- onnx_light / node_cases: architecture fixtures and per-op conformance cases shipped in the onnx wheel.
- digits_cnn: a small CNN trained here with torch on scikit-learn's bundled digits, with its held-out split.
- text_lines: a labelled text-direction set for ppocr_cls, rendered here with Pillow (edgec/textlines.py).

Everything lands under cache_dir() (EDGEC_CACHE_DIR, else $XDG_CACHE_HOME/edgec, else ~/.cache/edgec), so reruns
are offline. `python -m edgec.zoo NAME` prints the path of a model (used by the Makefile and benchmarks/).
"""

from __future__ import annotations

import hashlib
import inspect
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from edgec.errors import EdgecError
from edgec.files import cache_lock, sha256_file, write_bytes_atomic

PPOCR_WHEEL = "rapidocr-onnxruntime==1.4.4"
PPOCR_MEMBER = "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx"
PPOCR_SHA256 = "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c"
# wheel member -> sha256 of every model read out of PPOCR_WHEEL
PPOCR_MODELS = {
    "cls": (PPOCR_MEMBER, PPOCR_SHA256),
    "det": ("rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
            "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9"),
    "rec": ("rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
            "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b"),
}


def cache_dir() -> Path:
    env = os.environ.get("EDGEC_CACHE_DIR")
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "edgec"
    base.mkdir(parents=True, exist_ok=True)
    return base


def ppocr_cls() -> Path:
    """The trained PaddleOCR text-direction classifier (input x: [N,3,48,192], opset 11)."""
    return _ppocr("cls")


def ppocr_det() -> Path:
    """PP-OCRv4 text detection (input x: [N,3,H,W], H and W multiples of 32; output a [N,1,H,W] probability map)."""
    return _ppocr("det")


def ppocr_rec() -> Path:
    """PP-OCRv4 Chinese text recognition (input x: [N,3,48,W]; output [N,W//8,6625] CTC probabilities)."""
    return _ppocr("rec")


def _ppocr(kind: str) -> Path:
    member, sha = PPOCR_MODELS[kind]
    dest = cache_dir() / "models" / sha[:16] / f"ppocr_{kind}.onnx"
    if dest.exists() and sha256_file(dest) == sha:
        return dest
    with cache_lock(dest):
        if not (dest.exists() and sha256_file(dest) == sha):
            _download_ppocr(member, sha, dest)
    return dest


def _download_ppocr(member: str, sha: str, dest: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp, PPOCR_WHEEL]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise EdgecError(f"could not download {PPOCR_WHEEL} from the package index: {last}")
        with zipfile.ZipFile(wheels[0]) as z:
            data = z.read(member)
    got = hashlib.sha256(data).hexdigest()
    if got != sha:
        raise EdgecError(f"{member} from {PPOCR_WHEEL} has sha256 {got}, expected {sha}")
    write_bytes_atomic(dest, data)


def onnx_light(name: str) -> Path:
    """An architecture fixture from the onnx wheel (untrained weights, opset 9), e.g. 'shufflenet'."""
    import onnx

    src = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"
    if not src.exists():
        names = sorted(p.stem[len("light_"):] for p in src.parent.glob("light_*.onnx"))
        raise EdgecError(f"no light model {name!r} in the onnx wheel; available: {', '.join(names)}")
    return src


def node_cases(ops: list[str] | None = None):
    """ONNX conformance cases (model + data sets) from the onnx wheel's generators, filtered by op type."""
    from onnx.backend.test.case import node

    cases = node.collect_testcases(None)
    if ops is None:
        return cases
    wanted = set(ops)
    return [c for c in cases if c.model is not None and {n.op_type for n in c.model.graph.node} <= wanted
            and any(n.op_type in wanted for n in c.model.graph.node)]


@dataclass(frozen=True)
class DigitsCNN:
    model: Path      # ONNX, input "input" [N,1,8,8] float32, output "logits" [N,10]
    data: Path       # .npz with "input" (held-out images) and "labels"
    accuracy: float  # held-out top-1 measured right after training


def digits_cnn() -> DigitsCNN:
    """Train (once) and export the digits CNN; cached by a hash of the recipe and the torch version."""
    from edgec import _digits

    try:
        import torch
    except ImportError:
        raise EdgecError("the digits CNN is trained with torch: pip install 'torch==2.13.0'") from None
    recipe = inspect.getsource(_digits).encode() + torch.__version__.encode()
    folder = cache_dir() / "models" / f"digits-{hashlib.sha256(recipe).hexdigest()[:16]}"
    model, data, meta = folder / "digits_cnn.onnx", folder / "digits_test.npz", folder / "accuracy.txt"
    with cache_lock(folder):
        if not (model.exists() and data.exists() and meta.exists()):
            folder.mkdir(parents=True, exist_ok=True)
            acc = _digits.train_and_export(model, data)
            write_bytes_atomic(meta, f"{acc:.6f}\n".encode())
    return DigitsCNN(model, data, float(meta.read_text()))


def text_lines(n: int, seed: int) -> Path:
    """n rendered text lines for ppocr cls, labelled 0 (upright) / 1 (turned 180 degrees), as a .npz with
    "x" [n,3,48,192] (PaddleOCR's preprocessing) and "labels"; cached by recipe, fonts, n and seed."""
    from edgec import textlines

    recipe = hashlib.sha256(inspect.getsource(textlines).encode()).hexdigest()[:12]
    dest = cache_dir() / "data" / f"textlines-{recipe}-{textlines.font_key()}-{n}-{seed}.npz"
    if dest.exists():
        return dest
    with cache_lock(dest):
        if not dest.exists():
            import io

            import numpy as np

            x, labels, _ = textlines.text_lines(n, seed)
            buf = io.BytesIO()
            np.savez(buf, x=x, labels=labels)
            write_bytes_atomic(dest, buf.getvalue())
    return dest


# the text-direction sets: calibration and evaluation are drawn from different seeds
TEXT_LINES = {"calib": (256, 1), "eval": (1000, 2)}

MODELS = {
    "ppocr-cls": ppocr_cls,
    "ppocr-det": ppocr_det,
    "ppocr-rec": ppocr_rec,
    "digits-cnn": lambda: digits_cnn().model,
    "digits-data": lambda: digits_cnn().data,
    "textlines-calib": lambda: text_lines(*TEXT_LINES["calib"]),
    "textlines-eval": lambda: text_lines(*TEXT_LINES["eval"]),
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(f"usage: python -m edgec.zoo {{{'|'.join(MODELS)}|light:NAME}}", file=sys.stderr)
        return 2
    name = args[0]
    try:
        path = onnx_light(name.split(":", 1)[1]) if name.startswith("light:") else MODELS[name]()
    except KeyError:
        print(f"error: unknown model {name!r}; known: {', '.join(MODELS)}, light:NAME", file=sys.stderr)
        return 2
    except EdgecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
