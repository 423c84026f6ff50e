"""fp32 conv/GEMM kernels: every row of codegen/kernels.py against the naive reference on odd
shapes, paddings, strides, dilations, groups and every epilogue (tests/kernels/c/test_*.c).

Native x86 variants run only where /proc/cpuinfo has their features; NEON ones run under
qemu (-cpu cortex-a72 / qemu-arm) on the same shape set (a few seconds of CPU per row there)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from edgec.codegen import kernels
from edgec.runtime_c import root as runtime_root
from qkit import compile_link

CDIR = Path(__file__).with_name("c")
WFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror"]
SAN = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


def _test_of(k: kernels.Kernel) -> tuple[str, dict, list[str]]:
    """(test program, defines, extra runtime sources) for one kernel."""
    if k.op in ("gemm", "igemm"):  # the pair sharing a tile is tested together
        pair = {"gemm": "igemm", "igemm": "gemm"}[k.op]
        other = next(o for o in kernels.KERNELS if o.op == pair and o.isa == k.isa and o.tile == k.tile)
        g, i = (k, other) if k.op == "gemm" else (other, k)
        return ("test_conv_gemm.c", {"T_UK": g.name, "T_IUK": i.name, "T_UKP": g.params["packb"],
                                     "T_MR": k.params["mr"], "T_NR": k.params["nr"]}, [other.file])
    if k.op == "gspc":  # the scalar kernel runs the other tiles of the tail-kernel cases
        extra = [] if k.isa == "scalar" else ["f32-gspc/f32-gspc-scalar.c"]
        return "test_gspc.c", {"T_ROW": k.name, "TEST_TO": k.params["t_o"]}, extra
    if k.op == "gspc_mg":  # the scalar one (gb = 0) runs every layout
        return "test_gspc_mg.c", {"T_ROW": k.name, "T_GB": k.params["gb"], "T_KP": k.params["kp"]}, []
    if k.op == "gspc_ow":  # Kpg around 4 and 7: below/at/above the shapes main() builds
        return "test_gspc.c", {"T_ROW": k.name, "TEST_TO": 4, "TEST_OW": 1}, []
    if k.op == "dwconv_cb":  # with the generic plane kernel of its isa on every case
        plane = next(o for o in kernels.KERNELS if o.op == "dwconv" and o.isa == k.isa and o.tile == "kxk"
                     and o.arch in (None, k.arch))
        return "test_dwconv.c", {"T_PLANE": plane.name, "T_K": 0, "T_CB": k.name, "T_CB_LANES": k.params["lanes"]}, \
            ["f32-dwconv/f32-dwconv-kxk-scalar.c", plane.file]
    if k.op == "winograd":  # the driver on the isa's GEMM kernel, beside the portable transforms
        ref = next(o for o in kernels.KERNELS if o.op == "winograd" and o.isa == "scalar" and o.tile == k.tile)
        gk = kernels.gemm_kernel(kernels.build_target(k))
        return "test_winograd.c", {"T_M": k.params["m"], "T_IN": k.params["in"], "T_OUT": k.params["out"],
                                   "T_REF_IN": ref.params["in"], "T_REF_OUT": ref.params["out"], "T_UK": gk.name,
                                   "T_MR": gk.params["mr"], "T_NR": gk.params["nr"],
                                   "T_NRV": gk.params["vl"], "T_NRH": gk.params.get("hv", 0)}, [ref.file, gk.file]
    kk = k.params["k"][0] if k.params["k"] else 0
    return "test_dwconv.c", {"T_PLANE": k.name, "T_K": kk}, ["f32-dwconv/f32-dwconv-kxk-scalar.c"]


def _build(k: kernels.Kernel, out: Path, extra_flags=(), opt="-O2", test=None) -> tuple[Path, list[str]]:
    """Build kernel k's test program (default: _test_of(k); else test = (program, defines, extra sources))."""
    t = kernels.build_target(k)
    cc = t.cc if t.arch not in ("x86_64", "any") else "gcc"
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed")
    if t.qemu and shutil.which(t.qemu[0]) is None:
        pytest.skip(f"{t.qemu[0]} is not installed")
    if not t.qemu and not t.runs_natively():
        pytest.skip(f"this CPU lacks {k.isa} ({', '.join(t.features)})")
    prog, defs, extra = test or _test_of(k)
    rt = runtime_root()
    srcs = [CDIR / prog, rt / "ec_threadpool.c", *dict.fromkeys([rt / k.file, *(rt / e for e in extra)])]
    static = ["-static"] if t.qemu else []
    compile_link(cc, [opt, *WFLAGS, *t.cflags, *static, *extra_flags, f"-I{rt}"], srcs, out, defs, ["-lm", "-lpthread"])
    return out, list(t.qemu or [])


