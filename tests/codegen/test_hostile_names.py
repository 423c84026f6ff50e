"""A model is untrusted input: hostile names must not change the generated code, only escaped string literals.

Every corpus entry is used as a node name, a tensor name, a graph input and a graph output of a small real model
(two Convs, Relu, Add, two depthwise Convs sharing one node name, Flatten, Gemm, MatMul); hostile file names give the
graph name. Each model is compiled with the Python API, built with -Werror, run, compared with onnxruntime, and:
  - no file is created by model text (the runner runs in a temp dir; the classic payload would `touch PWNED`);
  - model.c/model.h are the same as for a benign-named twin once string literals are blanked (so no model text
    sits in code or comments), and every literal there is in the escaped form (no ?, *, quote, backslash-newline);
  - Makefile, weights.S, weights.bin and the templates are byte-identical to the twin's;
  - the compiler reads every literal back as the exact UTF-8 bytes of the name (a C program prints them).
"""

from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen import build_project, compile_model, get_target
from edgec.codegen.ctext import SAFE_CHARS, c_string
from edgec.codegen.emit import EmitContext
from edgec.codegen.lower import lower_model
from edgec.codegen.verifier import onnxruntime_outputs, run_binary
from edgec.model import load_model

STRICT = "-O2 -Wall -Wextra -Werror"
PAYLOAD = ('x */ int system(const char *); __attribute__((constructor)) static void p(void){ system("touch PWNED"); }'
           ' /* y')
# Distinct, non-empty (ONNX reserves "" for "no tensor"), no NUL.
TENSOR_CORPUS = [
    "a.b", "a_b", PAYLOAD, "*/", "/*", "// line comment", 'say "hi"', "back\\slash", "trailing\\", "new\nline",
    "cr\rlf\r\n", "??/", 'x??/"', "??=define", "??'", "??(??)??!??<??>??-", "#include <x>", "%s%n%x%%",
    "ctl \x01\x02\x07\x08\t\x0b\x0c\x1b[31m\x7f end", "Ωμέγα", "emoji 🙂🚀", "é123", "\\x41\\101 \\u00e9",
    "x" * 10000, "$(shell touch PWNED)", "`touch PWNED`; touch PWNED", "'; touch PWNED #", "*", "a\\\nb",
]
NODE_CORPUS = TENSOR_CORPUS + [""]
# File names cannot hold "/" or NUL; the stem becomes the graph name (MODEL_NAME).
STEMS = ['st"q ??= ??\' ??) *\\x41 \\101 trailing\\', "nl\nCR\r\ttab \x01\x1b[31m %s%n #include <x>",
         "Ωμέγα 🙂 é123 $(touch PWNED) `touch PWNED` ;touch PWNED", "-x " + "L" * 190]
N_IN, N_OUT, N_BRANCH = 8, 8, 6  # inputs: image, residual, 6 branch inputs; outputs: MatMul, Relu, 6 branches
CANONICAL = re.compile(r'"(?:[%s]|\\[0-7]{3})*"' % re.escape("".join(sorted(SAFE_CHARS))))


def _rot(seq, k):
    k %= len(seq)
    return seq[k:] + seq[:k]


def _names(j: int) -> dict:
    """Names of model j: tensor names all distinct, node names from a shifted list with two forced duplicates."""
    t = _rot(TENSOR_CORPUS, N_IN * j)
    ins, outs, mids = t[:N_IN], t[N_IN:N_IN + N_OUT], t[N_IN + N_OUT:]
    n = _rot(NODE_CORPUS, 19 * j + 3)
    return {"in": ins, "out": outs, "mid": mids, "node": n[:19], "graph": t[5], "init": [f"w{i}:{x}" for i, x in
                                                                                        enumerate(n[:9])]}


def _benign(j: int) -> dict:
    return {"in": [f"in{i}" for i in range(N_IN)], "out": [f"out{i}" for i in range(N_OUT)],
            "mid": [f"t{i}" for i in range(len(TENSOR_CORPUS) - N_IN - N_OUT)],
            "node": [f"n{i}" for i in range(19)], "graph": "g", "init": [f"w{i}" for i in range(9)]}


