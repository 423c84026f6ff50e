"""Int8 edge and elementwise kernels (Quantize/Dequantize, Add, GlobalAveragePool, MaxPool),
called through ctypes, against the exact int8 reference (qkit.exact_int8: QuantizeLinear,
DequantizeLinear, MaxPool on uint8 as they are; com.microsoft QLinearAdd / QLinearGlobalAveragePool
as DequantizeLinear -> float op -> QuantizeLinear): equal or within 1 LSB."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgec.codegen.ops.qops import mul_fixed_point
from edgec.codegen.ops.qpack import add_multipliers, quantize_multiplier
from qkit import ISAS, SANITIZE, build, exact_int8, require, run

P = ctypes.c_void_p


def _eltwise_lib(tmp_path_factory, isa_name: str):
    """q8-eltwise-scalar.c as a shared library built for one ISA (its vector paths)."""
    require(ISAS[isa_name])
    so = build(ISAS[isa_name], tmp_path_factory.mktemp(f"q8e_{isa_name}") / "libq8e.so",
               ["q8-eltwise/q8-eltwise-scalar.c"], extra=("-shared", "-fPIC"))
    return ctypes.CDLL(str(so))


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return _eltwise_lib(tmp_path_factory, "scalar")


@pytest.fixture(scope="module")
def lib_avx512(tmp_path_factory):
    """AVX-512BW: q8_add's 64-byte steps."""
    return _eltwise_lib(tmp_path_factory, "avx512")


@pytest.fixture(scope="module")
def lib_avx2(tmp_path_factory):
    """AVX2: Quantize, SE Mul, GlobalAveragePool."""
    return _eltwise_lib(tmp_path_factory, "avx2")


