"""Printer: assembles the generated project in reading order.

model.c   provenance header, includes, weight symbol, one static function per layer, entry points
model.h   public API: workspace size, init/run, input/output names, shapes, dtypes, layer table
weights.S + weights.bin   the pre-packed weights, linked in with .incbin (assembles in milliseconds
          whatever the size, unlike C array literals)
Makefile, runner.c, bench.c, ec_harness.h, ec_npy.{c,h}, runtime/<kernels>
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from edgec import __version__
from edgec.codegen.ctext import c_string as c_str, comment_word
from edgec.codegen.emit import POOL_TOKEN, EmitContext, LayerInfo, c_type
from edgec.codegen.ir import Graph, Tensor
from edgec.codegen.memory import Plan
from edgec.errors import EdgecError
from edgec.files import write_bytes_atomic, write_text_atomic
from edgec.runtime_c import root as runtime_root

TEMPLATES = Path(__file__).with_name("templates")
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
_VIEW = re.compile(r"EC_VIEW_COPY\((.*)\);")
_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,62}")
# gcc 12.2 -O1/-O2: ivopts turns a layer loop's arena load into a 0-based TARGET_MEM_REF; the late pure-const
# pass then declares the layer const and modref its arena unread, and the caller drops the call (docs/codegen.md).
# The make line passes these only to a compiler that takes them (gcc >= 11; clang rejects them).
IPA_WORKAROUND = "-fno-ipa-pure-const -fno-ipa-modref"


def flags_if_taken(flags: str) -> str:
    """A make expression: `flags` if $(CC) compiles an empty file with them under -Werror, else nothing."""
    return f"$(shell $(CC) -Werror {flags} -x c -c -o /dev/null /dev/null 2>/dev/null && echo {flags})"


IPA_WORKAROUND_PROBE = flags_if_taken(IPA_WORKAROUND)


def _views(body: str) -> str:
    """A view whose source and destination ended up in the same buffer costs nothing."""
    def sub(m):
        y, x, n = m.group(1).rsplit(", ", 2) if m.group(1).count(", ") == 2 else (None, None, None)
        if y is None:
            return m.group(0)
        return "/* view: shares its input's buffer */" if y == x else f"memcpy({y}, {x}, {n});"
    return _VIEW.sub(sub, body)


def npy_descr(dtype: np.dtype) -> str:
    dt = np.dtype(dtype)
    return "|b1" if dt == np.bool_ else dt.newbyteorder("<").str


def _tensor_table(p: str, kind: str, names: list[str], tensors: list[Tensor]) -> list[str]:
    lines = []
    for i, t in enumerate(tensors):
        dims = ", ".join(str(d) for d in t.shape) or "0"
        lines.append(f"static const int64_t {p}_{kind}_shape_{i}[] = {{{dims}}};")
    rows = [f"    {{{c_str(n)}, {c_str(np.dtype(t.dtype).name)}, {c_str(npy_descr(t.dtype))}, {t.dtype.itemsize}, "
            f"{len(t.shape)}, {p}_{kind}_shape_{i}, {t.size}u}}," for i, (n, t) in enumerate(zip(names, tensors))]
    rows.append("    {0, 0, 0, 0, 0, 0, 0},")
    lines.append(f"const {p}_tensor_info {p}_{kind}s[] = {{\n" + "\n".join(rows) + "\n};")
    return lines


def model_h(p: str, g: Graph, plan: Plan, ctx: EmitContext, layers: list[LayerInfo], threads: int) -> str:
    P = p.upper()
    return f"""/* {p}.h: public API of the generated model (edgec {__version__}). Tensors are dense, row-major
 * (NCHW for images), in the dtype listed in {p}_inputs/{p}_outputs. */
#ifndef {P}_H
#define {P}_H
#include <stddef.h>
#include <stdint.h>

#define {P}_WORKSPACE_BYTES ((size_t){max(plan.arena_bytes, 64)}u)  /* caller-provided, 64-byte aligned */
#define {P}_WEIGHTS_BYTES ((size_t){len(ctx.weights)}u)
#define {P}_NUM_INPUTS {len(g.inputs)}
#define {P}_NUM_OUTPUTS {len(g.outputs)}
#define {P}_NUM_LAYERS {len(layers)}
#define {P}_DEFAULT_THREADS {threads}
#define {P}_NAME {c_str(g.name)}
#define {P}_TARGET {c_str(ctx.target.name)}

