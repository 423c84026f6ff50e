/* One 1x1 stride-1 conv layer (f32-conv.h driver, the blocking edgec chose) in thread CPU time, in two cache
 * states: warm (a one-node model run in a loop: weights, input and output stay cached) and as inside a model
 * (the last-level cache flushed, so the weights come from memory, then the residual and the input written,
 * as the layers before would have). With XRES the epilogue adds a residual, as the bottleneck blocks'
 * last 1x1 layers do. Built and run by benchmarks/bench_gemm.py --cold; argv[1] = bytes to write to flush
 * the last-level cache; prints "warm_ms cold_ms" (best of REPS each, cold and warm runs interleaved). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "f32-conv/f32-conv.h"
#include "bench_util.h"

#ifndef XMC
#define XMC 0
#endif

#ifndef REPS
#define REPS 15
#endif

static void produce(float *p, size_t n, int salt) {
  for (size_t i = 0; i < n; i++) p[i] = (float)((i + (size_t)salt) % 11) * 0.02f - 0.1f;
}

int main(int argc, char **argv) {
  static const f32_conv_shape s = {1, XC, XH, XW, XK, XH, XW, 1, 1, 1, 1, 1, 1, 1, 0, 0,
                                   XMR, XNR, XKC, XNC, 1, XUK, XMC, XUKP};
  const size_t howo = (size_t)XH * XW, flush_bytes = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 64u << 20;
  float *x = fill((size_t)XC * howo), *w = fill(EC_ROUND_UP(XK, XMR) * XC), *y = fill((size_t)XK * howo);
  float *bias = fill(XK), *res = XRES ? fill((size_t)XK * howo) : NULL;
  float *bp = fill(XC * EC_ROUND_UP(XNC, XNR));
  unsigned char *flush = (unsigned char *)malloc(flush_bytes);
  if (!flush) return 1;
  const f32_conv_args a = {x, y, w, bias, res, 0, {EC_ACT_RELU, 0, 0}, bp, XC * EC_ROUND_UP(XNC, XNR)};
  double best[2] = {1e30, 1e30};
  for (int r = 0; r < 2 * REPS; r++) {
    const int cold = r & 1;
    if (cold) {
      memset(flush, r, flush_bytes);
      if (res) produce(res, (size_t)XK * howo, r);
      produce(x, (size_t)XC * howo, r);
    }
    const double t0 = cpu_s();
    for (size_t i = 0; i < f32_conv_items(&s); i++) f32_conv_gemm_item(&s, &a, 0, i);
    const double t = cpu_s() - t0;
    if (t < best[cold]) best[cold] = t;
  }
  printf("%.6f %.6f\n", best[0] * 1e3, best[1] * 1e3);
  free(x), free(w), free(y), free(bias), free(res), free(bp), free(flush);
  return 0;
}
