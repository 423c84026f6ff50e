"""A corpus of bad inputs through the real `edgec` command line.

Every case runs `python -m edgec ...` as a subprocess and asserts what a user must see: a non-zero exit, one
line on stderr naming the problem (no traceback, no "internal error"), no hang, no output written (the case's
output folder is exactly as it was: no half-written file, no stray temp file) and every input untouched.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

CASE_TIMEOUT = 60  # seconds; a case that takes longer is a hang

SX = "x:1,3,8,8"


# ---------------------------------------------------------------- models


def _mk(nodes, inputs, outputs, inits=(), opset=13, domains=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]
                          + [helper.make_opsetid(d, 1) for d in domains])
    m.ir_version = 8
    return m


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def _weights(nan=False):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3
    if nan:
        w[1, 2, 0, 0] = np.nan
    return [numpy_helper.from_array(w, "w"),
            numpy_helper.from_array(rng.standard_normal(4).astype(np.float32) * 0.1, "b"),
            numpy_helper.from_array(rng.standard_normal((3, 4)).astype(np.float32), "w2"),
            numpy_helper.from_array(np.zeros(3, np.float32), "b2")]


def _cnn_nodes():
    return [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
            helper.make_node("Relu", ["c"], ["r"], name="relu"),
            helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
            helper.make_node("Flatten", ["p"], ["f"], name="flat"),
            helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], transB=1, name="fc")]


def good_model(shape=(1, 3, 8, 8), *, opset=13, nan=False, outputs=None):
    """A small trained-looking CNN: x [1,3,8,8] -> Conv -> Relu -> pool -> Gemm -> y [1,3]."""
    return _mk(_cnn_nodes(), [_vi("x", list(shape))], [_vi("y", [1, 3])] if outputs is None else outputs,
               _weights(nan), opset)


def _save(m, path):
    onnx.save(m, str(path))
    return path


def _external(path: Path, location: str):
    """The good model with weight w stored as external data at `location`."""
    m = good_model()
    w = next(t for t in m.graph.initializer if t.name == "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(4 * 3 * 3 * 3 * 4))):
        w.external_data.add(key=k, value=v)
    return _save(m, path)


@dataclass
class Lab:
    """Shared inputs for the whole module; never written by a case (checked after each one)."""

    dir: Path
    cache: Path
    ppocr: Path | None = None

    def __truediv__(self, name):
        return self.dir / name


def _build_lab(d: Path, ppocr: Path | None) -> None:
    good = _save(good_model(), d / "good.onnx")
    (d / "empty.onnx").write_bytes(b"")
    (d / "random.onnx").write_bytes(np.random.default_rng(1).bytes(4096))
    (d / "notes.onnx").write_text("this is a text file, not a model\n" * 20)
    if ppocr is not None:
        data = ppocr.read_bytes()
        (d / "truncated.onnx").write_bytes(data[: len(data) * 2 // 3])
    # a valid protobuf message of another kind: a tensor
    (d / "tensor.onnx").write_bytes(numpy_helper.from_array(np.arange(64, dtype=np.float32), "t").SerializeToString())
    _save(_mk([helper.make_node("Relu", ["x", "x"], ["y"])], [_vi("x", [1, 4])], [_vi("y", [1, 4])]),
          d / "checker.onnx")
    _save(_mk([helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")],
              [_vi("x", [1, 4])], [_vi("y", [1, 4])], domains=["com.example"]), d / "custom.onnx")
    _save(good_model(opset=3), d / "opset3.onnx")  # Gemm and Conv have no adapters to opset 7 from here
    m99 = good_model()
    m99.opset_import[0].version = 99
    _save(m99, d / "opset99.onnx")
    nodes = _cnn_nodes()
    _save(_mk(nodes, [_vi("x", [1, 3, 8, 8])], [_vi("y", [1, 3])], _weights()[1:]), d / "noinit.onnx")
    cyc = [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])]
    _save(_mk(cyc[::-1], [_vi("x", [1, 4])], [_vi("b", [1, 4])]), d / "cycle.onnx")
    _save(good_model(outputs=[_vi("y", [1, 3]), _vi("y", [1, 3])]), d / "dupout.onnx")
    _save(good_model(outputs=[]), d / "noout.onnx")
    _save(good_model((1, 0, 8, 8)), d / "zerodim.onnx")
    neg = good_model()
    neg.graph.input[0].type.tensor_type.shape.dim[2].dim_value = -8
    _save(neg, d / "negdim.onnx")
    _save(good_model((1, 3, 100000, 100000)), d / "hugedim.onnx")
    _save(good_model(nan=True), d / "nanw.onnx")
    (d / "ext").mkdir()
    _external(d / "ext" / "missing.onnx", "weights.bin")
    (d / "deep" / "a" / "b").mkdir(parents=True)
    (d / "deep" / "secret.bin").write_bytes(np.ones(108, np.float32).tobytes())  # what an escape would read
    _external(d / "deep" / "a" / "b" / "escape.onnx", "../../secret.bin")
    _external(d / "deep" / "a" / "b" / "passwd.onnx", "../../../../../../../../etc/passwd")
    _external(d / "deep" / "a" / "b" / "absolute.onnx", str(d / "deep" / "secret.bin"))
    # markup in paths: the renderer must print them literally
    for name in ("[red]x[/red]", "[bold]b", "a[/red]"):
        (d / name).mkdir(parents=True)
        shutil.copy(good, d / name / "m.onnx")

    # data for the good model: x [N,3,8,8] float32, labels [N]
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 3, 8, 8)).astype(np.float32)
    lab = rng.integers(0, 3, 16)
    np.savez(d / "calib.npz", x=x, labels=lab)
    np.savez(d / "wrongkeys.npz", a=x, b=x)
    np.savez(d / "wrongshape.npz", x=rng.standard_normal((16, 3, 9, 9)).astype(np.float32))
    np.savez(d / "wrongdtype.npz", x=x.astype(np.float64))
    xn = x.copy()
    xn[3, 1, 2, 2] = np.nan
    np.savez(d / "nan.npz", x=xn)
    xi = x.copy()
    xi[0, 0, 0, 0] = np.inf
    np.savez(d / "inf.npz", x=xi)
    np.savez(d / "labels.npz", x=x, labels=lab[:10])
    np.savez(d / "floatlabels.npz", x=x, labels=lab.astype(np.float32))
    np.savez(d / "nosamples.npz", x=x[:0])
    data = (d / "calib.npz").read_bytes()
    (d / "truncated.npz").write_bytes(data[: len(data) // 2])
    np.save(d / "sample.npy", x)
    npy = (d / "sample.npy").read_bytes()
    (d / "truncnpy").mkdir()
    (d / "truncnpy" / "a.npy").write_bytes(npy[: len(npy) // 3])
    (d / "picklenpy").mkdir()
    np.save(d / "picklenpy" / "a.npy", np.array([{"x": 1}, None], dtype=object), allow_pickle=True)
    (d / "picklelabels").mkdir()
    np.save(d / "picklelabels" / "a.npy", x)
    np.save(d / "picklelabels" / "labels.npy", np.array([object()] * 0 + [1, "a"], dtype=object), allow_pickle=True)
    np.savez(d / "pickle.npz", x=np.array([{"x": 1}], dtype=object))
    (d / "textdata.npy").write_text("0.1 0.2 0.3\n")
    (d / "emptydir").mkdir()
    (d / "dir.npz").mkdir()
    (d / "csv.txt").write_text("1,2,3\n")
    (d / "images").mkdir()
    (d / "images" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    (d / "images" / "empty.jpg").write_bytes(b"")

    # configs
    cfg = d / "cfg"
    cfg.mkdir()
    (cfg / "invalid.yaml").write_text("optimize:\n  quantize: [int8\n")
    (cfg / "unknown.yaml").write_text("optimize:\n  quantise: int8\n")
    (cfg / "wrongtype.yaml").write_text('optimize:\n  max_accuracy_drop: "x"\n')
    (cfg / "wrongtype_bool.yaml").write_text("optimize:\n  fuse: sometimes\n")
    (cfg / "wrongtype_list.yaml").write_text("optimize:\n  prune: 7\n")
    (cfg / "wrongtype_samples.yaml").write_text("optimize:\n  calib_samples: many\n")
    bomb = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        bomb.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    bomb.append("optimize:\n  keep_float: *a9")
    (cfg / "bomb.yaml").write_text("\n".join(bomb) + "\n")
    (cfg / "recursive.yaml").write_text("optimize:\n  keep_float: &r [*r]\n")
    (cfg / "pyobj.yaml").write_text("optimize:\n  quantize: !!python/object/apply:os.system ['echo pwned']\n")
    (cfg / "empty.yaml").write_text("")
    (cfg / "list.yaml").write_text("- optimize\n- data\n")
    (cfg / "section.yaml").write_text("optimize: [fuse]\n")
    (cfg / "binary.yaml").write_bytes(b"\xff\xfe\x00garbage\x00" * 10)


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    from edgec import zoo

    d = tmp_path_factory.mktemp("bad-inputs-lab")
    try:
        ppocr = zoo.ppocr_cls()
    except Exception:  # no network: the other cases still run
        ppocr = None
    _build_lab(d, ppocr)
    return Lab(d, tmp_path_factory.mktemp("bad-inputs-cache"), ppocr)


# ---------------------------------------------------------------- running and checking


def _snapshot(root: Path) -> dict:
    """Every path under root with its type, mode and content hash."""
    snap = {}
    if not root.exists():
        return snap
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        if p.is_symlink():
            snap[str(p)] = ("link", os.readlink(p))
        elif p.is_dir():
            snap[str(p)] = ("dir", st.st_mode)
        else:
            snap[str(p)] = ("file", st.st_mode, st.st_size, hashlib.sha256(p.read_bytes()).hexdigest())
    return snap


@dataclass
class Ctx:
    lab: Lab
    tmp: Path
    out: Path          # the case's output folder: must look the same after the run
    home: Path
    cfg: Path          # EDGEC_CONFIG_DIR (the device inventory lives here)
    work: Path         # cwd
    env: dict = field(default_factory=dict)
    cleanup: list = field(default_factory=list)

    def __truediv__(self, name):
        return self.lab.dir / name


@dataclass
class Run:
    argv: list
    needles: tuple = ()
    usage: bool = False            # a usage error (click's "Usage:" + "Error:" lines) is the expected form
    prefix: list = field(default_factory=list)
    timeout: float = CASE_TIMEOUT
    progress: str | None = None    # stderr lines matching this regex are progress, not the error


def _budget(seconds: float) -> float:
    """A case's time limit, stretched when the machine is oversubscribed (a shared CI box is not a hang)."""
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return seconds * max(1.0, load)


