/* One Winograd layer (f32-winograd.h) with its phases timed apart in thread CPU time (a shared host's
 * preemption does not count): phase packing, input transform, the alpha^2 GEMMs, output transform.
 * The shape and the blocking come in as -D constants (the emitter's choice, from
 * benchmarks/bench_winograd.py --split). Also times a copy of as many bytes as the transforms move
 * (a bandwidth reference in the same run). Prints "pack in gemm out copy_in copy_out" ms (best of REPS). */
#define _POSIX_C_SOURCE 200809L
#define F32_WINOGRAD_PROFILE
#include <stdio.h>
#include <stdlib.h>
#include "f32-winograd/f32-winograd.h"
#include "bench_util.h"

#ifndef REPS
#define REPS 15
#endif
#ifndef XG
#define XG 1 /* groups: XC / XG input channels per group */
#endif
#ifndef XNRV
#define XNRV 0 /* the GEMM microkernel's one-vector width (f32_winograd_shape.NRV) */
#endif
#ifndef XNRH
#define XNRH 0 /* its half-vector unit (f32_winograd_shape.NRH) */
#endif

/* best time of copying n floats (src and dst reused: the cache level the transforms see) */
static double copy_ms(size_t n) {
  float *a = fill(n), *b = fill(n);
  double best = 1e30;
  for (int r = 0; r < REPS; r++) {
    const double t0 = f32_winograd_now();
    memcpy(b, a, n * sizeof(float));
    a[r % n] += b[(r * 31) % n] * 1e-9f; /* keep the copy */
    const double t = f32_winograd_now() - t0;
    if (t < best) best = t;
  }
  free(a), free(b);
  return best * 1e3;
}

int main(void) {
  const size_t m = XM, A2 = (XM + 2) * (XM + 2), Ho = XH, Wo = XW;
  const size_t TH = EC_DIV_UP(Ho, m), TW = EC_DIV_UP(Wo, m), HP = TH * m + 2, Q = TW + 1;
  static f32_winograd_shape s;
  const f32_winograd_shape s0 = {1, XC, XH, XW, XK, XH, XW, XG, 1, 1, XM, 0, 0, 0, 0, XTB, XKB, 1, XMR, XNR, XKC,
                                 XUK, XIN, XOUT, 0, XNRV, XNRH};
  s = s0;
  s.TH = TH, s.TW = TW, s.HP = HP, s.Q = Q;
  float *x = fill(XC * XH * XW), *y = fill(XK * Ho * Wo), *bias = fill(XK);
  float *u = fill(A2 * (XK + XMR + XNR) * XC);
  float *xp = fill(f32_winograd_xp_floats(1, XC, m, HP, Q));
  float *tmp = fill(f32_winograd_tmp_floats(m, XC / XG, XKB, XTB, XTA));
  const f32_winograd_args a = {x, y, u, bias, NULL, 0, {EC_ACT_RELU, 0, 0}, xp, tmp};
  double best[4] = {1e30, 1e30, 1e30, 1e30};
  for (int r = 0; r < REPS; r++) {
    memset(f32_winograd_prof, 0, sizeof f32_winograd_prof);
    f32_winograd_run(&s, &a, NULL);
    for (int i = 0; i < 4; i++)
      if (f32_winograd_prof[i] < best[i]) best[i] = f32_winograd_prof[i];
  }
  const size_t T = TH * TW;
  printf("%.6f %.6f %.6f %.6f %.6f %.6f\n", best[0] * 1e3, best[1] * 1e3, best[2] * 1e3, best[3] * 1e3,
         copy_ms(A2 * XC * T), copy_ms(XK * Ho * Wo));
  free(x), free(y), free(bias), free(u), free(xp), free(tmp);
  return 0;
}