def _model(nm: dict, seed: int) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    ins, outs, mid, nn, wn = nm["in"], nm["out"], nm["mid"], nm["node"], nm["init"]
    w = [rng.uniform(-0.5, 0.5, s).astype(np.float32) for s in
         [(4, 3, 3, 3), (4,), (4, 4, 3, 3), (4, 1, 3, 3), (4, 1, 3, 3), (10, 256), (10,), (10, 10), (4,)]]
    inits = [numpy_helper.from_array(a, wn[i]) for i, a in enumerate(w)]
    N = helper.make_node
    # ConvA/ConvB and the two depthwise convs share node names: packed weights must not be shared with them.
    nodes = [N("Conv", [ins[0], wn[0], wn[1]], [mid[0]], name=nn[0], pads=[1, 1, 1, 1]),
             N("Relu", [mid[0]], [outs[1]], name=nn[1]),
             N("Conv", [outs[1], wn[2]], [mid[1]], name=nn[0], pads=[1, 1, 1, 1]),
             N("Add", [mid[1], ins[1]], [mid[2]], name=nn[2]),
             N("Conv", [mid[2], wn[3], wn[8]], [mid[3]], name=nn[3], group=4, pads=[1, 1, 1, 1]),
             N("Conv", [mid[3], wn[4], wn[8]], [mid[4]], name=nn[3], group=4, pads=[1, 1, 1, 1]),
             N("Flatten", [mid[4]], [mid[5]], name=nn[4]),
             N("Gemm", [mid[5], wn[5], wn[6]], [mid[6]], name=nn[5], transB=1),
             N("MatMul", [mid[6], wn[7]], [outs[0]], name=nn[6])]
    for k in range(N_BRANCH):
        nodes += [N("Add", [outs[0], ins[2 + k]], [mid[7 + k]], name=nn[7 + 2 * k]),
                  N("Relu", [mid[7 + k]], [outs[2 + k]], name=nn[8 + 2 * k])]
    vi = helper.make_tensor_value_info
    g_in = [vi(ins[0], TensorProto.FLOAT, [1, 3, 8, 8]), vi(ins[1], TensorProto.FLOAT, [1, 4, 8, 8])] + \
        [vi(x, TensorProto.FLOAT, [1, 10]) for x in ins[2:]]
    g_out = [vi(outs[0], TensorProto.FLOAT, [1, 10]), vi(outs[1], TensorProto.FLOAT, [1, 4, 8, 8])] + \
        [vi(x, TensorProto.FLOAT, [1, 10]) for x in outs[2:]]
    g = helper.make_graph(nodes, nm["graph"], g_in, g_out, inits, doc_string=nm["graph"])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name=nm["graph"])
    m.ir_version = 8
    return m