def _run(c: Ctx, r: Run) -> subprocess.CompletedProcess:
    cmd = [*r.prefix, sys.executable, "-m", "edgec", *map(str, r.argv)]
    limit = _budget(r.timeout)
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=limit, cwd=c.work, env=c.env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"edgec hung (no answer within {limit:.0f} s): {cmd}")


def _check_one_line(proc: subprocess.CompletedProcess, r: Run) -> str:
    err = proc.stderr
    assert proc.returncode > 0, f"exit {proc.returncode}, expected a failure\nstdout: {proc.stdout}\nstderr: {err}"
    for bad in ("Traceback", "internal error", "MarkupError", "Exception"):
        assert bad not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip() and not (r.progress and re.match(r.progress, ln))]
    if r.usage and lines and lines[0].startswith("Usage:"):
        problem = [ln for ln in lines if ln.startswith("Error:")]
        assert len(problem) == 1 and len(lines) <= 4, err
        line = problem[0]
    else:
        assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{err}"
        line = lines[0]
        assert line.startswith("error:"), line
    for n in r.needles:
        assert n in line, f"{n!r} not in: {line}"
    return line


CASES: dict = {}


def case(fn):
    CASES[fn.__name__.removeprefix("case_").replace("__", ":").replace("_", "-")] = fn
    return fn


