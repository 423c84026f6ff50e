"""Loading ONNX models the same way for every command.

load_model() checks the file, converts opsets older than the caller needs, pins
dynamic dimensions (from --input-shape, else batch 1) and runs shape inference,
so every later stage sees static shapes. Problems become one-line EdgecErrors.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import helper, numpy_helper, shape_inference, version_converter

from edgec.errors import EdgecError

MIN_OPSET = 7
MAX_DIM = 2**31 - 1
MAX_TENSOR_BYTES = 2**31  # no tensor on the boards edgec targets comes near this; past it, sizes overflow in C


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple | None  # ints where static, str for symbolic dims, None per unknown dim; None: rank unknown
    dtype: str           # numpy dtype name, e.g. "float32"

    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) and d >= 0 for d in self.shape)


def parse_input_shapes(specs: list[str] | None) -> dict[str, list[int]]:
    """Parse ["NAME:1,3,224,224", ...] into {"NAME": [1, 3, 224, 224]}."""
    shapes: dict[str, list[int]] = {}
    for spec in specs or []:
        name, sep, dims = spec.rpartition(":")
        if not sep or not name:
            raise EdgecError(f"malformed --input-shape {spec!r}: expected NAME:D1,D2,... e.g. input:1,3,224,224")
        try:
            parsed = [int(d) for d in dims.replace("x", ",").split(",") if d.strip() != ""]
        except ValueError:
            raise EdgecError(f"malformed --input-shape {spec!r}: dimensions must be whole numbers") from None
        if not parsed or any(d <= 0 for d in parsed):
            raise EdgecError(f"malformed --input-shape {spec!r}: dimensions must be positive")
        if any(d > MAX_DIM for d in parsed):
            raise EdgecError(f"malformed --input-shape {spec!r}: a dimension above {MAX_DIM} cannot be right")
        shapes[name] = parsed
    return shapes


def dtype_name(elem_type: int) -> str:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except Exception:
        return onnx.TensorProto.DataType.Name(elem_type).lower()


def _value_info(v: onnx.ValueInfoProto) -> TensorInfo:
    t = v.type.tensor_type
    if not t.HasField("shape"):
        return TensorInfo(v.name, None, dtype_name(t.elem_type))
    dims: list = []
    if True:
        for d in t.shape.dim:
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            elif d.HasField("dim_param"):
                dims.append(d.dim_param)
            else:
                dims.append(None)
    return TensorInfo(v.name, tuple(dims), dtype_name(t.elem_type))


def graph_inputs(model: onnx.ModelProto) -> list[TensorInfo]:
    """Real inputs: graph inputs that are not initializers (old exporters list weights as inputs)."""
    inits = {i.name for i in model.graph.initializer}
    return [_value_info(v) for v in model.graph.input if v.name not in inits]


def graph_outputs(model: onnx.ModelProto) -> list[TensorInfo]:
    return [_value_info(v) for v in model.graph.output]


def opset_version(model: onnx.ModelProto) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return 0


def _read(path: Path) -> onnx.ModelProto:
    if not path.exists():
        raise EdgecError(f"model file not found: {path}")
    if path.is_dir():
        raise EdgecError(f"{path} is a folder, not an ONNX model file")
    if path.stat().st_size == 0:
        raise EdgecError(f"{path} is empty, not an ONNX model")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise EdgecError(f"{path} is not a readable ONNX model (truncated or not protobuf): {_first_line(e)}") from None
    if not model.HasField("graph") or (len(model.graph.node) == 0 and len(model.graph.output) == 0):
        raise EdgecError(f"{path} is not an ONNX model (no graph in the file)")
    if len(model.graph.output) == 0:
        raise EdgecError(f"{path} has no outputs: its graph declares no output tensor, so it computes nothing")
    for kind, values in (("output", model.graph.output), ("input", model.graph.input)):
        seen: set[str] = set()
        for v in values:
            if v.name in seen:
                raise EdgecError(f"{path} lists graph {kind} {v.name!r} twice; each {kind} must be a distinct tensor")
            seen.add(v.name)
    _check_external_data(model, path)
    try:
        onnx.load_external_data_for_model(model, str(path.parent))
    except Exception as e:  # onnx raises OSError, ValueError or its checker's ValidationError here
        raise EdgecError(f"{path}: its external weight data could not be read: {_first_line(e)}") from None
    return model


def _check_external_data(model: onnx.ModelProto, path: Path) -> None:
    """External weights must be files inside the model's folder: a model is untrusted and its `location`
    must not make edgec read (and then embed in generated code) anything else on this machine."""
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    base = path.parent.resolve()
    for t in _get_all_tensors(model):
        if not uses_external_data(t):
            continue
        loc = next((e.value for e in t.external_data if e.key == "location"), "")
        shown = repr(loc[:200])
        if not loc or "\0" in loc or os.path.isabs(loc):
            raise EdgecError(f"{path}: weight {t.name!r} refers to external data {shown} outside the model's "
                             "folder; refused (external data files must sit beside the model)")
        target = (base / loc).resolve()
        if target != base and base not in target.parents:
            raise EdgecError(f"{path}: weight {t.name!r} refers to external data {shown} outside the model's "
                             "folder; refused (external data files must sit beside the model)")
        if not target.is_file():
            raise EdgecError(f"{path}: external data file {shown} of weight {t.name!r} is missing "
                             f"(looked for {target})")


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:300]


def _check(model: onnx.ModelProto, path: Path) -> None:
    try:
        # the file's size, not ByteSize(): that walks every weight (0.4 s on ResNet-50's 100 MB)
        if path.stat().st_size > 1_900_000_000:
            onnx.checker.check_model(str(path))
        else:
            onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        msg = " ".join(str(e).split())
        raise EdgecError(f"{path} is not a valid ONNX graph: {msg[:400]}") from None


def convert_opset(model: onnx.ModelProto, target: int, what: str = "model") -> onnx.ModelProto:
    """Upgrade the default-domain opset with onnx's version converter."""
    current = opset_version(model)
    if current >= target:
        return model
    try:
        converted = version_converter.convert_version(model, target)
    except Exception as e:  # the converter raises bare RuntimeError/IndexError on unsupported adapters
        raise EdgecError(f"{what} uses opset {current}; converting it to opset {target} failed: {_first_line(e)}") from None
    return converted