def _blank_literals(text: str) -> tuple[str, list[str]]:
    """Code with every string literal replaced by "" (comments kept), and the literals, by a small C lexer."""
    out, lits, i, n = [], [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.index("*/", i + 2) + 2
            # literals inside a comment (the provenance header) are blanked too
            body, inner = _blank_quoted(text[i:j])
            out.append(body)
            lits += inner
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(text[i:j])
            i = j
        elif text[i] == "'":
            m = re.compile(r"'(?:[^'\\\n]|\\.)*'").match(text, i)
            assert m, f"bad char literal at {text[i:i + 40]!r}"
            out.append(m.group(0))
            i = m.end()
        elif text[i] == '"':
            m = re.compile(r'"(?:[^"\\\n]|\\.)*"').match(text, i)
            assert m, f"unterminated string literal at {text[i:i + 40]!r}"
            lits.append(m.group(0))
            out.append('""')
            i = m.end()
        else:
            out.append(text[i])
            i += 1
    return "".join(out), lits


def _blank_quoted(comment: str) -> tuple[str, list[str]]:
    lits = re.findall(r'"(?:[^"\\\n]|\\.)*"', comment)
    return re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', comment), lits


NAMES_C = r"""
#include <stdio.h>
#include "model.h"
static void hex(const char *tag, const char *s)
{
    printf("%s ", tag);
    for (; *s; s++) printf("%02x", (unsigned char)*s);
    printf("\n");
}
int main(void)
{
    hex("model", MODEL_NAME);
    for (int i = 0; model_inputs[i].name; i++) hex("in", model_inputs[i].name);
    for (int i = 0; model_outputs[i].name; i++) hex("out", model_outputs[i].name);
    for (int i = 0; model_layers[i].name; i++) hex("layer", model_layers[i].name);
    return 0;
}
"""


def _names_from_c(project) -> dict[str, list[str]]:
    """Names as the compiler read them from the literals: a C program linked with the model prints them."""
    objs = [str(p) for p in sorted((project / "obj").rglob("*.o")) if p.name not in ("runner.o", "bench.o")]
    (project / "names.c").write_text(NAMES_C)
    subprocess.run(["gcc", "-std=c11", *STRICT.split(), "-I.", "-Iruntime", "-o", "names", "names.c", *objs,
                    "-lm", "-lpthread"], cwd=project, check=True, capture_output=True)
    res = subprocess.run(["./names"], cwd=project, check=True, capture_output=True, text=True)
    got: dict[str, list[str]] = {}
    for line in res.stdout.splitlines():
        tag, _, hx = line.partition(" ")
        got.setdefault(tag, []).append(bytes.fromhex(hx).decode("utf-8"))
    return got


def _c_files(d) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


@pytest.mark.parametrize("j", range(len(STEMS)))
def test_hostile_names_build_run_and_match(tmp_path, monkeypatch, j):
    monkeypatch.chdir(tmp_path)  # anything the model text managed to run would write here
    nm = _names(j)
    path = tmp_path / f"{STEMS[j]}.onnx"
    onnx.save(_model(nm, seed=j), path)
    twin = tmp_path / "benign.onnx"
    onnx.save(_model(_benign(j), seed=j), twin)

    b = compile_model(path, tmp_path / "p", target="native")
    bt = compile_model(twin, tmp_path / "q", target="native")
    bins = build_project(b.dir, b.target, cflags=STRICT)

    # run, compare with onnxruntime
    rng = np.random.default_rng(100 + j)
    feeds = {nm["in"][0]: rng.standard_normal((1, 3, 8, 8)).astype(np.float32),
             nm["in"][1]: rng.standard_normal((1, 4, 8, 8)).astype(np.float32)}
    feeds.update({x: rng.standard_normal((1, 10)).astype(np.float32) for x in nm["in"][2:]})
    got = run_binary(bins["runner"], b.target, [feeds[x] for x in nm["in"]], tmp_path / "run")
    # onnxruntime refuses repeated node names (ONNX itself allows them); names do not change the maths
    oracle = _model(nm, seed=j)
    for i, node in enumerate(oracle.graph.node):
        node.name = f"{i}:{node.name}"
    onnx.save(oracle, tmp_path / "oracle.onnx")
    onames, want = onnxruntime_outputs(tmp_path / "oracle.onnx", feeds)
    assert onames == nm["out"] and len(got) == len(want) == N_OUT
    for g_, w_ in zip(got, want):
        np.testing.assert_allclose(g_, w_, rtol=1e-4, atol=1e-5)

    # bench prints the graph name as valid JSON
    res = subprocess.run([str(bins["bench"]), "--runs", "1", "--warmup", "0"], capture_output=True, text=True,
                         check=True)
    assert json.loads(res.stdout)["model"] == STEMS[j]

    # no file was created by the model text
    assert not list(tmp_path.rglob("PWNED")), "model text ran a command"

    # outside string literals, the generated sources do not depend on the names at all
    files, twin_files = _c_files(b.dir), _c_files(bt.dir)
    for name in ("model.c", "model.h"):
        text = files[name].decode("ascii")  # non-ASCII model text only ever appears escaped
        assert "??" not in text and "\r" not in text and not re.search(r"[^\x20-\x7e\n]", text)
        code, lits = _blank_literals(text)
        code_twin, _ = _blank_literals(twin_files[name].decode("ascii"))
        assert code == code_twin, f"{name}: model text outside string literals"
        bad = [x[:80] for x in lits if not CANONICAL.fullmatch(x)]
        assert not bad, f"{name}: literals not in the escaped form: {bad}"
    for name in ("Makefile", "weights.S", "weights.bin", "runner.c", "bench.c", "ec_harness.h", "ec_npy.c",
                 "ec_npy.h"):
        assert files[name] == twin_files[name], name
    assert sorted(set(files) - {"runner", "bench"}) == sorted(twin_files)  # the twin is not built

    # the compiler reads the literals back as the exact names
    c = _names_from_c(b.dir)
    assert c["model"] == [STEMS[j]]
    assert c["in"] == nm["in"] and c["out"] == nm["out"]
    layer_names = c["layer"]
    for node_name in {x for x in nm["node"][:7 + 2 * N_BRANCH] if x}:
        assert any(node_name in ln for ln in layer_names), node_name[:80]


def test_every_entry_reaches_every_role():
    roles = {"in": set(), "out": set(), "mid": set(), "node": set()}
    for j in range(len(STEMS)):
        nm = _names(j)
        for r in roles:
            roles[r].update(nm[r] if r != "node" else nm["node"][:7 + 2 * N_BRANCH])
    for r in ("in", "out", "mid"):
        assert roles[r] == set(TENSOR_CORPUS), r
    assert roles["node"] == set(NODE_CORPUS)


@pytest.mark.parametrize("text", NODE_CORPUS + STEMS + ["\ud800 lone surrogate", "\x00nul"])
def test_c_string_form(text):
    lit = c_string(text)
    assert CANONICAL.fullmatch(lit)
    for bad in ("??", "*", "\n", "\r", "\\\n"):
        assert bad not in lit
    # decoding the octal escapes gives back the UTF-8 bytes
    body = lit[1:-1]
    data = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), body.encode("ascii"))
    assert data == text.encode("utf-8", "surrogatepass")