# ---------------------------------------------------------------- models


@case
def case_model_empty(c):
    return Run(["compile", c / "empty.onnx", "-o", c.out / "p"], ("empty.onnx", "empty"))


@case
def case_model_random_bytes(c):
    return Run(["compile", c / "random.onnx", "-o", c.out / "p"], ("random.onnx", "not"))


@case
def case_model_truncated_real(c):
    if c.lab.ppocr is None:
        pytest.skip("the PaddleOCR model could not be fetched")
    return Run(["compile", c / "truncated.onnx", "-o", c.out / "p", "-s", "x:1,3,48,192"], ("truncated.onnx",))


@case
def case_model_text_file(c):
    return Run(["inspect", c / "notes.onnx"], ("notes.onnx", "not a readable ONNX model"))


@case
def case_model_protobuf_not_a_model(c):
    return Run(["compile", c / "tensor.onnx", "-o", c.out / "p"], ("tensor.onnx", "not"))


@case
def case_model_fails_checker(c):
    return Run(["compile", c / "checker.onnx", "-o", c.out / "p"], ("checker.onnx", "not a valid ONNX graph"))


@case
def case_model_custom_domain_op(c):
    return Run(["compile", c / "custom.onnx", "-o", c.out / "p"], ("Frobnicate",))


@case
def case_model_custom_domain_op_optimize(c):
    return Run(["optimize", c / "custom.onnx", "-o", c.out / "m.onnx"], ("Frobnicate",))


@case
def case_model_opset_3(c):
    return Run(["compile", c / "opset3.onnx", "-o", c.out / "p"], ("opset 3",))


