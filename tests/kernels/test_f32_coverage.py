"""The fp32 kernel rows and files the per-family tests leave out of a run against their scalar reference.

- NEON rows without an arch (depthwise 3x3/5x5/kxk, channel-blocked depthwise, GSPC along ow) ship on
  armv7 too (kernels.usable); test_f32_kernels builds them for AArch64 only. Here: their odd-shape test
  programs (the whole shape set, not the quick one: under 1 s each) for armv7 under qemu-arm, where
  ec_simd_neon.h takes its 32-bit paths.
- AVX-512 rows and files: test_f32_kernels, test_spmm and the pool tests of test_simd_kernels skip them before
  compiling on a CPU without AVX-512. Here each is built with the target's flags and -Werror (its test program
  linked), and run where the CPU has it.
- The along-ow GSPC family through the emitter on Arm (the cost model does not pick it on the shared conv model
  there), forced, under qemu, against onnxruntime.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from edgec.codegen import kernels
from edgec.codegen.ops.pool import GAVGPOOL
from edgec.codegen.targets import get_target
from edgec.runtime_c import root as runtime_root
from qkit import compile_link, cpu_flags, stable_source
from test_f32_emitters import _layer_ops, conv_model, run_against_ort
from test_f32_kernels import CDIR, WFLAGS, _test_of
from tests.codegen.test_simd_kernels import DRIVER as GAVGPOOL_DRIVER
from tests.codegen.test_simd_kernels import MAXPOOL_AVX2_DRIVER, MAXPOOL_DRIVER
from tests.codegen.test_simd_kernels import SIZES as GAVGPOOL_SIZES

ARMV7 = get_target("armv7-neon")
AVX512 = get_target("x86_64-avx512")
NEON_ANY_ARCH = [k for k in kernels.KERNELS if k.isa == "neon" and k.arch is None and k.op != "winograd"]
# winograd: test_f32_winograd builds it; igemm: its program is the gemm row's (the pair shares a tile)
AVX512_ROWS = [k for k in kernels.KERNELS if k.isa == "avx512" and k.op not in ("winograd", "igemm")]


class Builder:
    """qkit.compile_link with the module's flags: one object per source (ccache keeps those), the scalar
    references and the thread pool compiled once per flag set."""

    def link(self, cc: str, cflags, srcs, defs: dict, out, static=False, opt="-O2"):
        if shutil.which(cc) is None:
            pytest.skip(f"{cc} is not installed")
        return compile_link(cc, [opt, *WFLAGS, *cflags, *(["-static"] if static else []), f"-I{runtime_root()}"],
                            srcs, out, defs, ["-lm", "-lpthread"])


@pytest.fixture(scope="module")
def builder():
    return Builder()


def _row_sources(k: kernels.Kernel, extra: list[str], prog: str) -> list:
    rt = runtime_root()
    return [CDIR / prog, rt / "ec_threadpool.c", *dict.fromkeys([rt / k.file, *(rt / e for e in extra)])]


def _ok(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "cases ok" in r.stdout and "FAIL" not in r.stdout, r.stdout[-3000:]


@pytest.mark.parametrize("k", NEON_ANY_ARCH, ids=lambda k: k.name)
def test_neon_rows_on_armv7(k, builder, tmp_path):
    """The AArch64 test program of the row, built for armv7 (the target's flags) and run under qemu-arm."""
    if shutil.which(ARMV7.qemu[0]) is None:
        pytest.skip(f"{ARMV7.qemu[0]} is not installed")
    prog, defs, extra = _test_of(k)
    exe = tmp_path / "t"
    builder.link(ARMV7.cc, ARMV7.cflags, _row_sources(k, extra, prog), defs, exe, static=True)
    _ok(subprocess.run([*ARMV7.qemu, str(exe)], capture_output=True, text=True, timeout=600))


@pytest.mark.parametrize("k", AVX512_ROWS, ids=lambda k: k.name)
def test_avx512_rows_build_and_run_where_supported(k, builder, tmp_path):
    prog, defs, extra = _test_of(k)
    exe = tmp_path / "t"
    builder.link("gcc", AVX512.cflags, _row_sources(k, extra, prog), defs, exe)
    _avx512_run([str(exe)], "cases ok")


def _avx512_run(cmd: list[str], expect: str) -> None:
    if not AVX512.runs_natively():
        missing = [f for f in AVX512.features if f.startswith("avx512") and f not in cpu_flags()]
        pytest.skip(f"built with -Werror; this CPU lacks {', '.join(missing) or 'AVX-512'}")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and expect in r.stdout and "FAIL" not in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.parametrize("tile", sorted(f.name.split("-")[2] for f in (runtime_root() / "f32-spmm").glob("*-avx512.c")))
def test_avx512_spmm_builds_and_runs_where_supported(tile, builder, tmp_path):
    """test_spmm's program (sparsity 0-1, odd M/N/K, every epilogue) on each AVX-512 sparse kernel file (the
    emitter uses 1x1; 4x4 is kept, measured slower than AVX2's)."""
    br, bc = tile.split("x")
    rt = runtime_root()
    exe = builder.link("gcc", AVX512.cflags, [CDIR / "spmm_test.c", rt / "f32-spmm/f32-spmm-scalar.c",
                                              rt / f"f32-spmm/f32-spmm-{tile}-avx512.c"],
                       {"KERNEL": f"f32_spmm_{tile}__avx512", "KERNEL_NAME": f'"{tile}-avx512"', "BR": br, "BC": bc},
                       tmp_path / "t")
    _avx512_run([str(exe)], "1280/1280 cases match")


def _pool_drivers() -> dict[str, str]:
    header, fn = GAVGPOOL["avx512"]
    sizes = ", ".join(map(str, GAVGPOOL_SIZES))
    return {"gavgpool-16x": GAVGPOOL_DRIVER % {"header": header, "fn": fn, "sizes": sizes},
            "pool-2pass": MAXPOOL_DRIVER,           # the separable pools, auto-vectorised with the target's flags
            "maxpool-2pass-avx2": MAXPOOL_AVX2_DRIVER}  # what the AVX-512 target's MaxPool runs (ops/pool.py)


@pytest.mark.parametrize("driver", list(_pool_drivers()))
def test_avx512_pools_build_and_run_where_supported(driver, builder, tmp_path):
    """test_simd_kernels' pool drivers (odd sizes, vs the direct references) with the AVX-512 target's flags."""
    src, exe = stable_source(_pool_drivers()[driver]), tmp_path / "t"
    builder.link("gcc", AVX512.cflags, [src], {}, exe, opt="-O3" if driver == "pool-2pass" else "-O2")  # as there
    _avx512_run([str(exe)], "")


@pytest.mark.parametrize("target", ["aarch64-neon", "armv7-neon"])
def test_gspc_ow_forced_on_arm_matches_onnxruntime(target, tmp_path, monkeypatch):
    """The along-ow GSPC family at 4 lanes through the emitter (its weight packing and row blocking), which the
    cost model does not pick on test_f32_emitters' conv model for Arm: forced, under qemu, vs onnxruntime."""
    monkeypatch.setenv("EDGEC_GSPC", "ow")
    b = run_against_ort(conv_model(tmp_path / "conv.onnx"), target, tmp_path)
    ops = _layer_ops(b, "gspc")
    assert ops.count("gspc_ow") >= 2, ops