def test_quantize_avx2_matches_onnxruntime(lib_avx2):
    """QuantizeLinear's AVX2 path: ties to even, saturation, NaN-free, tails short of 32 elements."""
    rng = np.random.default_rng(5)
    for n in (1, 31, 32, 33, 4099):
        x = rng.normal(0, 40, n).astype(np.float32)
        x[:min(n, 8)] = [0.25, 0.75, -0.25, -0.75, 1e9, -1e9, 63.75, -50.25][:min(n, 8)]
        for s, z in ((np.float32(0.5), np.uint8(100)), (np.float32(0.0371), np.uint8(3))):
            ref = _ort([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
                       [_vi("x", TensorProto.FLOAT, x.shape)], {"s": s, "z": z}, [_vi("y", TensorProto.UINT8, x.shape)],
                       {"x": x})
            y = np.empty(x.size, np.uint8)
            lib_avx2.q8_quantize(ctypes.c_size_t(x.size), x.ctypes.data_as(P), ctypes.c_float(s), int(z),
                                 y.ctypes.data_as(P))
            assert np.array_equal(y, ref), (n, s)


@pytest.mark.parametrize("isa", ["scalar", "avx2", "avx512"])
def test_quantize_quotient_is_the_division(isa, request):
    """The vector paths divide by multiplying with two corrections (no vdivps): every result equals
    clamp(rint(x / scale) + zp) with a float32 division, on random values, values a hair off .5 ties,
    exact ties, huge values, inf and NaN (-> 0), over scales from 1e-19 to 1e19 (and one outside, which divides)."""
    lib_ = request.getfixturevalue({"scalar": "lib", "avx2": "lib_avx2", "avx512": "lib_avx512"}[isa])
    rng = np.random.default_rng(11)
    scales = np.float32([1e-19, 3.3e-12, 1 / 255, 0.0078431373, 0.0371, 0.1, 0.5, 1.0, 3.7, 1e7, 1e19, 1e-25])
    for s in scales:
        k = rng.integers(-300, 300, 200_000).astype(np.float32)
        half = ((k + np.float32(0.5)) * s).astype(np.float32)
        x = np.concatenate([
            (rng.normal(0, 80, 200_000) * s).astype(np.float32),
            half, np.nextafter(half, np.float32(np.inf)), np.nextafter(half, np.float32(-np.inf)),
            (k * s).astype(np.float32),
            np.float32([0, -0.0, np.inf, -np.inf, np.nan, 3e38, -3e38, 1e-45, -1e-45]),
        ]).astype(np.float32)
        for z in (0, 128, 255):
            with np.errstate(all="ignore"):
                want = np.where(np.isnan(x), 0, np.clip(np.rint(x / s) + np.float32(z), 0, 255)).astype(np.uint8)
            y = np.empty(x.size, np.uint8)
            lib_.q8_quantize(ctypes.c_size_t(x.size), x.ctypes.data_as(P), ctypes.c_float(s), z, y.ctypes.data_as(P))
            bad = np.flatnonzero(y != want)
            assert bad.size == 0, (isa, s, z, x[bad[:5]], y[bad[:5]], want[bad[:5]])


class AddF(ctypes.Structure):
    _fields_ = [(k, ctypes.c_int32) for k in ("za", "zb", "zy", "qmin", "qmax")] + \
               [(k, ctypes.c_float) for k in ("sa", "sb", "sy")]


_PAIRS = (np.repeat(np.arange(256, dtype=np.uint8), 256), np.tile(np.arange(256, dtype=np.uint8), 256))


def _check_add_f32(lib_, isa, cases, tail=False):
    """q8_add_f32 on every pair of bytes against the float QDQ in numpy, per (sa, sb, sy, za, zb, zy, qmin, qmax);
    tail: also a 37-byte run (the scalar tail alone)."""
    a, b = _PAIRS
    for sa, sb, sy, za, zb, zy, lo, hi in cases:
        sa, sb, sy = np.float32(sa), np.float32(sb), np.float32(sy)
        with np.errstate(all="ignore"):
            v = (a.astype(np.int32) - za).astype(np.float32) * sa + (b.astype(np.int32) - zb).astype(np.float32) * sb
            want = np.clip(np.rint(v / sy) + np.float32(zy), lo, hi).astype(np.uint8)
        p = AddF(za, zb, zy, lo, hi, sa, sb, sy)
        for n in (a.size, 37) if tail else (a.size,):
            y = np.empty(n, np.uint8)
            lib_.q8_add_f32(ctypes.c_size_t(n), a[:n].ctypes.data_as(P), b[:n].ctypes.data_as(P), ctypes.byref(p),
                            y.ctypes.data_as(P))
            bad = np.flatnonzero(y != want[:n])
            assert bad.size == 0, (isa, n, sa, sb, sy, za, zb, zy, a[bad[:4]], b[bad[:4]], y[bad[:4]], want[bad[:4]])


@pytest.mark.parametrize("isa", ["scalar", "avx2", "avx512"])
def test_add_f32_is_the_float_qdq(isa, request):
    """q8_add_f32 = DequantizeLinear -> Add -> QuantizeLinear in float32, bit for bit: every pair of bytes (the
    vector steps and the tail), scales that make many exact and near ties, clamps (a fused ReLU), a tiny and a
    huge output scale."""
    lib_ = request.getfixturevalue({"scalar": "lib", "avx2": "lib_avx2", "avx512": "lib_avx512"}[isa])
    cases = [(0.05, 0.02, 0.1, 128, 128, 128, 0, 255), (0.25, 0.5, 0.25, 3, 250, 7, 0, 255),
             (0.0371, 0.0123, 0.0456, 0, 10, 0, 0, 255), (0.02, 0.02, 0.04, 128, 128, 100, 100, 255),
             (1.0, 1.0, 1.0, 100, 100, 128, 20, 200), (3e-9, 4e-9, 1e-30, 0, 0, 128, 0, 255), (1e-3, 2e-3, 1e30, 5, 6, 9, 0, 255)]
    _check_add_f32(lib_, isa, cases, tail=True)


@pytest.mark.parametrize("isa", ["scalar", "avx2", "avx512"])
def test_add_f32_fast_quotient_is_exact_on_random_scales(isa, request):
    """The vector paths round a * (sa / sy) + (b * (sb / sy) + c0) and compute only lanes near a tie the exact way:
    every pair of bytes, bit for bit against the float QDQ, over 60 random scale triples (residual Adds' ratios
    and far ones), zero points anywhere in 0..255, and ratios that put many sums exactly on ties."""
    lib_ = request.getfixturevalue({"scalar": "lib", "avx2": "lib_avx2", "avx512": "lib_avx512"}[isa])
    rng = np.random.default_rng(23)
    cases = []
    for _ in range(60):
        sy = np.float32(10 ** rng.uniform(-4, 1))
        sa, sb = (np.float32(sy * 10 ** rng.uniform(-1.5, 1.5)) for _ in range(2))
        za, zb, zy = (int(v) for v in rng.integers(0, 256, 3))
        cases.append((sa, sb, sy, za, zb, zy, 0, 255))
    for sy in (np.float32(0.05), np.float32(0.0371)):  # sa / sy and sb / sy of 1/2, 3/2, 1/4: exact ties
        cases += [(sy / 2, sy * 1.5, sy, 7, 200, 3, 0, 255), (sy / 4, sy / 2, sy, 128, 0, 128, 128, 255)]
    _check_add_f32(lib_, isa, cases)


@pytest.mark.parametrize("isa_name,extra", [("scalar", ()), ("avx2", ()), ("avx512", SANITIZE), ("neon", ()),
                                            ("armv7-neon", ())],
                         ids=["scalar", "avx2", "avx512-asan-ubsan", "neon", "armv7-neon"])
def test_add_f32_vector_paths_against_c_reference(isa_name, extra, tmp_path):
    """The same exactness for every vector path, NEON included (under qemu): a C test against the float QDQ
    written out, all byte pairs, random and tie-making scales."""
    isa = ISAS[isa_name]
    require(isa)
    exe = build(isa, tmp_path / "t", ["q8_add_f32_test.c", "q8-eltwise/q8-eltwise-scalar.c"], None, extra)
    r = run(isa, exe, timeout=300)
    assert r.returncode == 0 and "48/48 cases match" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


@pytest.mark.parametrize("isa_name,extra", [("scalar", ()), ("avx512", SANITIZE)], ids=["scalar", "avx512-asan-ubsan"])
def test_add_f32_pool_is_add_f32(isa_name, extra, tmp_path):
    """The residual Add after a conv, split over the pool: q8_add_f32's bytes at every size, in place, 1 and 2
    threads."""
    isa = ISAS[isa_name]
    require(isa)
    exe = build(isa, tmp_path / "t", ["q8_add_pool_test.c", "q8-eltwise/q8-add-pool.c", "q8-eltwise/q8-eltwise-scalar.c",
                                      "ec_threadpool.c"], None, extra)
    r = run(isa, exe, timeout=300)
    assert r.returncode == 0 and "12/12 cases match" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


def _ort(nodes, inputs, inits, outs, feeds, ms=False):
    opsets = [helper.make_opsetid("", 13)] + ([helper.make_opsetid("com.microsoft", 1)] if ms else [])
    g = helper.make_graph(nodes, "t", inputs, outs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=opsets, ir_version=8)
    return exact_int8(m, feeds)[0]


def _vi(name, dt, shape):
    return helper.make_tensor_value_info(name, dt, shape)


def test_quantize_dequantize_match_onnxruntime(lib):
    x = np.random.default_rng(0).normal(0, 3, 4099).astype(np.float32)
    x[:6] = [0.25, 0.75, -0.25, -0.75, 1e9, -1e9]  # ties and saturation
    s, z = np.float32(0.5), np.uint8(100)
    ref = _ort([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], [_vi("x", TensorProto.FLOAT, x.shape)],
               {"s": s, "z": z}, [_vi("y", TensorProto.UINT8, x.shape)], {"x": x})
    y = np.empty(x.size, np.uint8)
    lib.q8_quantize(ctypes.c_size_t(x.size), x.ctypes.data_as(P), ctypes.c_float(s), 100, y.ctypes.data_as(P))
    assert np.array_equal(y, ref)
    back = np.empty(x.size, np.float32)
    lib.q8_dequantize(ctypes.c_size_t(x.size), y.ctypes.data_as(P), ctypes.c_float(s), 100, back.ctypes.data_as(P))
    ref2 = _ort([helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])], [_vi("q", TensorProto.UINT8, x.shape)],
                {"s": s, "z": z}, [_vi("y", TensorProto.FLOAT, x.shape)], {"q": ref})
    assert np.array_equal(back, ref2)