@case
def case_model_opset_99(c):
    return Run(["compile", c / "opset99.onnx", "-o", c.out / "p"], ("opset 99",))


@case
def case_model_missing_initializer(c):
    return Run(["compile", c / "noinit.onnx", "-o", c.out / "p"], ("noinit.onnx", "'w'"))


@case
def case_model_cycle(c):
    return Run(["compile", c / "cycle.onnx", "-o", c.out / "p"], ("cycle.onnx",))


@case
def case_model_duplicate_outputs(c):
    return Run(["compile", c / "dupout.onnx", "-o", c.out / "p"], ("dupout.onnx", "'y'", "twice"))


@case
def case_model_no_outputs(c):
    return Run(["compile", c / "noout.onnx", "-o", c.out / "p"], ("noout.onnx", "no outputs"))


@case
def case_model_zero_dim(c):
    return Run(["compile", c / "zerodim.onnx", "-o", c.out / "p"], ("'x'", "[1, 0, 8, 8]"))


@case
def case_model_negative_dim(c):
    return Run(["compile", c / "negdim.onnx", "-o", c.out / "p"], ("'x'", "-8"))


@case
def case_model_huge_dim(c):
    return Run(["compile", c / "hugedim.onnx", "-o", c.out / "p"], ("too large",))


@case
def case_model_huge_dim_inspect(c):
    return Run(["inspect", c / "hugedim.onnx"], ("'x'", "too large"))


@case
def case_model_huge_dim_optimize(c):
    return Run(["optimize", c / "hugedim.onnx", "-o", c.out / "m.onnx"], ("'x'", "too large"))


@case
def case_model_external_data_missing(c):
    return Run(["compile", c / "ext" / "missing.onnx", "-o", c.out / "p"], ("missing.onnx", "weights.bin"))


@case
def case_model_external_data_escapes(c):
    return Run(["compile", c / "deep/a/b/escape.onnx", "-o", c.out / "p"], ("escape.onnx", "outside"))


@case
def case_model_external_data_etc_passwd(c):
    return Run(["inspect", c / "deep/a/b/passwd.onnx"], ("passwd.onnx", "outside"))


@case
def case_model_external_data_absolute(c):
    return Run(["optimize", c / "deep/a/b/absolute.onnx", "-o", c.out / "m.onnx"], ("absolute.onnx", "outside"))


@case
def case_model_nan_weights_compile(c):
    return Run(["compile", c / "nanw.onnx", "-o", c.out / "p"], ("nanw.onnx", "'w'", "NaN"))


@case
def case_model_nan_weights_optimize_int8(c):
    return Run(["optimize", c / "nanw.onnx", "-o", c.out / "m.onnx", "-q", "int8", "--calib", c / "calib.npz"],
               ("nanw.onnx", "'w'", "NaN"))


@case
def case_model_missing_file(c):
    return Run(["compile", c / "nope.onnx", "-o", c.out / "p"], ("not found", "nope.onnx"))


@case
def case_model_is_a_folder(c):
    return Run(["compile", c / "emptydir", "-o", c.out / "p"], ("emptydir", "folder"))


# ---------------------------------------------------------------- flags


@case
def case_flag_shape_letters(c):
    return Run(["compile", c / "good.onnx", "-o", c.out / "p", "-s", "x:1,a"], ("x:1,a", "whole numbers"))


@case
def case_flag_shape_no_name(c):
    return Run(["compile", c / "good.onnx", "-o", c.out / "p", "-s", ":1"], (":1", "NAME:D1"))


@case
def case_flag_shape_zero(c):
    return Run(["compile", c / "good.onnx", "-o", c.out / "p", "-s", "x:0,3"], ("x:0,3", "positive"))


@case
def case_flag_shape_negative(c):
    return Run(["inspect", c / "good.onnx", "-s", "x:-1"], ("x:-1", "positive"))


@case
def case_flag_shape_unknown_input(c):
    return Run(["compile", c / "good.onnx", "-o", c.out / "p", "-s", "img:1,3,8,8"], ("unknown input 'img'",))


@case
def case_flag_shape_wrong_rank(c):
    return Run(["compile", c / "good.onnx", "-o", c.out / "p", "-s", "x:1,3,8"], ("rank 3",))


@case
def case_flag_shape_huge(c):
    return Run(["optimize", c / "good.onnx", "-o", c.out / "m.onnx", "-s", "x:1,3,99999999999999999999,8"],
               ("99999999999999999999",))


