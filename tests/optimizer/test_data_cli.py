"""Data loading, edgec.yaml, `edgec eval`, and bad input through the real CLI: one clear line, non-zero exit,
nothing written."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import yaml

from edgec.model import load_model
from edgec.optimizer.data import load_dataset

from opt_helpers import cli


def _sha(p) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _fails(capsys, tmp_path, *args, expect: str):
    before = sorted(p.name for p in tmp_path.iterdir())
    rc, out, err = cli(capsys, *args)
    assert rc != 0
    errors = [line for line in err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and expect in errors[0], err
    assert "Traceback" not in err + out
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    return errors[0]


@pytest.mark.parametrize("bad,expect", [
    (lambda d: {"input": d["input"][:, :, :4, :]}, "shape"),
    (lambda d: {"input": d["input"].astype(np.float64)}, "float64"),
    (lambda d: {"input": d["input"].reshape(-1, 64)}, "shape"),
    (lambda d: {"other": d["input"], "more": d["input"]}, "no array for input"),
])
def test_bad_calibration_data(digits_cnn, tmp_path, capsys, bad, expect):
    src = tmp_path / "bad.npz"
    np.savez(src, **bad(np.load(digits_cnn.data)))
    _fails(capsys, tmp_path, "optimize", digits_cnn.model, "-o", tmp_path / "o.onnx", "--quantize", "int8",
           "--calib", src, expect=expect)


def test_empty_data_folder(digits_cnn, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    _fails(capsys, tmp_path, "optimize", digits_cnn.model, "-o", tmp_path / "o.onnx", "--quantize", "int8",
           "--calib", tmp_path / "empty", expect="empty")


@pytest.mark.parametrize("spec,expect", [("magic:0.5", "unknown prune spec"), ("unstructured:1.0", "[0, 1)"),
                                         ("channel:-0.2", "[0, 1)"), ("block:4x:0.5", "block size"),
                                         ("nm:3:2", "0 < N < M")])
def test_bad_prune_spec(digits_cnn, tmp_path, capsys, spec, expect):
    _fails(capsys, tmp_path, "optimize", digits_cnn.model, "-o", tmp_path / "o.onnx", "--prune", spec, expect=expect)


def test_refuses_to_overwrite_model(digits_cnn, tmp_path, capsys):
    model = tmp_path / "m.onnx"
    model.write_bytes(digits_cnn.model.read_bytes())
    digest = _sha(model)
    _fails(capsys, tmp_path, "optimize", model, "-o", model, "--prune", "unstructured:0.5", expect="input model")
    assert _sha(model) == digest


def test_other_bad_flags(digits_cnn, tmp_path, capsys):
    x_only = tmp_path / "x.npz"
    np.savez(x_only, input=np.load(digits_cnn.data)["input"][:20])
    _fails(capsys, tmp_path, "optimize", digits_cnn.model, "-o", tmp_path / "o.onnx", "--quantize", "int8", "--calib",
           x_only, "--eval", x_only, "--max-accuracy-drop", "1", expect="needs labels")
    _fails(capsys, tmp_path, "optimize", digits_cnn.model, "-o", tmp_path / "o.onnx", "--disable-pass", "nope",
           expect="unknown pass")
    _fails(capsys, tmp_path, "optimize", digits_cnn.model, "-o", tmp_path / "o.onnx", "--quantize", "int4",
           expect="int8 or fp16")
    _fails(capsys, tmp_path, "optimize", digits_cnn.model, "-o", tmp_path / "o.onnx", "--quantize", "int8",
           expect="needs calibration data")
    _fails(capsys, tmp_path, "optimize", digits_cnn.model, "-o", tmp_path / "o.onnx", "--quantize", "int8", "--calib",
           x_only, "--calib-method", "median", expect="calibration method")


def test_config_file_and_flag_override(digits_cnn, tmp_path, capsys):
    cfg = tmp_path / "edgec.yaml"
    cfg.write_text(yaml.safe_dump({"optimize": {"prune": ["unstructured:0.5"], "disable_passes": ["cse"]},
                                   "data": {"eval": str(digits_cnn.data)}, "target": {"isa": "neon"}}))
    out, rep = tmp_path / "o.onnx", tmp_path / "r.json"
    rc, _, err = cli(capsys, "optimize", digits_cnn.model, "-o", out, "-c", cfg, "--prune", "unstructured:0.7",
                     "--report", rep)
    assert rc == 0, err
    resolved = yaml.safe_load((tmp_path / "o.edgec.yaml").read_text())
    assert resolved["optimize"]["prune"] == ["unstructured:0.7"]          # the flag won
    assert resolved["optimize"]["disable_passes"] == ["cse"]              # the file's value stayed
    assert resolved["data"]["eval"] == str(digits_cnn.data) and resolved["target"] == {"isa": "neon"}
    doc = json.loads(rep.read_text())
    assert {"name": "cse", "skipped": True, "notes": ["disabled"]} in doc["passes"]
    assert next(p for p in doc["passes"] if p["name"] == "prune-unstructured")["spec"] == "unstructured:0.7"
    # the saved config reproduces the run
    rc, _, err = cli(capsys, "optimize", digits_cnn.model, "-o", tmp_path / "o2.onnx", "-c", tmp_path / "o.edgec.yaml")
    assert rc == 0, err
    assert (tmp_path / "o2.onnx").read_bytes() == out.read_bytes()
    cfg.write_text("optimize:\n  prunes: [x]\n")
    _fails(capsys, tmp_path, "optimize", digits_cnn.model, "-o", tmp_path / "o3.onnx", "-c", cfg, expect="unknown setting")


def test_eval_labels_and_reference(digits_cnn, capsys):
    rc, out, err = cli(capsys, "eval", digits_cnn.model, "--data", digits_cnn.data, "--reference", digits_cnn.model, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["top1"] == pytest.approx(digits_cnn.accuracy, abs=1e-6) and doc["top5"] >= doc["top1"]
    assert doc["fidelity"]["cosine"] == pytest.approx(1.0) and doc["fidelity"]["argmax_agreement"] == 1.0
    rc, out, _ = cli(capsys, "eval", digits_cnn.model, "--data", digits_cnn.data)
    assert rc == 0 and "top1" in out


def test_npy_folder_and_image_classes(digits_cnn, tmp_path, capsys):
    from PIL import Image

    d = np.load(digits_cnn.data)
    npy = tmp_path / "npy"
    npy.mkdir()
    for i in range(30):
        np.save(npy / f"{i:03d}.npy", d["input"][i])
    np.save(npy / "labels.npy", d["labels"][:30])
    model = load_model(digits_cnn.model)
    ds = load_dataset(npy, model)
    assert len(ds) == 30 and np.array_equal(ds.labels, d["labels"][:30])
    assert np.array_equal(ds.feeds[3]["input"][0], d["input"][3])
    # the same digits as 8-bit grayscale PNGs in one folder per class
    imgs = tmp_path / "imgs"
    for i in range(30):
        (imgs / f"class{d['labels'][i]}").mkdir(parents=True, exist_ok=True)
        Image.fromarray((d["input"][i, 0] * 255).round().astype(np.uint8)).save(imgs / f"class{d['labels'][i]}" / f"{i}.png")
    ds = load_dataset(imgs, model, {"resize": [8, 8]})
    assert len(ds) == 30 and ds.classes == sorted({f"class{k}" for k in d["labels"][:30]})
    first = sorted((imgs / ds.classes[0]).iterdir())[0]
    expect = np.asarray(Image.open(first), np.float32) / 255
    assert np.allclose(ds.feeds[0]["input"][0, 0], expect)
    rc, out, err = cli(capsys, "eval", digits_cnn.model, "--data", npy, "--json")
    assert rc == 0 and json.loads(out)["top1"] > 0.9, err


def test_image_preprocess_spec(tmp_path):
    from PIL import Image

    from edgec.optimizer.images import preprocess_image

    rgb = np.random.default_rng(0).integers(0, 256, (20, 30, 3)).astype(np.uint8)
    img = Image.fromarray(rgb)
    x = preprocess_image(img, {"resize": [20, 30], "crop": [10, 16], "mean": [0.5, 0.4, 0.3], "std": [0.2, 0.2, 0.2],
                               "channel_order": "BGR"}, 3, 10, 16)
    ref = (rgb[5:15, 7:23, ::-1].astype(np.float32) / 255 - np.array([0.5, 0.4, 0.3], np.float32)) / 0.2
    assert x.shape == (3, 10, 16) and np.allclose(x, ref.transpose(2, 0, 1), atol=1e-5)
    y = preprocess_image(img, {"resize": 10, "layout": "NHWC"}, 3, 10, 15)
    assert y.shape == (10, 15, 3)


def test_eval_image_folder_fidelity(ppocr_cls, text_images, capsys):
    folder, cfg = text_images
    rc, out, err = cli(capsys, "eval", ppocr_cls, "--data", folder, "-c", cfg, "--reference", ppocr_cls, "--json")
    assert rc == 0, err
    fid = json.loads(out)["fidelity"]
    assert fid["samples"] == 24 and fid["cosine"] == pytest.approx(1.0) and fid["max_abs_err"] == 0.0
    rc, _, err = cli(capsys, "eval", ppocr_cls, "--data", folder, "-c", cfg)
    assert rc != 0 and "no labels" in err and "--reference" in err
