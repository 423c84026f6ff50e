"""Each SIMD variant of the framework's kernels against its scalar reference on odd sizes around the
vector width, built for the ISA's target and run natively (x86, when the CPU has it) or under qemu (Arm)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from edgec.codegen.ops.pool import GAVGPOOL
from edgec.codegen.targets import get_target
from edgec.runtime_c import root
from tests.kernels.qkit import compile_link, stable_source

SIZES = [1, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 47, 64, 65, 144, 1152]

DRIVER = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "f32-gavgpool/f32-gavgpool-1x-scalar.h"
#include "%(header)s"
int main(void)
{
    static const size_t sizes[] = {%(sizes)s};
    float x[3 * 1152 + 16], y[3], r[3];
    unsigned s = 1u;
    for (size_t i = 0; i < sizeof(x) / sizeof(x[0]); i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / 16777216.0f - 0.3f;
    }
    int bad = 0;
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
        for (size_t planes = 1; planes <= 3; planes++) {
            %(fn)s(planes, sizes[k], x, y);
            ec_f32_gavgpool_1x_scalar(planes, sizes[k], x, r);
            for (size_t c = 0; c < planes; c++)
                if (fabsf(y[c] - r[c]) > 1e-5f * (1.0f + fabsf(r[c]))) {
                    printf("hw=%%zu plane %%zu: %%g vs %%g\n", sizes[k], c, y[c], r[c]);
                    bad = 1;
                }
        }
    /* a plane size known at compile time, as the generated code passes it (gcc once warned falsely here) */
    %(fn)s(3, 100, x, y);
    ec_f32_gavgpool_1x_scalar(3, 100, x, r);
    for (size_t c = 0; c < 3; c++)
        if (fabsf(y[c] - r[c]) > 1e-5f * (1.0f + fabsf(r[c]))) bad = 1;
    return bad;
}
"""


@pytest.mark.parametrize("target", ["x86_64-avx2", "x86_64-avx512", "aarch64-neon", "armv7-neon"])
def test_gavgpool_simd_matches_scalar(tmp_path, target):
    t = get_target(target)
    if shutil.which(t.cc) is None:
        pytest.skip(f"{t.cc} not installed")
    runs_here = t.runs_natively()
    if not runs_here and (t.qemu is None or shutil.which(t.qemu[0]) is None):
        pytest.skip(f"{target}: this CPU lacks it and no qemu")
    header, fn = GAVGPOOL[t.isa]
    src = stable_source(DRIVER % {"header": header, "fn": fn, "sizes": ", ".join(map(str, SIZES))})
    exe = tmp_path / "t"
    compile_link(t.cc, [*t.cflags, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{root()}",
                        *([] if runs_here else ["-static"])], [src], exe)
    run = [str(exe)] if runs_here else [*t.qemu, str(exe)]
    proc = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout


MAXPOOL_DRIVER = r"""
#include <stdio.h>
#include <string.h>
#include "f32-pool/f32-pool-scalar.h"
#include "f32-pool/f32-maxpool-2pass-scalar.h"
#include "f32-pool/f32-avgpool-2pass-scalar.h"
#include <math.h>
int main(void)
{
    static float x[2 * 40 * 40], y[2 * 40 * 40], r[2 * 40 * 40], rows[40 * 40];
    static const int sizes[] = {1, 3, 7, 8, 15, 17, 33};
    unsigned s = 7u;
    for (size_t i = 0; i < sizeof(x) / sizeof(x[0]); i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    int bad = 0, n = 0;
    for (int a = 0; a < 7; a++) for (int b = 0; b < 7; b++) for (int k = 2; k <= 3; k++)
    for (int st = 1; st <= 2; st++) for (int p = 0; p < k; p++) for (int d = 1; d <= 2; d++) {
        int H = sizes[a], W = sizes[b], ke = (k - 1) * d + 1;
        int OH = (H + 2 * p - ke) / st + 1, OW = (W + 2 * p - ke) / st + 1;
        if (OH < 1 || OW < 1) continue;
        ec_f32_maxpool2d_2pass_scalar(2, H, W, OH, OW, k, k, st, st, d, d, p, p, x, y, rows);
        ec_f32_maxpool2d_scalar(2, H, W, OH, OW, k, k, st, st, d, d, p, p, x, r);
        n++;
        if (memcmp(y, r, sizeof(float) * 2 * (size_t)OH * OW)) {
            printf("H=%d W=%d k=%d s=%d p=%d d=%d differ\n", H, W, k, st, p, d);
            bad = 1;
        }
        for (int cip = 0; cip <= 1; cip++) {  /* average pool, end pads one short of the begin pads */
            int pe = p > 0 ? p - 1 : 0;
            int AH = (H + p + pe - ke) / st + 1, AW = (W + p + pe - ke) / st + 1;
            if (AH < 1 || AW < 1) continue;
            ec_f32_avgpool2d_2pass_scalar(2, H, W, AH, AW, k, k, st, st, d, d, p, p, pe, pe, cip, x, y, rows);
            ec_f32_avgpool2d_scalar(2, H, W, AH, AW, k, k, st, st, d, d, p, p, pe, pe, cip, x, r);
            for (int i = 0; i < 2 * AH * AW; i++)
                if (fabsf(y[i] - r[i]) > 1e-5f) {
                    printf("avg H=%d W=%d k=%d s=%d p=%d d=%d cip=%d: %g vs %g\n", H, W, k, st, p, d, cip, y[i], r[i]);
                    bad = 1;
                    break;
                }
        }
    }
    return bad || n < 100;
}
"""