@case
def case_flag_bad_target(c):
    return Run(["compile", c / "good.onnx", "-o", c.out / "p", "--target", "sparc"], ("unknown target 'sparc'",))


@case
def case_flag_bad_target_verify(c):
    return Run(["verify", c / "good.onnx", "--target", "x86_64-avx1024"], ("x86_64-avx1024",))


@case
def case_flag_threads_letters(c):
    return Run(["compile", c / "good.onnx", "-o", c.out / "p", "--threads", "abc"], ("--threads",), usage=True)


@case
def case_flag_threads_zero(c):
    return Run(["compile", c / "good.onnx", "-o", c.out / "p", "--threads", "0"], ("--threads", "0"))


@case
def case_flag_threads_negative(c):
    return Run(["compile", c / "good.onnx", "-o", c.out / "p", "--threads", "-1"], ("--threads", "-1"))


@case
def case_flag_prune_ratio_above_one(c):
    return Run(["optimize", c / "good.onnx", "-o", c.out / "m.onnx", "--prune", "channel:1.5"], ("channel:1.5",))


@case
def case_flag_prune_unknown_kind(c):
    return Run(["optimize", c / "good.onnx", "-o", c.out / "m.onnx", "--prune", "foo:0.3"], ("foo:0.3",))


@case
def case_flag_prune_bad_block(c):
    return Run(["optimize", c / "good.onnx", "-o", c.out / "m.onnx", "--prune", "block:0.3:x"], ("block:0.3:x",))


@case
def case_flag_quantize_unknown(c):
    return Run(["optimize", c / "good.onnx", "-o", c.out / "m.onnx", "-q", "int4"], ("int4",))


@case
def case_flag_int8_without_calib(c):
    return Run(["optimize", c / "good.onnx", "-o", c.out / "m.onnx", "-q", "int8"], ("--calib",))


@case
def case_flag_output_is_input(c):
    return Run(["optimize", c / "good.onnx", "-o", c / "good.onnx"], ("is the input model",))


@case
def case_flag_output_is_input_other_spelling(c):
    return Run(["optimize", c / "good.onnx", "-o", c.lab.dir / "cfg" / ".." / "good.onnx"], ("is the input model",))


@case
def case_flag_output_is_input_symlink(c):
    (c.out / "link.onnx").symlink_to(c / "good.onnx")
    return Run(["optimize", c / "good.onnx", "-o", c.out / "link.onnx"], ("is the input model",))


@case
def case_flag_compile_output_is_input(c):
    return Run(["compile", c / "good.onnx", "-o", c / "good.onnx"], ("good.onnx",))


@case
def case_flag_output_in_missing_folder(c):
    return Run(["optimize", c / "good.onnx", "-o", c.out / "no" / "such" / "m.onnx"], ("does not exist",))


@case
def case_flag_report_in_missing_folder(c):
    return Run(["optimize", c / "good.onnx", "-o", c.out / "m.onnx", "--report", c.out / "no" / "r.json"],
               ("does not exist",))


def _read_only(c: Ctx) -> tuple[Path, list]:
    ro = c.out / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    if os.geteuid() != 0:
        return ro, []
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: permissions are not enforced")
    # root ignores permission bits; without these capabilities it obeys them like anyone else
    return ro, ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]


@case
def case_flag_output_read_only_folder_optimize(c):
    ro, prefix = _read_only(c)
    return Run(["optimize", c / "good.onnx", "-o", ro / "m.onnx"], (str(ro),), prefix=prefix)


@case
def case_flag_output_read_only_folder_compile(c):
    ro, prefix = _read_only(c)
    return Run(["compile", c / "good.onnx", "-o", ro / "p"], (str(ro),), prefix=prefix)


@case
def case_flag_existing_output_kept_on_failure(c):
    (c.out / "m.onnx").write_bytes(b"an earlier result")
    (c.out / "m.edgec.yaml").write_text("model: earlier\n")
    return Run(["optimize", c / "good.onnx", "-o", c.out / "m.onnx", "-q", "int8", "--calib", c / "nan.npz"],
               ("NaN",))


@case
def case_flag_compile_output_is_a_file(c):
    (c.out / "p").write_text("a file where the project folder would go\n")
    return Run(["compile", c / "good.onnx", "-o", c.out / "p"], ("not a folder",))


@case
def case_flag_output_not_onnx(c):
    return Run(["optimize", c / "good.onnx", "-o", c.out / "m.txt"], (".onnx",))


@case
def case_markup_closing_tag_in_path(c):
    return Run(["compile", c / "a[/red]" / "missing.onnx", "-o", c.out / "p"], (str(c / "a[/red]" / "missing.onnx"),))


