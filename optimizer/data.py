"""Calibration and evaluation data: a .npz of input arrays, a folder of .npy files, or a folder of images.

Every source becomes a Dataset: one feed per sample (batch 1, the model's own input shape) and optional
integer labels (an npz/npy `labels` array, or image sub-folders as classes in sorted order). Shapes and
dtypes are checked against the model here, so later stages never see data that does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from edgec.errors import EdgecError
from edgec.model import graph_inputs



@dataclass
class Dataset:
    feeds: list[dict[str, np.ndarray]]
    labels: np.ndarray | None
    source: str
    classes: list[str] | None = None

    def __len__(self) -> int:
        return len(self.feeds)

    def head(self, n: int | None) -> "Dataset":
        if n is None or n >= len(self.feeds):
            return self
        labels = None if self.labels is None else self.labels[:n]
        return Dataset(self.feeds[:n], labels, self.source, self.classes)

    def split(self, n_first: int) -> tuple["Dataset", "Dataset"]:
        """First n samples and the rest (e.g. calibration vs held-out evaluation)."""
        lab = self.labels
        return (Dataset(self.feeds[:n_first], None if lab is None else lab[:n_first], self.source, self.classes),
                Dataset(self.feeds[n_first:], None if lab is None else lab[n_first:], self.source, self.classes))


def _inputs(model: onnx.ModelProto):
    infos = graph_inputs(model)
    for i in infos:
        if not i.is_static():
            raise EdgecError(f"input {i.name!r} has dynamic shape {list(i.shape)}; pass --input-shape")
    return infos


def _check_array(arr: np.ndarray, info, source: str, what: str) -> np.ndarray:
    """Accept [N, *sample] or a single [*sample]; return [N, *sample] (the model's batch dim is 1)."""
    sample = tuple(info.shape[1:])
    if tuple(arr.shape) == sample:
        arr = arr[None]
    if tuple(arr.shape[1:]) != sample:
        raise EdgecError(f"{what} data {source}: input {info.name!r} has shape {list(arr.shape)}, "
                         f"the model expects [N, {', '.join(map(str, sample))}]")
    if arr.dtype != np.dtype(info.dtype):
        raise EdgecError(f"{what} data {source}: input {info.name!r} is {arr.dtype}, the model expects {info.dtype} "
                         f"(save it with .astype(np.{info.dtype}))")
    if len(arr) == 0:
        raise EdgecError(f"{what} data {source} has no samples")
    if arr.dtype.kind in "fc":
        finite = np.isfinite(arr)
        if not finite.all():
            first = int(np.argwhere(~finite.reshape(len(arr), -1))[0][0])
            kinds = " and ".join(k for k, f in (("NaN", np.isnan), ("inf", np.isinf)) if f(arr).any())
            raise EdgecError(f"{what} data {source}: input {info.name!r} holds {int((~finite).sum())} {kinds} "
                             f"value(s), first in sample {first}; calibration ranges and metrics would be "
                             "meaningless: clean the data")
    return arr


def _labels(arr, n: int, source: str) -> np.ndarray:
    lab = np.asarray(arr).reshape(-1)
    if lab.dtype.kind not in "iu" or len(lab) != n:
        raise EdgecError(f"{source}: 'labels' must be {n} integers (one per sample), got {lab.dtype} x {len(lab)}")
    return lab.astype(np.int64)


def _from_arrays(model, arrays: dict[str, np.ndarray], labels, source: str, what: str) -> Dataset:
    infos = _inputs(model)
    if len(infos) == 1 and infos[0].name not in arrays and len(arrays) == 1:
        arrays = {infos[0].name: next(iter(arrays.values()))}
    missing = [i.name for i in infos if i.name not in arrays]
    if missing:
        raise EdgecError(f"{what} data {source} has no array for input {missing[0]!r} (arrays: {', '.join(arrays) or 'none'})")
    checked = {i.name: _check_array(arrays[i.name], i, source, what) for i in infos}
    counts = {len(a) for a in checked.values()}
    if len(counts) != 1:
        raise EdgecError(f"{what} data {source}: inputs have different sample counts {sorted(counts)}")
    n = counts.pop()
    feeds = [{k: np.ascontiguousarray(a[j:j + 1]) for k, a in checked.items()} for j in range(n)]
    return Dataset(feeds, None if labels is None else _labels(labels, n, source), source)


PICKLE_HINT = "holds pickled Python objects, which edgec never loads (they can run code); save plain numeric arrays"


def _read_error(path: Path, what: str, e: Exception) -> EdgecError:
    text = " ".join(str(e).split())
    if "pickle" in text or "Object arrays" in text:
        return EdgecError(f"{what} data {path} {PICKLE_HINT}")
    return EdgecError(f"cannot read {what} data {path} (truncated or not a NumPy file): "
                      f"{text[:200] or type(e).__name__}")


def _npy(path: Path, what: str) -> np.ndarray:
    """One .npy file, never unpickled; a damaged file is one clear line."""
    try:
        arr = np.load(path, allow_pickle=False)
    except Exception as e:  # numpy raises ValueError, EOFError, OSError, UnpicklingError... on bad files
        raise _read_error(path, what, e) from None
    if not isinstance(arr, np.ndarray):
        raise EdgecError(f"{what} data {path}: expected one array in a .npy file")
    return arr


def _npz(model, path: Path, what: str) -> Dataset:
    try:
        with np.load(path, allow_pickle=False) as z:
            if not hasattr(z, "files"):
                raise EdgecError(f"{what} data {path}: a .npz must be a NumPy archive (np.savez), "
                                 "this is a single array")
            arrays = {k: z[k] for k in z.files}
    except EdgecError:
        raise
    except Exception as e:
        raise _read_error(path, what, e) from None
    labels = arrays.pop("labels", None)
    return _from_arrays(model, arrays, labels, str(path), what)


def _npy_folder(model, path: Path, files: list[Path], what: str) -> Dataset:
    infos = _inputs(model)
    if len(infos) != 1:
        raise EdgecError(f"{what} data {path}: a folder of .npy files only works for single-input models; use a .npz")
    labels = _npy(path / "labels.npy", what) if (path / "labels.npy").is_file() else None
    parts = []
    for f in files:
        if f.name == "labels.npy":
            continue
        parts.append(_check_array(_npy(f, what), infos[0], str(f), what))
    if not parts:
        raise EdgecError(f"{what} data folder {path} holds no sample .npy files")
    return _from_arrays(model, {infos[0].name: np.concatenate(parts)}, labels, str(path), what)


def load_dataset(path: str | Path, model: onnx.ModelProto, preprocess: dict | None = None, *,
                 what: str = "evaluation", limit: int | None = None) -> Dataset:
    """Read DATA for this model (shapes/dtypes checked); `limit` keeps the first samples."""
    path = Path(path)
    if not path.exists():
        raise EdgecError(f"{what} data not found: {path}")
    if path.is_file():
        if path.suffix == ".npz":
            return _npz(model, path, what).head(limit)
        if path.suffix == ".npy":
            return _npy_folder(model, path.parent, [path], what).head(limit)
        raise EdgecError(f"{what} data {path}: expected a .npz file or a folder of .npy files or images")
    files = sorted(p for p in path.iterdir() if not p.name.startswith("."))
    npys = [p for p in files if p.suffix == ".npy"]
    if npys:
        return _npy_folder(model, path, npys, what).head(limit)
    from edgec.optimizer.images import load_images

    return load_images(path, model, preprocess or {}, what, limit)