class AddP(ctypes.Structure):
    _fields_ = [(k, ctypes.c_int32) for k in ("za", "zb", "ma", "mb", "shift", "zy", "qmin", "qmax")]


@pytest.mark.parametrize("scales", [(0.02, 0.03, 0.04), (0.1, 0.01, 0.05), (0.05, 0.05, 0.02)])
def test_q8_add_matches_qlinearadd(lib, scales):
    rng = np.random.default_rng(1)
    a, b = (rng.integers(0, 256, 3000).astype(np.uint8) for _ in range(2))
    (sa, sb, sy), (za, zb, zy) = scales, (120, 131, 128)
    ref = _ort([helper.make_node("QLinearAdd", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"], domain="com.microsoft")],
               [_vi("a", TensorProto.UINT8, a.shape), _vi("b", TensorProto.UINT8, b.shape)],
               {"sa": np.float32(sa), "za": np.uint8(za), "sb": np.float32(sb), "zb": np.uint8(zb),
                "sy": np.float32(sy), "zy": np.uint8(zy)}, [_vi("y", TensorProto.UINT8, a.shape)], {"a": a, "b": b}, ms=True)
    ma, mb, sh = add_multipliers(sa, sb, sy)
    y = np.empty_like(a)
    lib.q8_add(ctypes.c_size_t(a.size), a.ctypes.data_as(P), b.ctypes.data_as(P),
               ctypes.byref(AddP(za, zb, ma, mb, sh, zy, 0, 255)), y.ctypes.data_as(P))
    d = np.abs(y.astype(int) - ref.astype(int))
    assert d.max() <= 1 and np.mean(d == 0) > 0.99


@pytest.mark.parametrize("scales", [(0.02, 0.03, 0.04), (0.1, 0.01, 0.05), (0.05, 0.05, 0.02), (0.1, 0.1, 0.2)])
def test_q8_add_avx2_equals_portable(lib, lib_avx2, lib_avx512, scales):
    """QLinearAdd's AVX2 and AVX-512 paths give the portable loop's bytes (ties to even, clamps, tails short of
    32 and 64)."""
    rng = np.random.default_rng(4)
    (sa, sb, sy), (za, zb, zy) = scales, (120, 131, 128)
    ma, mb, sh = add_multipliers(sa, sb, sy)
    for n in (1, 31, 32, 33, 63, 64, 65, 127, 3001):
        a, b = (rng.integers(0, 256, n).astype(np.uint8) for _ in range(2))
        a[:min(n, 4)], b[:min(n, 4)] = [0, 255, 0, 255][:min(n, 4)], [0, 0, 255, 255][:min(n, 4)]
        for lo, hi in ((0, 255), (zy, 240)):
            ys = [np.empty_like(a) for _ in range(3)]
            for f, y in zip((lib, lib_avx2, lib_avx512), ys):
                f.q8_add(ctypes.c_size_t(n), a.ctypes.data_as(P), b.ctypes.data_as(P),
                         ctypes.byref(AddP(za, zb, ma, mb, sh, zy, lo, hi)), y.ctypes.data_as(P))
            assert np.array_equal(ys[0], ys[1]) and np.array_equal(ys[0], ys[2]), (n, lo, hi)


def test_q8_gavgpool_matches_onnxruntime(lib):
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (1, 24, 7, 9)).astype(np.uint8)
    sx, zx, sy, zy = 0.05, 110, 0.02, 90
    ref = _ort([helper.make_node("QLinearGlobalAveragePool", ["x", "sx", "zx", "sy", "zy"], ["y"], domain="com.microsoft")],
               [_vi("x", TensorProto.UINT8, x.shape)],
               {"sx": np.float32(sx), "zx": np.uint8(zx), "sy": np.float32(sy), "zy": np.uint8(zy)},
               [_vi("y", TensorProto.UINT8, None)], {"x": x}, ms=True)
    mult, shift = quantize_multiplier(np.float32(sx) / np.float32(sy) / 63)
    y = np.empty(24, np.uint8)
    lib.q8_gavgpool(ctypes.c_size_t(24), ctypes.c_size_t(63), x.ctypes.data_as(P), zx, mult, shift, zy, y.ctypes.data_as(P))
    assert np.abs(y.astype(int) - ref.ravel().astype(int)).max() <= 1


class PoolS(ctypes.Structure):
    _fields_ = [(k, ctypes.c_int) for k in "batch C H W kh kw sh sw dh dw pt pl Ho Wo".split()]


@pytest.mark.parametrize("k,s,pad", [(3, 2, 1), (2, 2, 0), (3, 1, 0)])  # padded (checked) and inside paths
def test_q8_maxpool_matches_onnxruntime(lib, k, s, pad):
    x = np.random.default_rng(3).integers(0, 256, (1, 5, 11, 10)).astype(np.uint8)
    ref = _ort([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[k, k], strides=[s, s], pads=[pad] * 4)],
               [_vi("x", TensorProto.UINT8, x.shape)], {}, [_vi("y", TensorProto.UINT8, None)], {"x": x})
    y = np.empty(ref.size, np.uint8)
    lib.q8_maxpool(ctypes.byref(PoolS(1, 5, 11, 10, k, k, s, s, 1, 1, pad, pad, ref.shape[2], ref.shape[3])),
                   x.ctypes.data_as(P), y.ctypes.data_as(P))
    assert np.array_equal(y, ref.ravel())