@case
def case_markup_tags_in_path(c):
    return Run(["inspect", c / "[red]x[/red]" / "nope.onnx"], (str(c / "[red]x[/red]" / "nope.onnx"),))


@case
def case_markup_bold_in_output_path(c):
    return Run(["optimize", c / "[bold]b" / "m.onnx", "-o", c.out / "[bold]no" / "m.onnx"],
               (str(c.out / "[bold]no"),))


@case
def case_markup_in_shape_spec(c):
    return Run(["inspect", c / "good.onnx", "-s", "[/red]:1,3,8,8"], ("[/red]",))


# ---------------------------------------------------------------- calibration / evaluation data


def _int8(c, data):
    return ["optimize", c / "good.onnx", "-o", c.out / "m.onnx", "-q", "int8", "--calib", data]


@case
def case_data_wrong_keys(c):
    return Run(_int8(c, c / "wrongkeys.npz"), ("wrongkeys.npz", "'x'"))


@case
def case_data_wrong_shape(c):
    return Run(_int8(c, c / "wrongshape.npz"), ("wrongshape.npz", "[16, 3, 9, 9]"))


@case
def case_data_wrong_dtype(c):
    return Run(_int8(c, c / "wrongdtype.npz"), ("wrongdtype.npz", "float64"))


@case
def case_data_nan_calibration(c):
    return Run(_int8(c, c / "nan.npz"), ("nan.npz", "NaN"))


@case
def case_data_inf_calibration(c):
    return Run(_int8(c, c / "inf.npz"), ("inf.npz", "inf"))


@case
def case_data_nan_eval(c):
    return Run(["eval", c / "good.onnx", "--data", c / "nan.npz", "--reference", c / "good.onnx"], ("nan.npz", "NaN"))


@case
def case_data_label_count(c):
    return Run(["eval", c / "good.onnx", "--data", c / "labels.npz"], ("labels.npz", "labels"))


@case
def case_data_float_labels(c):
    return Run(["optimize", c / "good.onnx", "-o", c.out / "m.onnx", "--eval", c / "floatlabels.npz"],
               ("floatlabels.npz", "labels"))


@case
def case_data_no_samples(c):
    return Run(_int8(c, c / "nosamples.npz"), ("nosamples.npz", "no samples"))


@case
def case_data_corrupt_images(c):
    return Run(_int8(c, c / "images"), ("broken.png",))


@case
def case_data_truncated_npz(c):
    return Run(_int8(c, c / "truncated.npz"), ("truncated.npz",))


@case
def case_data_truncated_npy(c):
    return Run(_int8(c, c / "truncnpy"), ("a.npy",))


@case
def case_data_pickled_npy(c):
    return Run(["eval", c / "good.onnx", "--data", c / "picklenpy" / "a.npy"], ("a.npy", "pickle"))


@case
def case_data_pickled_labels(c):
    return Run(["eval", c / "good.onnx", "--data", c / "picklelabels"], ("labels.npy", "pickle"))


@case
def case_data_pickled_npz(c):
    return Run(_int8(c, c / "pickle.npz"), ("pickle.npz", "pickle"))


@case
def case_data_text_as_npy(c):
    return Run(_int8(c, c / "textdata.npy"), ("textdata.npy",))


@case
def case_data_empty_folder(c):
    return Run(_int8(c, c / "emptydir"), ("emptydir",))


@case
def case_data_folder_named_npz(c):
    return Run(["eval", c / "good.onnx", "--data", c / "dir.npz"], ("dir.npz",))


@case
def case_data_wrong_file_kind(c):
    return Run(["eval", c / "good.onnx", "--data", c / "csv.txt"], ("csv.txt",))


@case
def case_data_missing(c):
    return Run(["eval", c / "good.onnx", "--data", c / "nowhere.npz"], ("nowhere.npz", "not found"))


# ---------------------------------------------------------------- YAML configs


def _with_config(c, name):
    return ["optimize", c / "good.onnx", "-o", c.out / "m.onnx", "--config", c / "cfg" / name]


@case
def case_config_invalid_yaml(c):
    return Run(_with_config(c, "invalid.yaml"), ("invalid.yaml", "YAML"))


@case
def case_config_unknown_key(c):
    return Run(_with_config(c, "unknown.yaml"), ("unknown.yaml", "quantise"))


@case
def case_config_string_for_number(c):
    return Run(_with_config(c, "wrongtype.yaml"), ("wrongtype.yaml", "max_accuracy_drop"))