typedef struct {{
    const char *name, *dtype, *npy_descr;  /* dtype: numpy name, e.g. "float32"; npy_descr e.g. "<f4" */
    int elem_size, rank;
    const int64_t *shape;
    size_t numel;
}} {p}_tensor_info;

typedef struct {{ const char *name, *op, *algo; int64_t macs; }} {p}_layer_info;

extern const {p}_tensor_info {p}_inputs[];   /* {P}_NUM_INPUTS entries, then a zeroed one */
extern const {p}_tensor_info {p}_outputs[];
extern const {p}_layer_info {p}_layers[];     /* name = the ONNX node(s) each layer implements */
extern double {p}_layer_ms[];                 /* last run's per-layer time (built with PROFILE=1) */

/* Start worker threads (threads <= 0: {P}_DEFAULT_THREADS). Returns 0 on success. */
int {p}_init(int threads);
void {p}_deinit(void);
/* One inference: workspace of {P}_WORKSPACE_BYTES; inputs/outputs in graph order. No allocation. */
int {p}_run(void *workspace, const void *const *inputs, void *const *outputs);

#endif
"""


def _layer_fn(p: str, i: int, info: LayerInfo, body: str, has_pool: bool) -> str:
    # No model text here: the ONNX names of the layer are in {p}_layers[i], as an escaped literal.
    n = info.node
    words = [n.op] + ([n.epilogue.act] if n.epilogue.act else []) + (["residual"] if n.epilogue.residual else [])
    head = f"/* layer {i}: {' + '.join(map(comment_word, words))} ({comment_word(info.algo)}) */"
    body = "\n".join(("    " + ln) if ln.strip() else "" for ln in body.strip("\n").splitlines())
    sig = "uint8_t *ws, const void *const *in, void *const *out"
    if info.par is None:
        return f"{head}\nstatic void {p}_layer_{i}({sig})\n{{\n    (void)ws; (void)in; (void)out;\n{body}\n}}\n"
    # the body covers items [ec_b, ec_e); the pool splits 0..n among the threads
    n, grain = info.par
    run = (f"ec_layer_ctx c = {{ws, in, out}};\n    ec_parallel_for_tid({p}_pool, {n}u, {grain}u, {p}_layer_{i}_task, &c);"
           if has_pool else f"{p}_layer_{i}_range(ws, in, out, 0, 0, {n}u);")
    task = (f"static void {p}_layer_{i}_task(void *c, size_t tid, size_t b, size_t e)\n{{\n"
            f"    const ec_layer_ctx *l = (const ec_layer_ctx *)c;\n"
            f"    {p}_layer_{i}_range(l->ws, l->in, l->out, tid, b, e);\n}}\n") if has_pool else ""
    return (f"{head}\nstatic void {p}_layer_{i}_range({sig}, size_t ec_tid, size_t ec_b, size_t ec_e)\n{{\n"
            f"    (void)ws; (void)in; (void)out; (void)ec_tid;\n{body}\n}}\n{task}"
            f"static void {p}_layer_{i}({sig})\n{{\n    {run}\n}}\n")


def model_c(p: str, g: Graph, plan: Plan, ctx: EmitContext, layers: list[LayerInfo], stamp: dict,
            has_pool: bool, threads: int = 1) -> str:
    P = p.upper()
    loc = plan.location

    def tensor_expr(t: Tensor) -> str:
        kind, k = loc[id(t)]
        return f"(ws + {k})" if kind == "arena" else f"{kind}[{k}]"

    def scratch_expr(sid: int) -> str:
        return f"(ws + {plan.scratch_offsets[sid]})"

    out = [f"/* Generated by edgec {__version__}; do not edit.\n"
           + "".join(f" * {comment_word(k)}: {c_str(v)}\n" for k, v in stamp.items()) + " */",
           "#ifndef _POSIX_C_SOURCE\n#define _POSIX_C_SOURCE 200809L\n#endif",
           "#include <math.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <string.h>\n#include <time.h>",
           f'#include "{p}.h"']
    heads = [r for r in ctx.required if r.endswith(".h")]
    if has_pool:
        heads = ["ec_threadpool.h"] + [h for h in heads if h != "ec_threadpool.h"]
    out.append("\n".join(f'#include "{h}"' for h in heads))
    out.append(f"/* {len(ctx.weights)} bytes of pre-packed weights from weights.bin (weights.S, .incbin) */\n"
               f"extern const uint8_t {p}_weights[];")
    if has_pool:
        out.append(f"static ec_pool {p}_pool_storage;\nstatic ec_pool *{p}_pool = NULL;\n"
                   "typedef struct { uint8_t *ws; const void *const *in; void *const *out; } ec_layer_ctx;")
    else:
        out.append(f"typedef struct ec_pool ec_pool;\nstatic ec_pool *{p}_pool = NULL;")
    out += _tensor_table(p, "input", g.source.get("input_names") or [t.name for t in g.inputs], g.inputs)
    out += _tensor_table(p, "output", g.source.get("output_names") or [t.name for t in g.outputs], g.outputs)
    rows = [f"    {{{c_str(', '.join(l.node.onnx_names) or l.node.name)}, {c_str(l.node.op)}, {c_str(l.algo)}, "
            f"{l.macs}}}," for l in layers] + ["    {0, 0, 0, 0},"]
    out.append(f"const {p}_layer_info {p}_layers[] = {{\n" + "\n".join(rows) + "\n};")
    out.append(f"double {p}_layer_ms[{P}_NUM_LAYERS + 1];")
    from edgec.codegen.ops import _par
    from edgec.codegen.variants import SERIAL_POOL

    for i, info in enumerate(layers):
        # drivers handed the pool split a layer themselves: worth it only above the hand-off cost (ops/_par.py)
        pool = ctx.pool_expr if POOL_TOKEN not in info.body or _par.driver_pooled(ctx.target, info, threads) \
            else SERIAL_POOL
        out.append(_layer_fn(p, i, info, _views(ctx.resolve(info.body, tensor_expr, scratch_expr, pool)), has_pool))
    out.append(_entry(p, layers, has_pool))
    return "\n\n".join(out) + "\n"


def _entry(p: str, layers: list[LayerInfo], has_pool: bool) -> str:
    P = p.upper()
    init = (f"    if (threads <= 0) threads = {P}_DEFAULT_THREADS;\n    {p}_deinit();\n"
            f"    if (threads > 1) {{\n        if (ec_pool_init(&{p}_pool_storage, threads) != 0) return -1;\n"
            f"        {p}_pool = &{p}_pool_storage;\n    }}\n    return 0;") if has_pool else \
        "    (void)threads;\n    return 0;"
    deinit = f"    if ({p}_pool) {{ ec_pool_destroy({p}_pool); {p}_pool = NULL; }}" if has_pool else ""
    calls = "\n".join(f"    EC_LAYER({i}, {p}_layer_{i}(ws, in, out));" for i in range(len(layers)))
    return f"""#ifdef EC_PROFILE
