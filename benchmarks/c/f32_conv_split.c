/* One spatial-pack conv layer (f32-conv.h), its im2col packing and its GEMM timed apart, in thread
 * CPU time (a shared host's preemption does not count). The shape comes in as -D constants, so the
 * driver folds every bound as it does in generated code. Built and run by benchmarks/bench_gemm.py
 * --split; prints "pack_ms gemm_ms run_ms" (best of REPS each), run_ms being the driver's items as generated
 * code runs them on one thread (each panel then packed while the previous one computes). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "f32-conv/f32-conv.h"
#include "bench_util.h"

#ifndef XMC
#define XMC 0
#endif

#ifndef REPS
#define REPS 9
#endif

int main(void) {
  static const f32_conv_shape s = {1, XC, XH, XW, XK, XHO, XWO, 1, XKH, XKW, XSH, XSW, 1, 1, XPT, XPL,
                                   XMR, XNR, XKC, XNC, 1, XUK, XMC, NULL};
  const size_t kg = XC * XKH * XKW, howo = XHO * XWO;
  float *x = fill(XC * XH * XW), *w = fill(EC_ROUND_UP(XK, XMR) * kg), *y = fill(XK * howo);
  float *bp = fill(kg * EC_ROUND_UP(XNC, XNR));
  const f32_gemm_epi e = {NULL, NULL, NULL, 0, {EC_ACT_RELU, 0, 0}};
  double best_pack = 1e30, best_gemm = 1e30, best_run = 1e30;
  const f32_conv_args a = {x, y, w, NULL, NULL, 0, {EC_ACT_RELU, 0, 0}, bp, kg * EC_ROUND_UP(XNC, XNR)};
  for (int r = 0; r < REPS; r++) {
    double pack = 0, gemm = 0;
    for (size_t n0 = 0; n0 < howo; n0 += XNC) {
      const size_t nc = EC_MIN((size_t)XNC, howo - n0);
      double t0 = cpu_s();
      f32_conv_pack_b(&s, x, n0, nc, bp);
      double t1 = cpu_s();
      f32_gemm_block(s.uk, XMR, XNR, XKC, kg, 0, XK, w, bp, n0, nc, y, howo, &e);
      gemm += cpu_s() - t1;
      pack += t1 - t0;
    }
    double t2 = cpu_s();
    for (size_t i = 0; i < f32_conv_items(&s); i++) f32_conv_gemm_item(&s, &a, 0, i);
    const double run = cpu_s() - t2;
    if (run < best_run) best_run = run;
    if (pack < best_pack) best_pack = pack;
    if (gemm < best_gemm) best_gemm = gemm;
  }
  printf("%.6f %.6f %.6f\n", best_pack * 1e3, best_gemm * 1e3, best_run * 1e3);
  free(x), free(w), free(y), free(bp);
  return 0;
}