@pytest.mark.parametrize("isa_name,fn,src,extra", [
    ("avx512vbmi", "q8_lut__avx512vbmi", "q8-eltwise/q8-lut-avx512vbmi.c", ()),
    ("avx2", "q8_lut__avx2", "q8-eltwise/q8-lut-avx2.c", ()),
    ("avx2", "q8_lut__avx2", "q8-eltwise/q8-lut-avx2.c", SANITIZE),
    ("neon", "q8_lut__neon", "q8-eltwise/q8-lut-neon.c", ())],
    ids=["avx512vbmi", "avx2", "avx2-asan-ubsan", "neon"])
def test_q8_lut_simd_matches_scalar(isa_name, fn, src, extra, tmp_path):
    """Every length 0-300 (the 64- and 32-byte loops and the tail), every byte value: the scalar table's bytes,
    nothing written past n."""
    isa = ISAS[isa_name]
    require(isa)
    exe = build(isa, tmp_path / "lut", ["q8_lut_test.c", "q8-eltwise/q8-eltwise-scalar.c", src],
                {"KERNEL": fn, "KERNEL_NAME": f'"{isa_name}"'}, extra)
    r = run(isa, exe)
    assert r.returncode == 0 and "all match" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("isa_name,fn,src,extra", [
    ("avx512", "q8_maxpool__avx512", "q8-eltwise/q8-maxpool-avx512.c", ()),
    ("avx512", "q8_maxpool__avx512", "q8-eltwise/q8-maxpool-avx512.c", SANITIZE),
    ("avx512vbmi", "q8_maxpool__avx512", "q8-eltwise/q8-maxpool-avx512.c", ("-mavx512vl",)),  # 3-wide, stride 2
    ("avx512vbmi", "q8_maxpool__avx512", "q8-eltwise/q8-maxpool-avx512.c", ("-mavx512vl", *SANITIZE)),
    ("avx2", "q8_maxpool__avx2", "q8-eltwise/q8-maxpool-avx2.c", ()),
    ("avx2", "q8_maxpool__avx2", "q8-eltwise/q8-maxpool-avx2.c", SANITIZE)],
    ids=["avx512", "avx512-asan-ubsan", "avx512vbmi", "avx512vbmi-asan-ubsan", "avx2", "avx2-asan-ubsan"])