@case
def case_config_string_for_bool(c):
    return Run(_with_config(c, "wrongtype_bool.yaml"), ("wrongtype_bool.yaml", "fuse"))


@case
def case_config_number_for_list(c):
    return Run(_with_config(c, "wrongtype_list.yaml"), ("wrongtype_list.yaml", "prune"))


@case
def case_config_string_for_int(c):
    return Run(_with_config(c, "wrongtype_samples.yaml"), ("wrongtype_samples.yaml", "calib_samples"))


@case
def case_config_alias_bomb(c):
    return Run(_with_config(c, "bomb.yaml"), ("bomb.yaml", "alias"), timeout=20)


@case
def case_config_recursive_alias(c):
    return Run(_with_config(c, "recursive.yaml"), ("recursive.yaml",), timeout=20)


@case
def case_config_python_tag(c):
    return Run(_with_config(c, "pyobj.yaml"), ("pyobj.yaml",))


@case
def case_config_empty(c):
    return Run(_with_config(c, "empty.yaml"), ("empty.yaml", "empty"))


@case
def case_config_list(c):
    return Run(_with_config(c, "list.yaml"), ("list.yaml", "mapping"))


@case
def case_config_section_not_mapping(c):
    return Run(_with_config(c, "section.yaml"), ("section.yaml", "optimize"))


@case
def case_config_binary(c):
    return Run(["eval", c / "good.onnx", "--data", c / "calib.npz", "--config", c / "cfg" / "binary.yaml"],
               ("binary.yaml",))


@case
def case_config_missing(c):
    return Run(_with_config(c, "nope.yaml"), ("nope.yaml", "not found"))


def _inventory(c, text):
    c.cfg.mkdir(parents=True, exist_ok=True)
    (c.cfg / "devices.yaml").write_text(text)
    return Run(["devices", "list"], ("devices.yaml",))


@case
def case_inventory_invalid_yaml(c):
    return _inventory(c, "devices:\n  pi: {host: [\n")


@case
def case_inventory_alias_bomb(c):
    bomb = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 10):
        bomb.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    bomb.append("devices:\n  pi: {host: h, profile: pi4, cflags: *a9}")
    r = _inventory(c, "\n".join(bomb) + "\n")
    r.timeout = 20
    return r


@case
def case_inventory_python_tag(c):
    return _inventory(c, "devices:\n  pi: !!python/object/apply:os.system ['echo pwned']\n")


@case
def case_inventory_list(c):
    return _inventory(c, "- pi\n- pi5\n")


@case
def case_inventory_unknown_key(c):
    r = _inventory(c, "devices:\n  pi: {host: h, profile: pi4, hots: x}\n")
    r.needles = ("'pi'", "hots")
    return r


@case
def case_inventory_port_string(c):
    r = _inventory(c, "devices:\n  pi: {host: h, profile: pi4, port: twenty-two}\n")
    r.needles = ("'pi'", "port")
    return r


@case
def case_inventory_host_metachar(c):
    r = _inventory(c, "devices:\n  pi: {host: 'h; reboot', profile: pi4}\n")
    r.needles = ("'pi'", "host")
    return r


@case
def case_inventory_project_file(c):
    (c.work / "edgec.yaml").write_text("devices: [a, b]\n")
    return Run(["devices", "list"], ("edgec.yaml", "devices"))


# ---------------------------------------------------------------- device entries


def _add(*extra):
    return ["devices", "add", "board", "--profile", "pi4", *extra]


@case
def case_device_host_semicolon(c):
    return Run(_add("--host", "pi;reboot"), ("pi;reboot", "host"))


@case
def case_device_host_command_substitution(c):
    return Run(_add("--host", "$(touch /tmp/pwned)"), ("host",))


@case
def case_device_host_backticks(c):
    return Run(_add("--host", "`id`"), ("host",))


@case
def case_device_host_space(c):
    return Run(_add("--host", "pi 4"), ("host",))


@case
def case_device_host_newline(c):
    return Run(_add("--host", "pi\nreboot"), ("host",))


@case
def case_device_host_option(c):
    return Run(_add("--host", "-oProxyCommand=id"), ("host",))


@case
def case_device_user_metachar(c):
    return Run(_add("--host", "pi", "--user", "pi;id"), ("user",))


@case
def case_device_user_substitution(c):
    return Run(_add("--host", "pi", "--user", "$(id)"), ("user",))


@case
def case_device_port_zero(c):
    return Run(_add("--host", "pi", "--port", "0"), ("port", "0"))


@case
def case_device_port_negative(c):
    return Run(_add("--host", "pi", "--port", "-1"), ("port", "-1"))