static double {p}_now_ms(void)
{{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}}
#define EC_LAYER(i, call) do {{ double t0_ = {p}_now_ms(); call; {p}_layer_ms[i] = {p}_now_ms() - t0_; }} while (0)
#else
#define EC_LAYER(i, call) call
#endif

int {p}_init(int threads)
{{
{init}
}}

void {p}_deinit(void)
{{
{deinit}
}}

int {p}_run(void *workspace, const void *const *in, void *const *out)
{{
    uint8_t *ws = (uint8_t *)workspace;
    (void)ws; (void)in; (void)out;
{calls}
    return 0;
}}
"""


def weights_name(p: str) -> str:
    return "weights.bin" if p == "model" else f"{p}_weights.bin"


def weights_s(*prefixes: str) -> str:
    blobs = "".join(f"""    .balign 64
    .globl {p}_weights
    .type {p}_weights, %object
{p}_weights:
    .incbin "{weights_name(p)}"
    .byte 0
    .size {p}_weights, . - {p}_weights
""" for p in prefixes)
    what = "blob" if len(prefixes) == 1 else "blobs"
    return f"""/* The weights {what}, linked in as read-only data. */
    .section .rodata
{blobs}    .section .note.GNU-stack,"",%progbits
"""


def runtime_files(required: list[str], extra: list[str]) -> list[str]:
    """Required runtime_c files plus every header they include, transitively, in a stable order."""
    root = runtime_root()
    seen: list[str] = []
    todo = list(extra) + list(required)
    while todo:
        rel = todo.pop(0)
        if rel in seen or not (root / rel).is_file():
            continue
        seen.append(rel)
        for inc in _INCLUDE.findall((root / rel).read_text()):
            for cand in (str(Path(rel).parent / inc), inc):
                cand = str(Path(cand))
                if (root / cand).is_file():
                    todo.append(cand)
                    break
    return seen


def _put(path: Path, data: bytes) -> None:
    """Write unless the file already holds exactly this: an unchanged file keeps its time, so make does not
    rebuild it in a project folder that is written again (edgec tune's workspace)."""
    if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return
    write_bytes_atomic(path, data)


def copy_runtime(out_dir: Path, files: list[str]) -> None:
    root = runtime_root()
    for rel in files:
        dest = out_dir / "runtime" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        _put(dest, (root / rel).read_bytes())
        dest.chmod(0o644)


def _make_flags(target) -> str:
    """The compiler settings every generated Makefile starts with."""
    return f"""ifeq ($(origin CC),default)
CC = {'gcc' if target.arch in ('any', 'x86_64') else target.cc}
endif
ARCH_FLAGS ?= {" ".join(target.cflags)}
CFLAGS ?= -O3
LDFLAGS ?=
LDLIBS = -lm -lpthread
EC_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -I. -Iruntime $(ARCH_FLAGS)
# gcc 12.2 -O1/-O2 dropped layer calls (ivopts rebased arena loads on 0; pure-const, modref misread it): off if taken
EC_IPA_FIX := {IPA_WORKAROUND_PROBE}
EC_CFLAGS += $(EC_IPA_FIX)
{_probe_flags(target)}"""


def _probe_flags(target) -> str:
    """The target's cflags_probe (targets.yaml), kept only where $(CC) takes them (a board's clang may not)."""
    if not target.cflags_probe:
        return ""
    return f"EC_TARGET_FIX := {flags_if_taken(' '.join(target.cflags_probe))}\nEC_CFLAGS += $(EC_TARGET_FIX)\n"


def makefile(p: str, target, sources: list[str]) -> str:
    srcs = " \\\n       ".join([f"{p}.c", "ec_npy.c"] + [f"runtime/{s}" for s in sources])
    return f"""# Generated by edgec {__version__} for target {target.name}.
# make [CC=...] [CFLAGS=...] [LDFLAGS=...] [PROFILE=1]
# cross build example: make CC={target.cc} LDFLAGS=-static
{_make_flags(target)}ifeq ($(PROFILE),1)
EC_CFLAGS += -DEC_PROFILE
endif
OBJDIR = obj/$(notdir $(CC))$(if $(filter 1,$(PROFILE)),-prof)
SRCS = {srcs}
OBJS = $(addprefix $(OBJDIR)/,$(SRCS:.c=.o)) $(OBJDIR)/weights.o

all: runner bench

runner: $(OBJDIR)/runner.o $(OBJS)
\t$(CC) $(EC_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

bench: $(OBJDIR)/bench.o $(OBJS)
\t$(CC) $(EC_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(OBJDIR)/%.o: %.c {p}.h
\t@mkdir -p $(dir $@)
\t$(CC) $(EC_CFLAGS) $(CFLAGS) -c -o $@ $<

$(OBJDIR)/bench.o: ec_harness.h

$(OBJDIR)/weights.o: weights.S {weights_name(p)}
\t@mkdir -p $(dir $@)
\t$(CC) $(EC_CFLAGS) -c -o $@ weights.S

clean:
\trm -rf obj runner bench

.PHONY: all clean
"""


def write_model(out_dir: Path, p: str, g: Graph, plan: Plan, ctx: EmitContext, layers: list[LayerInfo],
                stamp: dict, threads: int) -> list[str]:
    """The model's own files ({p}.h, {p}.c, its weights blob) and the runtime files it uses; returns those
    runtime files. Every symbol of the model carries the prefix, so several models share one program."""
    if not _PREFIX.fullmatch(p):  # it names symbols and files: never model text, but check
        raise EdgecError(f"symbol prefix {p!r} is not a C identifier of letters, digits and _")
    out_dir.mkdir(parents=True, exist_ok=True)
    root = runtime_root()
    has_pool = (root / "ec_threadpool.h").is_file() and (root / "ec_threadpool.c").is_file()
    extra = ["ec_threadpool.h", "ec_threadpool.c"] if has_pool else []
    files = runtime_files(ctx.required, extra)
    copy_runtime(out_dir, files)
    _put(out_dir / f"{p}.h", model_h(p, g, plan, ctx, layers, threads).encode())
    _put(out_dir / f"{p}.c", model_c(p, g, plan, ctx, layers, stamp, has_pool, threads).encode())
    _put(out_dir / weights_name(p), bytes(ctx.weights))
    for name in (f"{p}.h", f"{p}.c", weights_name(p)):
        (out_dir / name).chmod(0o644)  # atomic writes start private; a source tree is meant to be shared
    return files


def write_project(out_dir: Path, p: str, g: Graph, plan: Plan, ctx: EmitContext, layers: list[LayerInfo],
                  stamp: dict, threads: int) -> list[str]:
    """Write every file of the project; returns the runtime sources compiled."""
    files = write_model(out_dir, p, g, plan, ctx, layers, stamp, threads)
    sources = [f for f in files if f.endswith(".c")]
    write_text_atomic(out_dir / "weights.S", weights_s(p))
    write_text_atomic(out_dir / "Makefile", makefile(p, ctx.target, sources))
    for name in ("runner.c", "bench.c", "ec_harness.h", "ec_npy.c", "ec_npy.h"):
        write_text_atomic(out_dir / name, (TEMPLATES / name).read_text())
    for name in ("weights.S", "Makefile", "runner.c", "bench.c", "ec_harness.h", "ec_npy.c", "ec_npy.h"):
        (out_dir / name).chmod(0o644)
    return sources


# -- one program holding several builds of one or more layer models (edgec tune) ---------------------------

TUNE_FILES = ("tune.c", "ec_harness.h", "ec_npy.c", "ec_npy.h")


def tune_cands_h(n: int, graphs: list[Graph], threads: int) -> str:
    n_in, n_out = sum(len(g.inputs) for g in graphs), sum(len(g.outputs) for g in graphs)
    return f"""/* tune_cands.h: {n} candidate builds of {len(graphs)} layer model(s) in this program (edgec {__version__}). */
#ifndef TUNE_CANDS_H
#define TUNE_CANDS_H
#include <stddef.h>
#include <stdint.h>

#define TUNE_NUM_CANDS {n}
#define TUNE_NUM_LAYERS {len(graphs)}
#define TUNE_NUM_INPUTS {n_in}   /* every layer's inputs, layer by layer: the program's .npy arguments */
#define TUNE_NUM_OUTPUTS {n_out}
#define TUNE_DEFAULT_THREADS {threads}

typedef struct {{
    const char *name, *dtype, *npy_descr;
    int elem_size, rank;
    const int64_t *shape;
    size_t numel;
}} tune_tensor_info;

typedef struct {{
    int in0, n_in, out0, n_out;  /* its slices of tune_inputs / tune_outputs */
}} tune_layer;

typedef struct {{
    const char *name, *algo;  /* the variant, and the kernel it gave the tuned layer */
    int layer;                /* which layer model it is a build of */
    size_t workspace_bytes;
    int (*init)(int threads);
    void (*deinit)(void);
    int (*run)(void *workspace, const void *const *in, void *const *out);
}} tune_cand;

extern const tune_tensor_info tune_inputs[];   /* the same for every candidate of a layer: one model */
extern const tune_tensor_info tune_outputs[];
extern const tune_layer tune_layers[];
extern const tune_cand tune_cands[];

#endif
"""


def tune_cands_c(prefixes: list[str], names: list[str], algos: list[str], graphs: list[Graph],
                 layers: list[int]) -> str:
    out = [f"/* Generated by edgec {__version__}; do not edit. */",
           "#include <stddef.h>\n#include <stdint.h>\n\n#include \"tune_cands.h\"",
           "\n".join(f'#include "{p}.h"' for p in prefixes)]
    ins = [(n, t) for g in graphs for n, t in zip(g.source.get("input_names") or [t.name for t in g.inputs], g.inputs)]
    outs = [(n, t) for g in graphs
            for n, t in zip(g.source.get("output_names") or [t.name for t in g.outputs], g.outputs)]
    out += _tensor_table("tune", "input", [n for n, _ in ins], [t for _, t in ins])
    out += _tensor_table("tune", "output", [n for n, _ in outs], [t for _, t in outs])
    rows, i0, o0 = [], 0, 0
    for g in graphs:
        rows.append(f"    {{{i0}, {len(g.inputs)}, {o0}, {len(g.outputs)}}},")
        i0, o0 = i0 + len(g.inputs), o0 + len(g.outputs)
    out.append("const tune_layer tune_layers[] = {\n" + "\n".join(rows) + "\n};")
    rows = [f"    {{{c_str(n)}, {c_str(a)}, {l}, {p.upper()}_WORKSPACE_BYTES, {p}_init, {p}_deinit, {p}_run}},"
            for p, n, a, l in zip(prefixes, names, algos, layers)]
    out.append("const tune_cand tune_cands[] = {\n" + "\n".join(rows) + "\n};")
    return "\n\n".join(out) + "\n"


def tune_unit_c(prefixes: list[str]) -> str:
    """Several candidates as one translation unit: the runtime headers they share are parsed once (most of a
    candidate file's compile time). Their file-scope names carry their prefixes, but for the layer context's
    typedef and the profiling macro, renamed and dropped between them."""
    out = [f"/* Generated by edgec {__version__}; do not edit. Candidates {', '.join(prefixes)}, one unit. */"]
    for p in prefixes:
        out.append(f'#define ec_layer_ctx {p}_layer_ctx\n#include "{p}.c"\n#undef ec_layer_ctx\n#undef EC_LAYER')
    return "\n".join(out) + "\n"


def tune_makefile(prefixes: list[str], target, sources: list[str], units: list[list[str]] | None = None) -> str:
    own = [f"tune_unit{k}.c" for k in range(len(units))] if units else [f"{p}.c" for p in prefixes]
    srcs = " \\\n       ".join(own + ["tune_cands.c", "ec_npy.c"] + [f"runtime/{s}" for s in sources])
    unit_rules = "".join(f"""$(OBJDIR)/tune_unit{k}.o: tune_unit{k}.c {" ".join(f"{p}.c {p}.h" for p in u)}
\t@mkdir -p $(dir $@)
\t$(CC) $(EC_CFLAGS) $(CFLAGS) -c -o $@ $<

""" for k, u in enumerate(units or []))
    heads = " ".join([f"{p}.h" for p in prefixes] + ["tune_cands.h"])
    blobs = " ".join(weights_name(p) for p in prefixes)
    return f"""# Generated by edgec {__version__} for target {target.name}.
# The tuning program: {len(prefixes)} candidate builds, each with its own symbol prefix, the runtime once.
# make [CC=...] [CFLAGS=...] [LDFLAGS=...]
{_make_flags(target)}OBJDIR = obj/$(notdir $(CC))
SRCS = {srcs}
OBJS = $(addprefix $(OBJDIR)/,$(SRCS:.c=.o)) $(OBJDIR)/weights.o

all: tune

tune: $(OBJDIR)/tune.o $(OBJS)
\t$(CC) $(EC_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# the runtime kernels do not see the candidates: their objects outlive a change of candidates
$(OBJDIR)/runtime/%.o: runtime/%.c
\t@mkdir -p $(dir $@)
\t$(CC) $(EC_CFLAGS) $(CFLAGS) -c -o $@ $<

# a candidate's object (or a unit's: tune_unit<k>.c) depends on its own files only, the table and the harness
# on all of them
{unit_rules}$(OBJDIR)/%.o: %.c %.h
\t@mkdir -p $(dir $@)
\t$(CC) $(EC_CFLAGS) $(CFLAGS) -c -o $@ $<

$(OBJDIR)/tune_cands.o $(OBJDIR)/tune.o: $(OBJDIR)/%.o: %.c {heads} ec_npy.h ec_harness.h
\t@mkdir -p $(dir $@)
\t$(CC) $(EC_CFLAGS) $(CFLAGS) -c -o $@ $<

$(OBJDIR)/weights.o: weights.S {blobs}
\t@mkdir -p $(dir $@)
\t$(CC) $(EC_CFLAGS) -c -o $@ weights.S

clean:
\trm -rf obj tune

.PHONY: all clean
"""


def write_tune_project(out_dir: Path, prefixes: list[str], names: list[str], algos: list[str], graphs: list[Graph],
                       target, runtime: list[str], threads: int, layers: list[int],
                       units: list[list[str]] | None = None) -> None:
    """The files around candidate builds already written by write_model (prefixes): the candidate table,
    one weights.S for all their blobs, the Makefile (each runtime source compiled once) and the harness.
    units: the candidates grouped into translation units (tune_unit<k>.c, each compiled once; every prefix in
    one unit), else one object per candidate file."""
    if units is not None and sorted(p for u in units for p in u) != sorted(prefixes):
        raise EdgecError("internal: tune units must hold every candidate once")
    sources = [f for f in runtime if f.endswith(".c")]
    files = {"tune_cands.h": tune_cands_h(len(prefixes), graphs, threads),
             "tune_cands.c": tune_cands_c(prefixes, names, algos, graphs, layers),
             "weights.S": weights_s(*prefixes), "Makefile": tune_makefile(prefixes, target, sources, units)}
    files.update({f"tune_unit{k}.c": tune_unit_c(u) for k, u in enumerate(units or [])})
    files.update({name: (TEMPLATES / name).read_text() for name in TUNE_FILES})
    for name, text in files.items():
        _put(out_dir / name, text.encode())
        (out_dir / name).chmod(0o644)