def test_q8_maxpool_simd_matches_portable(isa_name, fn, src, extra, tmp_path):
    isa = ISAS[isa_name]
    require(isa)
    exe = build(isa, tmp_path / "mp", ["q8_maxpool_test.c", "q8-eltwise/q8-eltwise-scalar.c", src],
                {"KERNEL": fn, "KERNEL_NAME": f'"{isa_name}"'}, extra)
    r = run(isa, exe)
    assert r.returncode == 0 and "114/114 cases match" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("isa_name,extra", [("scalar", ()), ("avx2", ()), ("avx2", SANITIZE)],
                         ids=["scalar", "avx2", "avx2-asan-ubsan"])
def test_q8_mul_outer_vector_path_matches_float_formula(isa_name, extra, tmp_path):
    """The AVX2 paths of q8_mul_outer (SE-block scaling; float clamp, or the unclamped one whose int16 and u8
    packs saturate) give the loop's float formula bit for bit."""
    isa = ISAS[isa_name]
    require(isa)
    exe = build(isa, tmp_path / "mul", ["q8_mul_test.c", "q8-eltwise/q8-eltwise-scalar.c"], extra=extra)
    r = run(isa, exe)
    assert r.returncode == 0 and "540/540 cases match" in r.stdout, r.stdout[-2000:] + r.stderr


_MUL_FX = [(0.0123, 17, 0, 3), (0.000371, 128, 128, 0), (0.0731, 0, 200, 255), (1.5, 60, 61, 128), (0.25, 1, 3, 7)]


