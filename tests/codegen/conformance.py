"""Batch runner for the ONNX backend node cases: one generated model per case (symbol prefix c<i>),
one combined build (make -k -j2), one small driver that runs any case by index."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from edgec.codegen.lower import lower_file
from edgec.codegen.printer import IPA_WORKAROUND_PROBE
from edgec.codegen.project import generate
from edgec.codegen.targets import Target
from edgec.errors import EdgecError

# inputs that are shape/axes parameters: edgec needs them at compile time, so the case's data becomes a constant
PARAM_INPUTS = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 3), "Squeeze": (1,),
    "Unsqueeze": (1,), "Split": (1,), "Resize": (1, 2, 3), "Upsample": (1,), "ReduceMean": (1,), "ReduceSum": (1,),
    "ReduceMax": (1,), "ReduceMin": (1,), "ReduceProd": (1,), "ReduceL1": (1,), "ReduceL2": (1,),
    "ReduceSumSquare": (1,), "ReduceLogSum": (1,), "ReduceLogSumExp": (1,), "ConstantOfShape": (0,),
    "Range": (0, 1, 2), "OneHot": (1,), "Clip": (1, 2), "LayerNormalization": (1, 2),
    "InstanceNormalization": (1, 2), "BatchNormalization": (1, 2, 3, 4), "Conv": (1, 2), "ConvTranspose": (1, 2),
    "PRelu": (1,),
}

DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ec_npy.h"
typedef struct { const char *name, *dtype, *npy_descr; int elem_size, rank; const int64_t *shape; size_t numel; } info;
typedef struct { int (*run)(void *, const void *const *, void *const *); const info *ins, *outs; size_t ws; int nin, nout; } entry;
%(decls)s
static const entry cases[] = {
%(rows)s
};
int main(int argc, char **argv)
{
    if (argc < 3) return 2;
    const entry *e = &cases[atoi(argv[1])];
    const char *out_dir = argv[2];
    const void *ins[64]; void *outs[64]; ec_npy arrs[64]; char err[256];
    if (argc - 3 != e->nin) { fprintf(stderr, "driver: %%d inputs wanted\n", e->nin); return 2; }
    for (int i = 0; i < e->nin; i++) {
        if (ec_npy_read(argv[3 + i], &arrs[i], err, sizeof err)) { fprintf(stderr, "%%s\n", err); return 2; }
        if (arrs[i].numel != e->ins[i].numel) { fprintf(stderr, "driver: input %%d size\n", i); return 2; }
        ins[i] = arrs[i].data;
    }
    for (int i = 0; i < e->nout; i++) outs[i] = calloc(e->outs[i].numel + 1, (size_t)e->outs[i].elem_size);
    void *ws = aligned_alloc(64, e->ws);
    if (e->run(ws, ins, outs)) return 3;
    for (int i = 0; i < e->nout; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%%s/output_%%d.npy", out_dir, i);
        const info *t = &e->outs[i];
        if (ec_npy_write(p, t->npy_descr, t->rank, t->shape, outs[i], t->numel * (size_t)t->elem_size)) return 4;
        free(outs[i]);
    }
    for (int i = 0; i < e->nin; i++) ec_npy_free(&arrs[i]);
    free(ws);
    return 0;
}
"""


@dataclass
class CaseResult:
    name: str
    ok: bool
    why: str = ""


@dataclass
class Batch:
    work: Path
    target: Target
    cases: list = field(default_factory=list)       # (index, case, dir, inputs, outputs)
    results: dict = field(default_factory=dict)     # name -> CaseResult