def pin_input_shapes(model: onnx.ModelProto, shapes: dict[str, list[int]]) -> None:
    """Write static dims into the graph inputs: given ones, else batch 1 for a leading dynamic dim."""
    inputs = {i.name: i for i in graph_inputs(model)}
    unknown = [n for n in shapes if n not in inputs]
    if unknown:
        raise EdgecError(
            f"--input-shape names unknown input {unknown[0]!r}; the model's inputs are: {', '.join(inputs) or '(none)'}")
    for v in model.graph.input:
        if v.name not in inputs:
            continue
        info = inputs[v.name]
        tt = v.type.tensor_type
        if v.name in shapes:
            want = shapes[v.name]
            # the Python API takes shapes unparsed (the CLI's parser already refuses these)
            for d, x in enumerate(want):
                if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 0 <= x <= MAX_DIM:
                    raise EdgecError(f"--input-shape {v.name}: dim {d} must be an integer from 0 to {MAX_DIM}, "
                                     f"got {x!r}")
            want = [int(x) for x in want]
            if tt.HasField("shape") and len(info.shape) != len(want):
                raise EdgecError(f"--input-shape {v.name}: rank {len(want)} given, the model's input has rank {len(info.shape)} {_fmt(info.shape)}")
            for d, (declared, new) in enumerate(zip(info.shape, want)):
                if isinstance(declared, int) and declared > 0 and declared != new:
                    raise EdgecError(f"--input-shape {v.name}: dim {d} is fixed to {declared} in the model, {new} given")
                # an empty tensor only where the model itself declares one; a 0 for a free dim (read off a
                # symbolic dim, say) would fail much later, far from its cause
                if new == 0 and declared != 0:
                    raise EdgecError(f"--input-shape {v.name}: dim {d} is 0 (an empty tensor) where the model "
                                     f"declares {_fmt(info.shape)}; give its size")
            tt.ClearField("shape")
            tt.shape.dim.extend([onnx.TensorShapeProto.Dimension(dim_value=x) for x in want])
            continue
        if not tt.HasField("shape"):
            raise EdgecError(f"input {v.name!r} has no declared shape; pass --input-shape {v.name}:D1,D2,...")
        bad = [d for d in info.shape if isinstance(d, int) and d <= 0]
        if bad:
            what = "a negative dim" if bad[0] < 0 else "a zero-size dim (an empty tensor)"
            raise EdgecError(f"input {v.name!r} declares {what}: {_fmt(info.shape)}; if that dim means 'any size', "
                             f"pin it with --input-shape {v.name}:D1,D2,...")
        dyn = [i for i, d in enumerate(info.shape) if not (isinstance(d, int) and d > 0)]
        if dyn == [0] or (dyn and dyn[0] == 0 and len(dyn) == 1):
            tt.shape.dim[0].Clear()
            tt.shape.dim[0].dim_value = 1
        elif dyn:
            raise EdgecError(
                f"input {v.name!r} has dynamic dims {_fmt(info.shape)}; pass --input-shape {v.name}:"
                + ",".join(str(d) if isinstance(d, int) and d > 0 else ("1" if i == 0 else "N") for i, d in enumerate(info.shape)))