@pytest.mark.parametrize("isa_name,extra", [("scalar", ()), ("avx2", ()), ("avx2", SANITIZE), ("avx512", ()),
                                             ("neon", ()), ("armv7-neon", ())],
                         ids=["scalar", "avx2", "avx2-asan-ubsan", "avx512", "neon", "armv7-neon"])
def test_q8_mul_outer_fx_matches_float_formula(isa_name, extra, tmp_path):
    """SE-block Mul in fixed point (q8_mul_outer_fx: vpmulhrsw on AVX2 / AVX-512BW, vqrdmulh on NEON under qemu) with the
    compiler's table (qops.mul_fixed_point): every gate byte, exact and float-fallback planes, equals
    q8_mul_outer's float formula; a factor 64 off on one gate breaks it."""
    isa = ISAS[isa_name]
    require(isa)
    exe = build(isa, tmp_path / "mulfx", ["q8_mul_fx_test.c", "q8-eltwise/q8-eltwise-scalar.c"], extra=extra)
    kinds = set()
    for i, (scale, za, zb, zy) in enumerate(_MUL_FX):
        s = np.float32(scale)
        fx = mul_fixed_point(s, za, zb, zy)
        kinds.update(set((fx[:, 1] >= 0).tolist()))
        f = tmp_path / f"t{i}.bin"
        f.write_bytes(np.array([za, zb, zy], np.int32).tobytes() + s.tobytes() + fx.tobytes())
        r = run(isa, exe, str(f))
        assert r.returncode == 0 and "12/12 cases match" in r.stdout, (scale, r.stdout[-2000:] + r.stderr)
        if i == 0:  # the test sees a wrong factor: M + 64 on an exact gate whose products are not all clamped
            bad = fx.copy()
            g = next(g for g in range(256) if bad[g, 1] >= 0 and abs(int(bad[g, 0])) > 1000)
            bad[g, 0] += 64
            f.write_bytes(np.array([za, zb, zy], np.int32).tobytes() + s.tobytes() + bad.tobytes())
            r = run(isa, exe, str(f))
            assert r.returncode == 1 and "MISMATCH" in r.stdout, r.stdout[-2000:]
    assert kinds == {True, False}  # fixed-point and float-fallback planes both ran


@pytest.mark.parametrize("isa_name", ["avx2", "avx512"])
def test_q8_gavgpool_avx2_path_equals_portable(lib, isa_name, tmp_path_factory):
    """The vpsadbw sums (AVX2 build: 32 bytes a step; AVX-512BW: 64, then 32) give the portable loop's bytes: plane
    sizes around 32 and 64, all-255 planes, and the short planes summed across channels (hw 8-24, channel counts
    leaving a partial last step)."""
    vec = _eltwise_lib(tmp_path_factory, isa_name)
    rng = np.random.default_rng(5)
    mult, shift = quantize_multiplier(np.float32(0.05) / np.float32(0.02) / 1000)
    for hw, ch in ((1, 5), (31, 5), (32, 5), (33, 5), (63, 5), (64, 5), (96, 5), (100, 5), (127, 5), (192, 5),
                   (1000, 5), (4096, 5), (8, 5), (16, 64), (16, 7), (24, 5), (24, 3), (8, 1)):
        x = rng.integers(0, 256, (ch, hw)).astype(np.uint8)
        x[0] = 255
        ys = [np.empty(ch, np.uint8) for _ in range(2)]
        for f, y in zip((lib, vec), ys):
            f.q8_gavgpool(ctypes.c_size_t(ch), ctypes.c_size_t(hw), x.ctypes.data_as(P), 110, mult, shift, 90,
                          y.ctypes.data_as(P))
        assert np.array_equal(ys[0], ys[1]), (hw, ch)
    m1, s1 = quantize_multiplier(np.float32(0.999))  # one unit of a sum moves the byte: every sum is checked
    for hw, ch in ((16, 64), (8, 7), (24, 9), (96, 5), (192, 7), (288, 3)):
        x = rng.integers(106, 110, (ch, hw)).astype(np.uint8)
        ys = [np.empty(ch, np.uint8) for _ in range(2)]
        for f, y in zip((lib, vec), ys):
            f.q8_gavgpool(ctypes.c_size_t(ch), ctypes.c_size_t(hw), x.ctypes.data_as(P), 107, m1, s1, 60,
                          y.ctypes.data_as(P))
        assert np.array_equal(ys[0], ys[1]) and 0 < ys[0].min() and ys[0].max() < 255, (hw, ch)