def _ids(k: kernels.Kernel) -> str:
    return f"{k.name}-{k.arch}" if k.arch else k.name


@pytest.mark.parametrize("k", kernels.KERNELS, ids=_ids)
def test_kernel_matches_reference(k, tmp_path):
    exe, qemu = _build(k, tmp_path / "t")
    r = subprocess.run([*qemu, str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cases ok" in r.stdout


@pytest.mark.parametrize("name", ["f32_gemm_ukernel_4x4__scalar", "f32_gemm_ukernel_6x16__avx2", "f32_gspc_row__scalar",
                                  "f32_dwconv_kxk__scalar", "f32_gspc_row_o8__avx2", "f32_dwconv_3x3__avx2",
                                  "f32_gspc_mg_row__scalar", "f32_gspc_mg_row_g4x2__avx2", "f32_dwconv_cb__avx2",
                                  "f32_gspc_row_ow__avx2", "f32_gspc_row_o4__avx2", "f32_gspc_mg_row_g2x4__avx2"])
def test_sanitizers(name, tmp_path):
    """AddressSanitizer + UBSan over the drivers, packing and a scalar and a SIMD kernel."""
    k = next(k for k in kernels.KERNELS if k.name == name)
    exe, _ = _build(k, tmp_path / "t", SAN, opt="-O1")
    r = subprocess.run([str(exe), "quick"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("sanitizer", ["address,undefined", "thread"])
def test_threadpool(sanitizer, tmp_path):
    rt = runtime_root()
    srcs = [CDIR / "test_threadpool.c", rt / "ec_threadpool.c", rt / "f32-gemm/f32-gemm-4x4-scalar.c",
            rt / "f32-gspc/f32-gspc-scalar.c", rt / "f32-dwconv/f32-dwconv-kxk-scalar.c",
            rt / "f32-igemm/f32-igemm-4x4-scalar.c"]
    compile_link("gcc", ["-O1", "-g", f"-fsanitize={sanitizer}", *WFLAGS, f"-I{rt}"], srcs, tmp_path / "t", None,
                 ["-lm", "-lpthread"])
    r = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "threadpool ok" in r.stdout, r.stdout + r.stderr


def test_threadpool_stats(tmp_path):
    """-DEC_POOL_STATS: chunk CPU time and the quiet-machine span of the jobs, printed at destroy."""
    rt = runtime_root()
    srcs = [CDIR / "test_threadpool.c", rt / "ec_threadpool.c", rt / "f32-gemm/f32-gemm-4x4-scalar.c",
            rt / "f32-gspc/f32-gspc-scalar.c", rt / "f32-dwconv/f32-dwconv-kxk-scalar.c",
            rt / "f32-igemm/f32-igemm-4x4-scalar.c"]
    compile_link("gcc", ["-O1", "-DEC_POOL_STATS", *WFLAGS, f"-I{rt}"], srcs, tmp_path / "t", None, ["-lm", "-lpthread"])
    r = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "threadpool ok" in r.stdout, r.stdout + r.stderr
    m = re.search(r"(\d+) parallel jobs, chunks ([\d.]+) ms, span on (\d) threads ([\d.]+) ms", r.stderr)
    assert m, r.stderr
    jobs, busy, threads, span = int(m[1]), float(m[2]), int(m[3]), float(m[4])
    assert jobs > 200 and threads == 3 and 0 < busy / threads <= span <= busy