def test_escapes_never_swallow_following_digits():
    assert c_string("é1") == '"\\303\\2511"'  # octal escapes stop after three digits; no hex escapes
    assert c_string("\x01" + "7") == '"\\0017"'
    assert "\\x" not in c_string("\x00\x7f\xff" + "abcdef0123")


def _dup_model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w1, w2 = (rng.uniform(-1, 1, (4, 1, 3, 3)).astype(np.float32) for _ in range(2))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["y1"], name="dup", group=4, pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["y1", "w2"], ["y2"], name="dup", group=4, pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["y2"], ["y3"], name=""),
             helper.make_node("Relu", ["y3"], ["y"], name="Relu_2")]  # the label an unnamed node 2 would get
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def test_lowering_gives_unique_node_names(tmp_path):
    onnx.save(_dup_model(), tmp_path / "m.onnx")
    g = lower_model(load_model(tmp_path / "m.onnx"))
    names = [n.name for n in g.nodes]
    assert len(set(names)) == len(names) == 3  # the first Relu is fused into the second Conv
    assert [n.onnx_names for n in g.nodes][:2] == [["dup"], ["dup", "Relu_2"]]


def test_weight_keys_share_only_equal_bytes():
    ctx = EmitContext(get_target("generic"))
    a, b = np.arange(8, dtype=np.float32), np.arange(8, dtype=np.float32)[::-1]
    pa, pa2, pb = ctx.weight("conv-dw:dup", a), ctx.weight("conv-dw:dup", a.copy()), ctx.weight("conv-dw:dup", b)
    assert pa == pa2 and pb != pa
    assert ctx.weight("conv-dw:dup", a.astype(np.int32)) not in (pa, pb)  # same key, other type
    blob = bytes(ctx.weights)
    assert a.tobytes() in blob and np.ascontiguousarray(b).tobytes() in blob