def _fmt(shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _all_static(model: onnx.ModelProto) -> bool:
    known = {v.name: _value_info(v) for v in list(model.graph.value_info) + list(model.graph.output)}
    consts = {i.name for i in model.graph.initializer}
    return all(o in consts or (o in known and known[o].is_static())
               for n in model.graph.node for o in n.output if o)


def infer_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """onnx's shape inference with data propagation. Where that leaves shapes unknown (shape arithmetic through
    Cast/Slice/Concat, as some exporters emit) and the inputs are static, small shape sub-graphs are folded into
    constants and inference runs again, to a fixpoint: each round makes the shapes behind the next computed
    Reshape known (an attention block per round in transformer-style models)."""
    inferred = _onnx_infer(model)
    if not all(i.is_static() for i in graph_inputs(inferred)):
        return inferred
    while not _all_static(inferred):
        folded = fold_shape_subgraphs(inferred)
        if len(folded.graph.node) == len(inferred.graph.node):
            break  # nothing left to fold: what stays unknown is reported by the stage that needs it
        del folded.graph.value_info[:]
        inferred = _onnx_infer(folded)
    return inferred


def shape_problem(model: onnx.ModelProto) -> str | None:
    """Why shapes stay unknown, if onnx's strict inference can say: the first node whose shapes do not fit
    (e.g. an Add of 7 and 8 pixels when an input size does not divide the network's stride), else None."""
    try:
        shape_inference.infer_shapes(model, check_type=False, strict_mode=True, data_prop=True)
    except Exception as e:  # one line per failing node; the first is where it starts
        return _first_line(e).replace("[ShapeInferenceError] Inference error(s): ", "")
    return None


def _onnx_infer(model: onnx.ModelProto) -> onnx.ModelProto:
    # onnx serializes the model into its C++ inference and parses the result back: without the weights' bytes
    # (shapes never depend on their values beyond FOLD_MAX_ELEMENTS; dims and types stay) that is 2 x 100 MB less
    # copying for ResNet-50; the weights go back in afterwards
    light = onnx.ModelProto()
    light.CopyFrom(model)
    heavy = [i for i, t in enumerate(light.graph.initializer)
             if t.HasField("raw_data") and len(t.raw_data) > 4 * FOLD_MAX_ELEMENTS]
    for i in heavy:
        light.graph.initializer[i].ClearField("raw_data")
    try:
        out = shape_inference.infer_shapes(light, check_type=False, strict_mode=False, data_prop=True)
    except Exception as e:
        raise EdgecError(f"shape inference failed: {_first_line(e)}") from None
    if len(out.graph.initializer) != len(model.graph.initializer):
        raise EdgecError("shape inference changed the model's weights")  # it never adds or drops any
    for i in heavy:
        out.graph.initializer[i].CopyFrom(model.graph.initializer[i])
    return out


FOLD_MAX_ELEMENTS = 4096  # shape data is tiny; never fold weight-sized tensors here


def _eval_node(node: onnx.NodeProto, values: dict[str, np.ndarray], opset: int) -> list[np.ndarray] | None:
    from onnx.reference import ReferenceEvaluator

    ins = [helper.make_tensor_value_info(i, helper.np_dtype_to_tensor_dtype(values[i].dtype), values[i].shape)
           for i in node.input if i]
    outs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    graph = helper.make_graph([node], "fold", ins, outs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        return list(ReferenceEvaluator(m).run(None, {i: values[i] for i in node.input if i}))
    except Exception:
        return None


def fold_shape_subgraphs(model: onnx.ModelProto) -> onnx.ModelProto:
    """Replace nodes that compute small tensors from constants and static shapes by initializers."""
    g = model.graph
    infos = {v.name: _value_info(v) for v in list(g.value_info) + list(g.input) + list(g.output)}
    values = {k: v for k, v in constant_tensors(model).items() if v.size <= FOLD_MAX_ELEMENTS}
    opset = opset_version(model)
    folded: set[int] = set()
    for idx, node in enumerate(model.graph.node):
        if node.domain not in ("", "ai.onnx") or node.op_type == "Constant":
            continue
        if node.op_type == "Shape" and node.input[0] in infos and infos[node.input[0]].is_static():
            shape = np.array(infos[node.input[0]].shape, dtype=np.int64)
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            result = [shape[attrs.get("start", 0):attrs.get("end", len(shape))]]
        elif [i for i in node.input if i] and all(i in values for i in node.input if i):
            result = _eval_node(node, values, opset)
        else:
            continue
        if result is None or any(np.asarray(r).size > FOLD_MAX_ELEMENTS for r in result):
            continue
        values.update({o: np.asarray(r) for o, r in zip(node.output, result)})
        folded.add(idx)
    if not folded:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    kept = [n for i, n in enumerate(model.graph.node) if i not in folded]
    out.graph.node.extend(kept)
    needed = {i for n in kept for i in n.input} | {o.name for o in model.graph.output}
    have = {i.name for i in model.graph.initializer}
    for i in sorted(folded):
        for o in model.graph.node[i].output:
            if o in needed and o not in have:
                out.graph.initializer.append(numpy_helper.from_array(values[o], o))
    return out


def load_model(path: str | os.PathLike, input_shapes: dict[str, list[int]] | None = None, *,
               min_opset: int = MIN_OPSET, check: bool = True, static: bool = True,
               finite_weights: bool = True) -> onnx.ModelProto:
    """Read, check, convert to >= min_opset, pin dynamic dims (if static) and infer shapes.

    finite_weights: refuse NaN weights (what would compile or quantize is a broken model)."""
    path = Path(path)
    model = _read(path)
    if check:
        _check(model, path)
    version = opset_version(model)
    if version == 0:
        raise EdgecError(f"{path} imports no default-domain (ai.onnx) opset")
    newest = onnx.defs.onnx_opset_version()
    if version > newest:
        raise EdgecError(f"{path} uses opset {version}, which does not exist yet: the newest this edgec knows "
                         f"(onnx {onnx.__version__}) is {newest}; export the model with opset {newest} or lower")
    if finite_weights:
        _check_weights(model, path)
    if version < MIN_OPSET:
        model = convert_opset(model, MIN_OPSET, f"{path.name}")
    if min_opset > opset_version(model):
        model = convert_opset(model, min_opset, f"{path.name}")
    if static or input_shapes:
        return with_static_shapes(model, input_shapes or {})
    return infer_shapes(model)


def _check_weights(model: onnx.ModelProto, path: Path) -> None:
    for name, arr in constant_tensors(model).items():
        if arr.dtype.kind in "fc":
            bad = int(np.count_nonzero(np.isnan(arr)))
            if bad:
                raise EdgecError(f"{path}: weight {name!r} holds {bad} NaN value(s) of {arr.size}: the model is broken "
                                 "(training diverged or the export is damaged); fix it before compiling or optimizing")


def _check_sizes(model: onnx.ModelProto) -> None:
    """Refuse shapes whose tensors could not exist on a board (and would overflow size arithmetic)."""
    g = model.graph
    for v in list(g.input) + list(g.value_info) + list(g.output):
        info = _value_info(v)
        if not info.is_static():
            continue
        try:
            itemsize = np.dtype(info.dtype).itemsize
        except TypeError:
            itemsize = 1
        nbytes = int(np.prod(info.shape, dtype=object)) * itemsize
        if nbytes > MAX_TENSOR_BYTES:
            raise EdgecError(f"tensor {v.name!r} would be {nbytes / 2**30:.1f} GiB (shape {_fmt(info.shape)}, "
                             f"{info.dtype}): too large (the limit is {MAX_TENSOR_BYTES >> 30} GiB per tensor); check the input shape")


def with_static_shapes(model: onnx.ModelProto, input_shapes: dict[str, list[int]]) -> onnx.ModelProto:
    """A copy of model with dynamic input dims pinned (given shapes, else batch 1) and shapes inferred."""
    pinned = onnx.ModelProto()
    pinned.CopyFrom(model)
    del pinned.graph.value_info[:]  # stale dynamic shapes from an earlier inference would win over the new ones
    for out in pinned.graph.output:  # declared dynamic output dims (some exporters write -1) are inferred anew
        for d in out.type.tensor_type.shape.dim:
            if not (d.HasField("dim_value") and d.dim_value > 0):
                d.Clear()
    pin_input_shapes(pinned, input_shapes)
    pinned = infer_shapes(pinned)
    _check_sizes(pinned)
    return pinned


def constant_tensors(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Every weight: initializers plus the outputs of Constant nodes (some exporters use those)."""
    out = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            for a in n.attribute:
                if a.name == "value":
                    out[n.output[0]] = numpy_helper.to_array(a.t)
                elif a.name in ("value_float", "value_int"):
                    out[n.output[0]] = np.array(helper.get_attribute_value(a))
                elif a.name in ("value_floats", "value_ints"):
                    out[n.output[0]] = np.array(helper.get_attribute_value(a))
    return out


def tensor_shapes(model: onnx.ModelProto) -> dict[str, TensorInfo]:
    """Shape and dtype of every named value after shape inference."""
    g = model.graph
    infos = {v.name: _value_info(v) for v in list(g.value_info) + list(g.input) + list(g.output)}
    for name, arr in constant_tensors(model).items():
        infos[name] = TensorInfo(name, tuple(arr.shape), arr.dtype.name)
    return infos