def freeze_params(model: onnx.ModelProto, inputs: list[np.ndarray]) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    """Graph inputs feeding shape/axes parameter slots become initializers holding the case's data."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    names = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
    slots = {n.input[k] for n in m.graph.node for k in PARAM_INPUTS.get(n.op_type, ()) if k < len(n.input)}
    keep_in, keep_data = [], []
    for vi, name, arr in zip(list(m.graph.input), names, inputs):
        if name in slots:
            m.graph.initializer.append(numpy_helper.from_array(np.asarray(arr), name))
            m.graph.input.remove(vi)
        else:
            keep_data.append(np.asarray(arr))
    return m, keep_data


def prepare(batch: Batch, index: int, case) -> None:
    name = case.name
    if not case.data_sets:
        batch.results[name] = CaseResult(name, False, "no data set")
        return
    ins, outs = case.data_sets[0]
    ins = [numpy_helper.to_array(a) if isinstance(a, onnx.TensorProto) else a for a in ins]
    outs = [numpy_helper.to_array(a) if isinstance(a, onnx.TensorProto) else a for a in outs]
    try:
        model, data = freeze_params(case.model, list(ins))
        d = batch.work / f"c{index}"
        d.mkdir(parents=True, exist_ok=True)
        onnx.save(model, d / "case.onnx")
        real = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
        shapes = {n: list(np.shape(a)) for n, a in zip(real, data) if np.ndim(a) > 0}
        g = lower_file(d / "case.onnx", shapes)
        generate(g, d, batch.target, prefix=f"c{index}")
    except EdgecError as e:
        batch.results[name] = CaseResult(name, False, f"compile: {e}")
        return
    except Exception as e:  # a bug in edgec: counted as a failure, shown with its type
        batch.results[name] = CaseResult(name, False, f"internal: {type(e).__name__}: {str(e)[:150]}")
        return
    data = [_as_declared(a, vi) for a, vi in zip(data, [i for i in model.graph.input if i.name in real])]
    outs = [_as_declared(o, vi) for o, vi in zip(outs, model.graph.output)]
    batch.cases.append((index, case, d, data, outs))


def _as_declared(a, vi: onnx.ValueInfoProto) -> np.ndarray:
    """Some generators store object arrays: give them the dtype the graph declares."""
    a = np.asarray(a)
    if a.dtype == object:
        try:
            a = a.astype(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
        except (TypeError, ValueError):
            pass
    return a


def build(batch: Batch, cflags: str, cc: str = "gcc") -> Path:
    """Compile every case (failures isolated per object), then link the driver from the ones that built."""
    # runtime sources are compiled from a case's copy, so every object sees the same headers
    srcs: dict[str, Path] = {}
    for _, _, d, _, _ in batch.cases:
        for p in sorted((d / "runtime").rglob("*.c")):
            srcs.setdefault(str(p.relative_to(d / "runtime")), d / "runtime")
    tmpl = Path(__file__).resolve().parents[2] / "codegen" / "templates"
    objs = []
    rules = []
    for i, _, d, _, _ in batch.cases:
        rules.append(f"c{i}/c{i}.o: c{i}/c{i}.c\n\t$(CC) $(F) -Ic{i} -Ic{i}/runtime -c -o $@ $<\n"
                     f"c{i}/weights.o: c{i}/weights.S\n\tcd c{i} && $(CC) -c -o weights.o weights.S\n")
        objs += [f"c{i}/c{i}.o", f"c{i}/weights.o"]
    for k, (rel, rt) in enumerate(sorted(srcs.items())):
        rules.append(f"rt{k}.o: {rt / rel}\n\t$(CC) $(F) -I{rt} -c -o $@ $<\n")
        objs.append(f"rt{k}.o")
    rules.append(f"ec_npy.o: {tmpl / 'ec_npy.c'}\n\t$(CC) $(F) -c -o $@ $<\n")
    # the generated Makefile's gcc workaround flags too, so the cases build as users' projects do
    mk = (f"CC = {cc}\nIPA_FIX := {IPA_WORKAROUND_PROBE}\n"
          f"F = -std=c11 -D_POSIX_C_SOURCE=200809L {' '.join(batch.target.cflags)} {cflags} $(IPA_FIX) -I{tmpl}\n"
          f"all: {' '.join(objs)} ec_npy.o\n" + "\n".join(rules))
    (batch.work / "Makefile").write_text(mk)
    subprocess.run(["make", "-k", "-j2", "-C", str(batch.work)], capture_output=True, text=True)
    built = []
    for entry in batch.cases:
        i, case, d = entry[0], entry[1], entry[2]
        if (d / f"c{i}.o").exists() and (d / "weights.o").exists():
            built.append(entry)
        else:
            err = subprocess.run(f"make -C {batch.work} c{i}/c{i}.o", shell=True, capture_output=True, text=True)
            first = next((ln for ln in err.stderr.splitlines() if "error" in ln), "build failed")
            batch.results[case.name] = CaseResult(case.name, False, f"C build: {first[:200]}")
    batch.cases = built
    decls = "\n".join(f'#include "c{i}/c{i}.h"' for i, *_ in built)
    rows = "\n".join(f"    {{c{i}_run, (const info *)c{i}_inputs, (const info *)c{i}_outputs, C{i}_WORKSPACE_BYTES, "
                     f"C{i}_NUM_INPUTS, C{i}_NUM_OUTPUTS}}," for i, *_ in built) or "    {0, 0, 0, 0, 0, 0},"
    (batch.work / "driver.c").write_text(DRIVER % {"decls": decls, "rows": rows})
    link = [o for o in objs if not o.startswith("c") or any(o.startswith(f"c{i}/") for i, *_ in built)]
    cmd = [cc, *batch.target.cflags, *cflags.split(), "-std=c11", "-D_POSIX_C_SOURCE=200809L", f"-I{batch.work}",
           f"-I{tmpl}", "-o", "driver", "driver.c", "ec_npy.o", *link, "-lm", "-lpthread"]
    if not batch.target.runs_natively():
        cmd.append("-static")
    proc = subprocess.run(cmd, cwd=batch.work, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return batch.work / "driver"


def run(batch: Batch, driver: Path, rtol: float = 1e-3, atol: float = 1e-5) -> None:
    qemu = list(batch.target.qemu or []) if not batch.target.runs_natively() else []
    for slot, (i, case, d, data, want) in enumerate(batch.cases):
        paths = []
        for k, a in enumerate(data):
            p = d / f"in_{k}.npy"
            np.save(p, np.ascontiguousarray(a))
            paths.append(str(p))
        proc = subprocess.run([*qemu, str(driver), str(slot), str(d), *paths], capture_output=True, text=True,
                              timeout=120)
        if proc.returncode != 0:
            batch.results[case.name] = CaseResult(case.name, False, f"run: exit {proc.returncode} {proc.stderr[:200]}")
            continue
        batch.results[case.name] = _check(case.name, d, want, rtol, atol)


def _check(name: str, d: Path, want: list[np.ndarray], rtol: float, atol: float) -> CaseResult:
    for k, w in enumerate(want):
        if w.dtype.kind not in "biuf" or w.dtype.name in ("float16", "bfloat16"):
            return CaseResult(name, False, f"output {k}: dtype {w.dtype} not supported")
        got = np.load(d / f"output_{k}.npy")
        if got.size != w.size:
            return CaseResult(name, False, f"output {k}: {got.shape} vs {w.shape}")
        got = got.reshape(w.shape)
        if w.dtype.kind in "biu":
            if not np.array_equal(got.astype(w.dtype), w):
                return CaseResult(name, False, f"output {k}: values differ")
            continue
        if not np.allclose(got.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True):
            err = np.nanmax(np.abs(got.astype(np.float64) - w))
            return CaseResult(name, False, f"output {k}: max abs err {err:.3g}")
    return CaseResult(name, True)


def run_cases(cases, work: Path, target: Target, cflags: str = "-O1 -Wall -Wextra -Werror") -> dict:
    batch = Batch(work, target)
    for i, case in enumerate(cases):
        prepare(batch, i, case)
    driver = build(batch, cflags, cc=target.cc if not target.runs_natively() else "gcc")
    run(batch, driver)
    return batch.results
