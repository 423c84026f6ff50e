"""Int8 convolution (im2col/pointwise packing + q8 GEMM + fixed-point requantization) against the
exact QLinearConv (qkit.exact_int8: its DequantizeLinear -> Conv -> QuantizeLinear form in onnxruntime,
graph optimizations off): per-channel int8 weights, uint8 and int8 activations, int32 bias,
pads/strides/dilation/groups. Requirement: equal or within 1 LSB. The oracle itself is checked against
an integer numpy QLinearConv."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen.ops.qpack import (implicit_matrix, pack_w, pack_w_amx, pack_w_c32, pack_w_implicit, requant_scales,
                                     row_params, to_u8_domain)
from qkit import ISAS, SANITIZE, build, exact_int8, require, run
from test_q8_gemm import VARIANTS, variant_build

# (C, H, W, OC, k, stride, pad, dilation, groups, xdtype)
CASES = [
    (3, 7, 9, 5, 3, 1, 1, 1, 1, np.uint8),
    (8, 9, 9, 16, 1, 1, 0, 1, 1, np.int8),
    (4, 11, 6, 8, 3, 2, 1, 1, 2, np.int8),
    (16, 8, 8, 16, 3, 1, 1, 1, 4, np.uint8),
    (6, 10, 10, 7, 3, 1, 2, 2, 1, np.int8),
    (17, 5, 13, 33, 1, 2, 0, 1, 1, np.uint8),
    (8, 6, 6, 8, 5, 1, 2, 1, 8, np.int8),
    (3, 9, 45, 8, 3, 2, 1, 1, 1, np.uint8),   # stride 2 over rows of >= 16 outputs: the vector im2col
    (5, 6, 66, 4, 5, 2, 2, 1, 1, np.int8),
    (3, 5, 200, 8, 3, 2, 1, 1, 1, np.uint8),  # rows of >= 64 stride-2 outputs: the AVX-512 im2col steps
    (2, 4, 150, 4, 5, 2, 2, 1, 1, np.int8),
    (16, 20, 64, 8, 3, 1, 1, 1, 1, np.uint8),  # >= 64 KB packed: on 2 threads padding and im2col are split too
    (64, 16, 80, 8, 1, 1, 0, 1, 1, np.int8),   # and the pointwise interleave
    # maps of fewer than 4 pixel chunks a thread, >= 4 row panels a thread: 2 threads split the output channels
    (24, 7, 9, 70, 1, 1, 0, 1, 1, np.uint8), (9, 6, 7, 66, 3, 1, 1, 1, 1, np.int8),
    (24, 7, 9, 268, 1, 1, 0, 1, 1, np.uint8),  # claims of 2 panels, the last one a half panel
    # windows that never leave the input, packed straight from it (no padded copy): stride-2 vector steps that would
    # end one byte past the input's last row (64- and 16-pixel steps, a valid 3x3), an even width, >= 64 KB packed
    (6, 7, 127, 8, 1, 2, 0, 1, 1, np.uint8),
    (4, 5, 31, 8, 1, 2, 0, 1, 1, np.int8),
    (5, 9, 65, 4, 3, 2, 0, 1, 1, np.int8),
    (168, 12, 130, 8, 1, 2, 0, 1, 1, np.uint8),
]
# stride-2 cases whose vector steps end at a row's last pixel (the sanitizer test)
STRIDE2_CASES = CASES[7:11] + CASES[-4:]


def _model_and_data(case, rng):
    C, H, W, OC, k, s, p, d, g, xdt = case
    info = np.iinfo(xdt)
    x = rng.integers(info.min, info.max + 1, (1, C, H, W)).astype(xdt)
    w = rng.integers(-128, 128, (OC, C // g, k, k)).astype(np.int8)
    w_s = rng.uniform(0.002, 0.02, OC).astype(np.float32)
    x_s, y_s = np.float32(rng.uniform(0.01, 0.05)), np.float32(rng.uniform(0.5, 2.0))
    x_zp, y_zp = xdt(rng.integers(info.min // 2, info.max // 2)), xdt(rng.integers(info.min // 2, info.max // 2))
    b = rng.integers(-5000, 5000, OC).astype(np.int32)
    inits = [numpy_helper.from_array(np.array(v), n) for v, n in [
        (x_s, "xs"), (x_zp, "xz"), (w, "w"), (w_s, "ws"), (np.zeros(OC, np.int8), "wz"),
        (y_s, "ys"), (y_zp, "yz"), (b, "b")]]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                            kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, dilations=[d, d], group=g)
    tt = helper.np_dtype_to_tensor_dtype(np.dtype(xdt))
    graph = helper.make_graph([node], "qconv", [helper.make_tensor_value_info("x", tt, x.shape)],
                              [helper.make_tensor_value_info("y", tt, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    return model, x, dict(w=w, w_s=w_s, x_s=x_s, y_s=y_s, x_zp=x_zp, y_zp=y_zp, b=b)


def _problem_file(path, case, x, q, x_signed, implicit=False, amx=False, cgemm=False):
    C, H, W, OC, k, s, p, d, g, xdt = case
    Ho, Wo = ((H + 2 * p - d * (k - 1) - 1) // s + 1), ((W + 2 * p - d * (k - 1) - 1) // s + 1)
    zx, zy = to_u8_domain(q["x_zp"], xdt), to_u8_domain(q["y_zp"], xdt)
    scales = requant_scales(q["x_s"], q["w_s"], q["y_s"], OC)
    ocg, blobs = OC // g, {"w": [], "bias": [], "mult": [], "shift": [], **({"scale": []} if cgemm else {})}
    for j in range(g):
        wg = q["w"][j * ocg:(j + 1) * ocg].reshape(ocg, -1)
        rp = row_params(wg, q["b"][j * ocg:(j + 1) * ocg], zx, scales[j * ocg:(j + 1) * ocg], x_signed)
        if cgemm:
            packed = pack_w_c32(implicit_matrix(q["w"][j * ocg:(j + 1) * ocg]) if k > 1 else wg)
        elif implicit:
            packed = pack_w_implicit(q["w"][j * ocg:(j + 1) * ocg], "q8_gemm_32x32__amx" if amx else None)
        else:
            packed = pack_w_amx(wg) if amx else pack_w(wg)
        blobs["w"].append(packed.tobytes())
        for key in [k for k in blobs if k != "w"]:
            blobs[key].append(getattr(rp, key).tobytes())
    hdr = [1, g, C // g, H, W, ocg, k, k, s, s, d, d, p, p, Ho, Wo, zy, 0, 255, zx, 0x80 if x_signed else 0]
    xu = (x.astype(np.int16) + (128 if xdt == np.int8 else 0)).astype(np.uint8)
    path.write_bytes(np.array(hdr, np.int32).tobytes() + b"".join(b"".join(blobs[k]) for k in blobs) + xu.tobytes())
    return (1, OC, Ho, Wo)


@pytest.fixture(scope="module")
def drivers(tmp_path_factory):
    out = {}
    for name, (fn, src, signed) in VARIANTS.items():
        isa = ISAS[name]
        if isa.skip_reason():
            out[name] = isa.skip_reason()
            continue
        srcs, defs = variant_build(name)
        defs.pop("KS_EXTRA", None)
        files = ["q8_conv_driver.c", "q8-conv/q8-conv.c", "q8-gemm/q8-pack.c", "ec_threadpool.c", *srcs]
        out[name] = (isa, build(isa, tmp_path_factory.mktemp(name) / "drv", files, defs), signed)
    return out


@pytest.mark.parametrize("name", list(VARIANTS))
def test_q8_conv_vs_exact_qlinearconv(name, drivers, tmp_path):
    if isinstance(drivers[name], str):
        pytest.skip(drivers[name])
    isa, exe, signed = drivers[name]
    rng = np.random.default_rng(7)
    diffs = []
    cases = CASES if not isa.run else CASES[:4]  # qemu: a few cases are enough
    for i, case in enumerate(cases):
        model, x, q = _model_and_data(case, rng)
        ref = exact_int8(model, {"x": x})[0]
        shape = _problem_file(tmp_path / f"p{i}.bin", case, x, q, bool(signed), amx=name == "amx")
        r = run(isa, exe, str(tmp_path / f"p{i}.bin"), str(tmp_path / f"y{i}.bin"))
        assert r.returncode == 0, r.stderr
        r2 = run(isa, exe, str(tmp_path / f"p{i}.bin"), str(tmp_path / f"t{i}.bin"), "2")  # 2 threads
        assert r2.returncode == 0 and (tmp_path / f"t{i}.bin").read_bytes() == (tmp_path / f"y{i}.bin").read_bytes()
        y = np.frombuffer((tmp_path / f"y{i}.bin").read_bytes(), np.uint8).reshape(shape).astype(np.int16)
        y -= 128 if case[-1] == np.int8 else 0
        d = np.abs(y - ref.astype(np.int16))
        assert d.max() <= 1, f"case {case}: max diff {d.max()}"
        diffs.append(d)
    allq = np.concatenate([d.ravel() for d in diffs])
    print(f"{name}: {allq.size} outputs, {np.mean(allq == 0) * 100:.3f}% equal to the exact reference, rest 1 LSB")


IGEMMS = {  # name -> (isa, GEMM, its implicit form, its file, extra flags)
    "scalar": ("scalar", "q8_gemm_4x8__scalar", "q8_igemm_4x8__scalar", None, ()),
    "avx512vnni": ("avx512vnni", "q8_gemm_8x32__avx512vnni", "q8_igemm_8x32__avx512vnni",
                   "q8-gemm/q8-gemm-8x32-avx512vnni.c", ()),
    "avx512vnni-asan-ubsan": ("avx512vnni", "q8_gemm_8x32__avx512vnni", "q8_igemm_8x32__avx512vnni",
                              "q8-gemm/q8-gemm-8x32-avx512vnni.c", SANITIZE),
    "avxvnni-asan-ubsan": ("avxvnni", "q8_gemm_4x16__avxvnni", "q8_igemm_4x16__avxvnni", "q8-gemm/q8-gemm-4x16-avxvnni.c",
                           SANITIZE),
    # 7-bit weights (the vpmaddubsw kernel's bound holds in either k order)
    "avx2-maddubs": ("avx2", "q8_gemm_4x16__avx2_maddubs", "q8_igemm_4x16__avx2_maddubs",
                     "q8-gemm/q8-gemm-4x16-avx2-maddubs.c", ()),
    "avx2-maddubs-asan-ubsan": ("avx2", "q8_gemm_4x16__avx2_maddubs", "q8_igemm_4x16__avx2_maddubs",
                                "q8-gemm/q8-gemm-4x16-avx2-maddubs.c", SANITIZE)}
# cases of every kind the implicit path takes (the CASES' strides 1 and 2 with it): channels not a multiple of 4,
# 1 channel, dilation, 5x5, pads wider than the window's reach, groups, maps narrower than a 32-pixel tile, stride 3,
# stride 2 with dilation 2, a 3-channel stem at stride 2 over rows of >= 64 outputs (the vector phase split)
IMPLICIT_CASES = CASES + [
    (5, 7, 19, 9, 3, 1, 1, 1, 1, np.uint8), (1, 12, 40, 4, 3, 1, 1, 1, 1, np.int8), (7, 9, 9, 6, 5, 1, 2, 1, 1, np.uint8),
    (6, 13, 17, 12, 3, 1, 3, 2, 1, np.int8), (12, 6, 7, 8, 3, 1, 1, 1, 2, np.uint8), (33, 15, 30, 20, 3, 1, 1, 1, 1, np.uint8),
    (5, 14, 23, 6, 3, 3, 1, 1, 1, np.int8), (6, 17, 21, 8, 3, 2, 2, 2, 1, np.uint8), (3, 9, 161, 16, 3, 2, 1, 1, 1, np.uint8)]


@pytest.mark.parametrize("name", list(IGEMMS))
def test_q8_conv_implicit_gemm_vs_exact_qlinearconv(name, tmp_path):
    """Convs through the implicit GEMM (the padded, phase-split copy read in place, extended rows compacted): within
    1 LSB of the exact QLinearConv, bit-identical with 1 and 2 threads and to the im2col path's bytes (same GEMM)."""
    isa_name, gemm, igemm, src, extra = IGEMMS[name]
    isa = ISAS[isa_name]
    require(isa)
    files = ["q8_conv_driver.c", "q8-conv/q8-conv.c", "q8-gemm/q8-pack.c", "ec_threadpool.c",
             "q8-gemm/q8-gemm-4x8-scalar.c"] + ([src] if src else [])
    exe = build(isa, tmp_path / "imp", files, {"KERNEL": gemm, "IGEMM": igemm}, extra)
    ref_exe = build(isa, tmp_path / "ref", files, {"KERNEL": gemm}, extra)
    rng = np.random.default_rng(9)
    for i, case in enumerate(IMPLICIT_CASES):
        model, x, q = _model_and_data(case, rng)
        if "maddubs" in name:  # 7-bit weights, as onnxruntime's reduce_range makes them
            wi = [t for t in model.graph.initializer if t.name == "w"][0]
            q["w"] = np.clip(q["w"].astype(np.int16) // 2, -64, 64).astype(np.int8)
            wi.CopyFrom(numpy_helper.from_array(q["w"], "w"))
        shape = _problem_file(tmp_path / f"p{i}.bin", case, x, q, False, implicit=True)
        _problem_file(tmp_path / f"r{i}.bin", case, x, q, False)
        outs = []
        for tag, exe_, prob, threads in (("y", exe, "p", ()), ("t", exe, "p", ("2",)), ("z", ref_exe, "r", ())):
            r = run(isa, exe_, str(tmp_path / f"{prob}{i}.bin"), str(tmp_path / f"{tag}{i}.bin"), *threads)
            assert r.returncode == 0, (case, r.stderr[-3000:])
            outs.append((tmp_path / f"{tag}{i}.bin").read_bytes())
        assert outs[0] == outs[1] == outs[2], case
        y = np.frombuffer(outs[0], np.uint8).reshape(shape).astype(np.int16) - (128 if case[-1] == np.int8 else 0)
        assert np.abs(y - exact_int8(model, {"x": x})[0].astype(np.int16)).max() <= 1, case


# the AMX implicit GEMM takes 64-channel multiples per group (16 channel quads of one tap a block): strides 1-2,
# dilation, 5x5, groups, maps narrower than a 32-pixel block, more output channels than one 32-row block
AMX_IMPLICIT_CASES = [
    (64, 9, 20, 33, 3, 1, 1, 1, 1, np.uint8), (64, 13, 13, 48, 3, 1, 1, 1, 1, np.int8),
    (128, 8, 30, 17, 3, 2, 1, 1, 1, np.uint8), (64, 7, 26, 16, 3, 1, 2, 2, 1, np.int8),
    (128, 6, 14, 64, 3, 1, 1, 1, 2, np.uint8), (64, 5, 16, 8, 5, 1, 2, 1, 1, np.int8),
    (192, 10, 12, 70, 3, 1, 1, 1, 1, np.uint8)]


@pytest.mark.parametrize("name,extra", [("amx", ()), ("amx", SANITIZE), ("scalar", ())],
                         ids=["amx", "amx-asan-ubsan", "amx-layout-scalar"])
def test_q8_conv_amx_implicit_gemm_vs_exact_qlinearconv(name, extra, tmp_path):
    """The AMX implicit GEMM (tap-major weights, each tile a block of 16 channel quads of one tap read in place):
    within 1 LSB of the exact QLinearConv, bit-identical with 1 and 2 threads and to the im2col path with the AMX
    GEMM. amx-layout-scalar: the same through the kernels' scalar form (their fallback), on any host."""
    isa = ISAS[name]
    require(isa)
    srcs, defs = variant_build("amx")
    defs.pop("KS_EXTRA", None)
    igemm = "q8_igemm_32x32__amx"
    if name == "scalar":
        srcs, defs, igemm = srcs[1:], {**defs, "KERNEL": "q8_gemm_amx__scalar"}, "q8_igemm_amx__scalar"
    files = ["q8_conv_driver.c", "q8-conv/q8-conv.c", "q8-gemm/q8-pack.c", "ec_threadpool.c", *srcs]
    exe = build(isa, tmp_path / "imp", files, {**defs, "IGEMM": igemm}, extra)
    ref_exe = build(isa, tmp_path / "ref", files, defs, extra)
    rng = np.random.default_rng(11)
    for i, case in enumerate(AMX_IMPLICIT_CASES):
        model, x, q = _model_and_data(case, rng)
        shape = _problem_file(tmp_path / f"p{i}.bin", case, x, q, False, implicit=True, amx=True)
        _problem_file(tmp_path / f"r{i}.bin", case, x, q, False, amx=True)
        outs = []
        for tag, exe_, prob, threads in (("y", exe, "p", ()), ("t", exe, "p", ("2",)), ("z", ref_exe, "r", ())):
            r = run(isa, exe_, str(tmp_path / f"{prob}{i}.bin"), str(tmp_path / f"{tag}{i}.bin"), *threads,
                    timeout=300)
            assert r.returncode == 0, (case, r.stderr[-3000:])
            outs.append((tmp_path / f"{tag}{i}.bin").read_bytes())
        assert outs[0] == outs[1] == outs[2], case
        y = np.frombuffer(outs[0], np.uint8).reshape(shape).astype(np.int16) - (128 if case[-1] == np.int8 else 0)
        assert np.abs(y - exact_int8(model, {"x": x})[0].astype(np.int16)).max() <= 1, case


def _qlinearconv_int(case, x, q):
    """QLinearConv by its definition: int32 accumulation of (x - x_zp) * w + bias, times
    x_scale * w_scale / y_scale, rounded half to even, plus y_zp, saturated."""
    C, H, W, OC, k, s, p, d, g, xdt = case
    xp = np.pad(x.astype(np.int64) - int(q["x_zp"]), ((0, 0), (0, 0), (p, p), (p, p)))
    Ho, Wo = (H + 2 * p - d * (k - 1) - 1) // s + 1, (W + 2 * p - d * (k - 1) - 1) // s + 1
    acc = np.zeros((OC, Ho, Wo), np.int64)
    cg, ocg = C // g, OC // g
    for o in range(OC):
        gi = o // ocg
        for i in range(k):
            for j in range(k):
                win = xp[0, gi * cg:(gi + 1) * cg, i * d:i * d + s * (Ho - 1) + 1:s, j * d:j * d + s * (Wo - 1) + 1:s]
                acc[o] += np.tensordot(q["w"][o, :, i, j].astype(np.int64), win, axes=1)
    acc += q["b"].astype(np.int64)[:, None, None]
    scale = (np.float32(q["x_s"]) * q["w_s"].astype(np.float32)).astype(np.float64) / np.float64(q["y_s"])
    info = np.iinfo(xdt)
    return np.clip(np.rint(acc * scale[:, None, None]) + int(q["y_zp"]), info.min, info.max)[None]


def test_exact_reference_is_qlinearconv():
    """The oracle is the op's arithmetic on any CPU: against the integer definition, equal but for
    float rounding near ties (at most 1 LSB); onnxruntime's own integer kernels play no part."""
    rng = np.random.default_rng(7)
    d = []
    for case in CASES:
        model, x, q = _model_and_data(case, rng)
        d.append(np.abs(exact_int8(model, {"x": x})[0].astype(np.int64) - _qlinearconv_int(case, x, q)).ravel())
    d = np.concatenate(d)
    assert d.max() <= 1 and np.mean(d == 0) > 0.995, (d.max(), np.mean(d == 0))


@pytest.mark.parametrize("name,extra", [("avx2", ()), ("avx512", ()), ("avx512vnni", ("-mavx512vbmi",))],
                         ids=["avx2", "avx512bw", "avx512vbmi"])
def test_q8_conv_stride2_im2col_clean_under_sanitizers(name, extra, tmp_path):
    """The vector stride-2 im2col (16-pixel SSE2 steps, 64-pixel AVX-512 ones with vpmovwb or vpermt2b with VBMI, a
    masked last step) reads no byte past a row's last pixel: clean under ASan/UBSan, and the input, packed straight
    from where the window never leaves it, ends at an inaccessible page (the driver), which masked loads that ASan
    does not check would fault on."""
    isa = ISAS[name]
    require(isa)
    if extra:
        require(ISAS["avx512vbmi"])
    fn, src, signed = VARIANTS[name]
    exe = build(isa, tmp_path / "drv", ["q8_conv_driver.c", "q8-conv/q8-conv.c", "q8-gemm/q8-pack.c",
                                        "ec_threadpool.c", src], {"KERNEL": fn}, SANITIZE + extra)
    rng = np.random.default_rng(7)
    for i, case in enumerate(STRIDE2_CASES):
        model, x, q = _model_and_data(case, rng)
        ref = exact_int8(model, {"x": x})[0]
        shape = _problem_file(tmp_path / f"p{i}.bin", case, x, q, bool(signed))
        r = run(isa, exe, str(tmp_path / f"p{i}.bin"), str(tmp_path / f"y{i}.bin"), timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        y = np.frombuffer((tmp_path / f"y{i}.bin").read_bytes(), np.uint8).reshape(shape).astype(np.int16)
        y -= 128 if case[-1] == np.int8 else 0
        assert np.abs(y - ref.astype(np.int16)).max() <= 1, case


# the channel-lane GEMM through q8_conv (output channels a multiple of 16 per group; strided kxk convs read a stride-1
# padded copy, no phase split): 7x7 and 5x31 maps, strides 1-3,
# pointwise and strided 1x1 (packed input), a last half panel (48, 80 channels), groups with dilation, 5x5; 2 threads
# split pixel chunks (the 20x24 map) or 32-channel panels (the small maps)
CGEMM_CONV_CASES = [
    (8, 7, 7, 16, 3, 1, 1, 1, 1, np.uint8), (20, 14, 14, 32, 3, 2, 1, 1, 1, np.int8),
    (16, 9, 9, 48, 1, 1, 0, 1, 1, np.uint8), (17, 11, 13, 16, 1, 2, 0, 1, 1, np.int8),
    (6, 10, 10, 32, 3, 1, 2, 2, 2, np.uint8), (12, 5, 31, 16, 5, 1, 2, 1, 1, np.int8),
    (64, 20, 24, 64, 3, 1, 1, 1, 1, np.uint8), (32, 7, 7, 96, 3, 1, 1, 1, 1, np.uint8),
    (16, 6, 6, 80, 1, 1, 0, 1, 1, np.int8), (8, 14, 23, 16, 3, 3, 1, 1, 1, np.uint8),
    (64, 30, 34, 32, 3, 2, 1, 1, 1, np.uint8),  # a strided copy of >= 64 KB: split among 2 threads
    (16, 7, 7, 528, 3, 1, 1, 1, 1, np.int8)]  # 2 threads claim 2 of the 17 panels at a time, the last one 16 rows


@pytest.mark.parametrize("extra", [(), SANITIZE], ids=["plain", "asan-ubsan"])
def test_q8_conv_channel_lane_gemm_vs_exact_qlinearconv(extra, tmp_path):
    """Convs through the channel-lane GEMM (implicit copy for kxk, packed input for 1x1): within 1 LSB of the exact
    QLinearConv, bit-identical at 1 and 2 threads."""
    isa = ISAS["avx512vnni"]
    require(isa)
    files = ["q8_conv_driver.c", "q8-conv/q8-conv.c", "q8-gemm/q8-pack.c", "ec_threadpool.c",
             "q8-gemm/q8-gemm-8x32-avx512vnni.c", "q8-gemm/q8-cgemm-32x8-avx512vnni.c"]
    exe = build(isa, tmp_path / "cg", files, {"KERNEL": "q8_gemm_8x32__avx512vnni",
                                              "CGEMM": "q8_cgemm_32x8__avx512vnni",
                                              "PACK_W_BYTES": "q8_pack_w_c32_bytes"}, extra)
    rng = np.random.default_rng(13)
    for i, case in enumerate(CGEMM_CONV_CASES):
        model, x, q = _model_and_data(case, rng)
        shape = _problem_file(tmp_path / f"p{i}.bin", case, x, q, False, cgemm=True)
        outs = []
        for tag, threads in (("y", ()), ("t", ("2",))):
            r = run(isa, exe, str(tmp_path / f"p{i}.bin"), str(tmp_path / f"{tag}{i}.bin"), *threads)
            assert r.returncode == 0, (case, r.stderr[-3000:])
            outs.append((tmp_path / f"{tag}{i}.bin").read_bytes())
        assert outs[0] == outs[1], case
        y = np.frombuffer(outs[0], np.uint8).reshape(shape).astype(np.int16) - (128 if case[-1] == np.int8 else 0)
        ref = exact_int8(model, {"x": x})[0]
        assert np.abs(y - ref.astype(np.int16)).max() <= 1, case


# the blocked layout (q8_conv_params.io) through both GEMM families: pointwise (the input read in place as the packed
# X; 2 threads on pixel chunks or, 268 channels over 63 pixels, on row panels), strided 1x1 (q8_im2col_direct_c4, >=
# 64 KB split among threads), kxk via the channel-lane GEMM's copy (q8_pack_pad4_c4: strides 1-3, 5x5, >= 64 KB), and
# a kxk im2col with a blocked output only (the pixel-lane GEMM's im2col reads NCHW)
C4_GEMM_CASES = [  # (case, io flags the pixel-lane path takes)
    ((16, 9, 9, 48, 1, 1, 0, 1, 1, np.uint8), (1, 2, 3)), ((64, 16, 80, 8, 1, 1, 0, 1, 1, np.int8), (1, 2, 3)),
    ((24, 7, 9, 268, 1, 1, 0, 1, 1, np.uint8), (1, 2, 3)), ((20, 11, 13, 36, 1, 2, 0, 1, 1, np.int8), (1, 2, 3)),
    ((168, 12, 130, 8, 1, 2, 0, 1, 1, np.uint8), (1, 3)), ((8, 9, 45, 8, 3, 2, 1, 1, 1, np.uint8), (2,)),
    ((4, 5, 7, 4, 3, 1, 1, 1, 1, np.int8), (2,))]
C4_CGEMM_CASES = [
    (8, 7, 7, 16, 3, 1, 1, 1, 1, np.uint8), (20, 14, 14, 32, 3, 2, 1, 1, 1, np.int8),
    (16, 9, 9, 48, 1, 1, 0, 1, 1, np.uint8), (16, 11, 13, 16, 1, 2, 0, 1, 1, np.int8),
    (12, 5, 31, 16, 5, 1, 2, 1, 1, np.int8), (64, 20, 24, 64, 3, 1, 1, 1, 1, np.uint8),
    (32, 7, 7, 96, 3, 1, 1, 1, 1, np.uint8), (16, 7, 7, 528, 3, 1, 1, 1, 1, np.int8),
    (64, 30, 34, 32, 3, 2, 1, 1, 1, np.uint8), (8, 6, 6, 80, 1, 1, 0, 1, 1, np.int8), (8, 14, 23, 16, 3, 3, 1, 1, 1, np.uint8)]


@pytest.mark.parametrize("extra", [(), SANITIZE], ids=["plain", "asan-ubsan"])
def test_q8_conv_blocked_layout_equals_nchw(extra, tmp_path):
    """q8_conv with a blocked input, output or both (the driver converts at its edges; the blocked input ends at an
    inaccessible page): the bytes of the NCHW run, at 1, 2 and 3 threads, for both GEMM families."""
    isa = ISAS["avx512vnni"]
    require(isa)
    files = ["q8_conv_driver.c", "q8-conv/q8-conv.c", "q8-gemm/q8-pack.c", "ec_threadpool.c",
             "q8-gemm/q8-gemm-8x32-avx512vnni.c", "q8-gemm/q8-cgemm-32x8-avx512vnni.c"]
    gemm, cgemm = "q8_gemm_8x32__avx512vnni", "q8_cgemm_32x8__avx512vnni"
    cg = {"CGEMM": cgemm, "PACK_W_BYTES": "q8_pack_w_c32_bytes"}
    exes = {}
    for io in (0, 1, 2, 3):
        c4 = "_c4" if io & 2 else ""
        exes["gemm", io] = build(isa, tmp_path / f"g{io}", files, {"KERNEL": gemm + c4, "IO": str(io)}, extra)
        exes["cgemm", io] = build(isa, tmp_path / f"c{io}", files,
                                  {**cg, "KERNEL": gemm + c4, "CGEMM": cgemm + c4, "IO": str(io)}, extra)
    rng = np.random.default_rng(17)
    cases = [("gemm", c, ios) for c, ios in C4_GEMM_CASES] + [("cgemm", c, (1, 2, 3)) for c in C4_CGEMM_CASES]
    for i, (family, case, ios) in enumerate(cases):
        model, x, q = _model_and_data(case, rng)
        _problem_file(tmp_path / f"p{i}.bin", case, x, q, False, cgemm=family == "cgemm")
        outs = {}
        for io in (0, *ios):
            for threads in ("1", "2", "3"):
                out = tmp_path / f"y{i}_{io}_{threads}.bin"
                r = run(isa, exes[family, io], str(tmp_path / f"p{i}.bin"), str(out), threads)
                assert r.returncode == 0, (family, case, io, r.stderr[-3000:])
                outs[io, threads] = out.read_bytes()
        assert len(set(outs.values())) == 1, (family, case, [k for k, v in outs.items() if v != outs[0, "1"]])


# a table fused into the conv (q8_conv_params.lut), through every way q8_conv splits its output: pixel chunks and
# row panels of the pixel-lane GEMM, the implicit GEMM's compaction per channel, pixel chunks and 32-channel panels
# of the channel-lane GEMM, the blocked output's 4-channel rows; groups
LUT_CASES = {
    "gemm": [CASES[1], CASES[2], CASES[12], (24, 7, 9, 70, 1, 1, 0, 1, 1, np.uint8),
             (24, 7, 9, 268, 1, 1, 0, 1, 1, np.uint8)],
    "igemm": [IMPLICIT_CASES[0], (12, 6, 7, 8, 3, 1, 1, 1, 2, np.uint8), (33, 15, 30, 20, 3, 1, 1, 1, 1, np.uint8)],
    "cgemm": [CGEMM_CONV_CASES[0], CGEMM_CONV_CASES[2], CGEMM_CONV_CASES[4], CGEMM_CONV_CASES[6],
              CGEMM_CONV_CASES[11]],
}


@pytest.mark.parametrize("family,io", [("gemm", 0), ("igemm", 0), ("gemm", 3), ("cgemm", 0), ("cgemm", 3)])
def test_q8_conv_fused_table_maps_every_output_once(family, io, tmp_path):
    """A table fused into the conv (q8_conv_params.lut: a Concat input's requantization, HardSwish...) is applied by
    each task to the part of the output it stored: the output equals the table over the conv's output without it, at
    1, 2 and 3 threads (the table is a permutation with no fixed point of f(f(y)) = f(y): a byte missed or mapped twice
    shows). gemm / igemm on the scalar GEMM (any host), the blocked output and the channel-lane GEMM on AVX-512 VNNI."""
    vnni = family == "cgemm" or io
    isa = ISAS["avx512vnni" if vnni else "scalar"]
    require(isa)
    files = ["q8_conv_driver.c", "q8-conv/q8-conv.c", "q8-gemm/q8-pack.c", "ec_threadpool.c",
             "q8-eltwise/q8-eltwise-scalar.c"]
    if vnni:
        files += ["q8-gemm/q8-gemm-8x32-avx512vnni.c", "q8-gemm/q8-cgemm-32x8-avx512vnni.c"]
        c4 = "_c4" if io & 2 else ""
        defs = {"KERNEL": "q8_gemm_8x32__avx512vnni" + c4, "IO": str(io)}
        if family == "cgemm":
            defs.update(CGEMM="q8_cgemm_32x8__avx512vnni" + c4, PACK_W_BYTES="q8_pack_w_c32_bytes")
    else:
        files += ["q8-gemm/q8-gemm-4x8-scalar.c"]
        defs = {"KERNEL": "q8_gemm_4x8__scalar", **({"IGEMM": "q8_igemm_4x8__scalar"} if family == "igemm" else {})}
    plain = build(isa, tmp_path / "plain", files, defs)
    fused = build(isa, tmp_path / "lut", files, {**defs, "LUT": "q8_lut"})
    table = ((np.arange(256) * 37 + 11) % 256).astype(np.uint8)
    rng = np.random.default_rng(19)
    for i, case in enumerate(LUT_CASES["gemm" if family == "gemm" and io else family]):
        if io and (case[-2] != 1 or case[0] % 4 or case[3] % 4):  # the blocked layout: one group, channels by 4
            continue
        _, x, q = _model_and_data(case, rng)
        _problem_file(tmp_path / f"p{i}.bin", case, x, q, False, implicit=family == "igemm", cgemm=family == "cgemm")
        r = run(isa, plain, str(tmp_path / f"p{i}.bin"), str(tmp_path / f"y{i}.bin"))
        assert r.returncode == 0, (case, r.stderr[-3000:])
        want = table[np.frombuffer((tmp_path / f"y{i}.bin").read_bytes(), np.uint8)]
        for threads in ("1", "2", "3"):
            r = run(isa, fused, str(tmp_path / f"p{i}.bin"), str(tmp_path / f"t{i}.bin"), threads)
            assert r.returncode == 0, (case, r.stderr[-3000:])
            got = np.frombuffer((tmp_path / f"t{i}.bin").read_bytes(), np.uint8)
            assert np.array_equal(got, want), (case, threads, int((got != want).sum()))