@case
def case_device_port_too_big(c):
    return Run(_add("--host", "pi", "--port", "99999"), ("port", "99999"))


@case
def case_device_port_letters(c):
    return Run(_add("--host", "pi", "--port", "ssh"), ("--port",), usage=True)


@case
def case_device_missing_key_file(c):
    return Run(_add("--host", "pi", "-i", c.tmp / "no_such_key"), ("no_such_key",))


@case
def case_device_unknown_profile(c):
    return Run(["devices", "add", "board", "--host", "pi", "--profile", "pi9"], ("pi9",))


@case
def case_device_bad_name(c):
    return Run(["devices", "add", "a/../b", "--host", "pi", "--profile", "pi4"], ("a/../b",))


@case
def case_device_unknown_name(c):
    return Run(["deploy", c / "good.onnx", "-d", "nosuchboard"], ("nosuchboard",))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _board(c, port, timeout=None):
    c.cfg.mkdir(parents=True, exist_ok=True)
    extra = f", timeout: {timeout}" if timeout else ""
    (c.cfg / "devices.yaml").write_text(f"devices:\n  board: {{host: 127.0.0.1, port: {port}, user: pi, "
                                        f"profile: pi4{extra}}}\n")


@case
def case_device_refused_port(c):
    _board(c, _free_port())
    return Run(["devices", "check", "board"], ("board", "refused"))


@case
def case_device_silent_port(c):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []

    def accept_and_say_nothing():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept_and_say_nothing, daemon=True).start()
    c.cleanup.append(lambda: [s.close() for s in [srv, *held]])
    _board(c, srv.getsockname()[1], timeout=4)
    return Run(["devices", "check", "board"], ("board", "timed out"))


@case
def case_device_silent_port_deploy(c):
    r = case_device_silent_port(c)
    r.argv = ["deploy", c / "good.onnx", "-d", "board", "--build", "cross"]
    r.progress = r"board: "  # deploy reports each board's stages on stderr
    return r


# ---------------------------------------------------------------- the test


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input(name, lab, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "SSH_AUTH_SOCK", "EDGEC_CONFIG_DIR")}
    c = Ctx(lab, tmp_path, tmp_path / "out", tmp_path / "home", tmp_path / "cfg", tmp_path / "work")
    for d in (c.out, c.home / ".ssh", c.work):
        d.mkdir(parents=True)
    env.update(HOME=str(c.home), EDGEC_CONFIG_DIR=str(c.cfg), EDGEC_CACHE_DIR=str(lab.cache), COLUMNS="120")
    c.env = env
    try:
        r = CASES[name](c)
        # everything a run may write to (not HOME/.cache: onnxruntime keeps its own files there)
        watched = (c.out, c.cfg, c.work, c.home / ".ssh")
        before_lab, before_case = _snapshot(lab.dir), [_snapshot(d) for d in watched]
        proc = _run(c, r)
        _check_one_line(proc, r)
        assert proc.stdout == "", f"output on stdout from a failed run:\n{proc.stdout}"
        assert _snapshot(lab.dir) == before_lab, "an input file changed"
        for d, before in zip(watched, before_case):
            after = _snapshot(d)
            assert after == before, ("files written by a failed run: "
                                     f"{sorted(set(after) ^ set(before)) or 'contents changed'}")
    finally:
        for fn in c.cleanup:
            fn()
        ro = tmp_path / "out" / "ro"
        if ro.exists():
            ro.chmod(0o755)


def test_corpus_size():
    assert len(CASES) >= 60


def test_markup_in_paths_and_names_is_printed_literally(lab, tmp_path):
    """Paths and model text that look like rich markup are data: printed as they are, never a crash."""
    env = {**os.environ, "EDGEC_CACHE_DIR": str(lab.cache), "COLUMNS": "200"}
    folder = tmp_path / "a[" / "red]" / "[bold]m"
    folder.mkdir(parents=True)
    m = good_model()
    m.graph.node[0].name = "conv[/red][bold]"
    model = _save(m, folder / "m.onnx")
    out = tmp_path / "out[/red]"
    for argv, expect in ((["inspect", model], ["conv[/red][bold]", str(model)]),
                         (["compile", model, "-o", out, "--explain"], [f"wrote {out} ", "conv[/red][bold]"])):
        proc = subprocess.run([sys.executable, "-m", "edgec", *map(str, argv)], capture_output=True, text=True,
                              timeout=CASE_TIMEOUT, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        flat = proc.stdout.replace("\n", "")
        for text in expect:
            assert text in flat, (text, proc.stdout)
    assert (out / "model.c").is_file()