@pytest.mark.parametrize("target", ["generic", "x86_64-avx2", "x86_64-avx512", "aarch64-neon", "armv7-neon"])
def test_pool_two_pass_matches_reference(tmp_path, target):
    """The separable max and average pools, auto-vectorised with each target's flags, equals the direct reference."""
    t = get_target(target)
    if shutil.which(t.cc) is None:
        pytest.skip(f"{t.cc} not installed")
    runs_here = t.runs_natively()
    if not runs_here and (t.qemu is None or shutil.which(t.qemu[0]) is None):
        pytest.skip(f"{target}: this CPU lacks it and no qemu")
    src, exe = stable_source(MAXPOOL_DRIVER), tmp_path / "m"
    compile_link(t.cc, [*t.cflags, "-O3", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{root()}",
                        *([] if runs_here else ["-static"])], [src], exe)
    proc = subprocess.run([str(exe)] if runs_here else [*t.qemu, str(exe)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout


MAXPOOL_AVX2_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "f32-pool/f32-pool-scalar.h"
#include "f32-pool/f32-maxpool-2pass-avx2.h"
int main(void)
{
    static const int sizes[] = {1, 3, 7, 8, 15, 16, 17, 18, 19, 33, 34, 35, 55, 111};
    const int ns = (int)(sizeof(sizes) / sizeof(sizes[0]));
    unsigned s = 7u;
    int bad = 0, n = 0;
    for (int a = 0; a < ns; a += 3) for (int b = 0; b < ns; b++) for (int k = 2; k <= 3; k++)
    for (int st = 1; st <= 2; st++) for (int p = 0; p < k; p++) for (int d = 1; d <= 2; d++)
    for (int ceil = 0; ceil <= 1; ceil++) {
        int H = sizes[a], W = sizes[b], ke = (k - 1) * d + 1;
        int OH = (H + 2 * p - ke + (ceil ? st - 1 : 0)) / st + 1, OW = (W + 2 * p - ke + (ceil ? st - 1 : 0)) / st + 1;
        if (OH < 1 || OW < 1) continue;
        /* exact-size buffers: a read past the input shows under ASan */
        float *x = malloc(sizeof(float) * 3 * (size_t)H * W), *y = malloc(sizeof(float) * 3 * (size_t)OH * OW);
        float *r = malloc(sizeof(float) * 3 * (size_t)OH * OW), *rows = malloc(sizeof(float) * (size_t)H * OW);
        for (int i = 0; i < 3 * H * W; i++) {
            s = s * 1664525u + 1013904223u;
            x[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
        }
        /* ceil mode: the end pad grows by up to st - 1; the kernels pad the end implicitly */
        ec_f32_maxpool2d_2pass_avx2(3, H, W, OH, OW, k, k, st, st, d, d, p, p, x, y, rows);
        ec_f32_maxpool2d_scalar(3, H, W, OH, OW, k, k, st, st, d, d, p, p, x, r);
        n++;
        if (memcmp(y, r, sizeof(float) * 3 * (size_t)OH * OW)) {
            printf("H=%d W=%d k=%d s=%d p=%d d=%d ceil=%d differ\n", H, W, k, st, p, d, ceil);
            bad = 1;
        }
        free(x); free(y); free(r); free(rows);
    }
    return bad || n < 500;
}
"""


@pytest.mark.parametrize("flags", [[], ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g"]],
                         ids=["plain", "asan-ubsan"])
def test_maxpool_two_pass_avx2_matches_reference(tmp_path, flags):
    """The AVX2 separable max pool (vector stride-2 row pass, odd widths, edges, ceil-mode end pads) is bit-exact
    with the direct reference and reads nothing past its input."""
    t = get_target("x86_64-avx2")
    if shutil.which(t.cc) is None or not t.runs_natively():
        pytest.skip("needs an AVX2 host")
    src, exe = stable_source(MAXPOOL_AVX2_DRIVER), tmp_path / "m"
    compile_link(t.cc, [*t.cflags, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", *flags, f"-I{root()}"], [src], exe)
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
