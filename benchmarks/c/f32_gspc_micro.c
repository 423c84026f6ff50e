/* One grouped conv layer (3x3, pad 1) through the serial GSPC driver with each AVX2 row kernel,
 * in thread CPU time (CLOCK_THREAD_CPUTIME_ID), the variants interleaved so load drifts hit all alike.
 *   gcc -O3 -mavx2 -mfma -mf16c -Iruntime_c benchmarks/c/f32_gspc_micro.c runtime_c/ec_threadpool.c \
 *     runtime_c/f32-gspc/f32-gspc-o{4,8}-avx2.c runtime_c/f32-gspc/f32-gspc-ow-avx2.c -lm -lpthread
 *   ./a.out C H G [reps] [SW] [only this variant] */
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "f32-gspc/f32-gspc.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static size_t largest_div(size_t n, size_t cap) {
  size_t d = 1;
  for (size_t i = 1; i <= cap && i <= n; i++)
    if (n % i == 0) d = i;
  return d;
}

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct {
  const char *name;
  f32_gspc_row_fn fn;
  size_t to, bmax, ow;
} variant;

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  const size_t C = (size_t)atoi(argv[1]), H = (size_t)atoi(argv[2]), G = (size_t)atoi(argv[3]);
  const int reps = argc > 4 ? atoi(argv[4]) : 50;
  const size_t SW = argc > 5 ? (size_t)atoi(argv[5]) : 1;
  const size_t Ho = (H - 1) / SW + 1, Kpg = C / G, Cpg = C / G;
  const variant vs[] = {{"o4", f32_gspc_row_o4__avx2, 4, 14, 0},
                        {"o8", f32_gspc_row_o8__avx2, 8, 14, 0},
                        {"ow", f32_gspc_row_ow__avx2, 0, 1, 1}};
  const int nv = (int)(sizeof vs / sizeof vs[0]);
  float *x = malloc(C * H * H * sizeof(float)), *y = malloc(C * Ho * Ho * sizeof(float));
  float *w = malloc(2 * C * Cpg * 9 * 16 * sizeof(float)), *xp = malloc(2 * C * (H + 2) * (H + 2) * 4 * sizeof(float));
  for (size_t i = 0; i < C * H * H; i++) x[i] = (float)(i % 13) * 0.1f;
  for (size_t i = 0; i < 2 * C * Cpg * 9 * 16; i++) w[i] = (float)(i % 7) * 0.01f;
  double *t = malloc((size_t)reps * nv * sizeof(double));
  f32_gspc_shape s[8];
  int ok[8];
  for (int v = 0; v < nv; v++) {
    const size_t to = vs[v].ow ? Kpg : vs[v].to, ti = vs[v].ow ? 1 : largest_div(Cpg, to);
    size_t owb = vs[v].ow ? 1 : largest_div(Ho, vs[v].bmax);
    if (!vs[v].ow && owb < vs[v].bmax / 2 && Ho > vs[v].bmax) owb = vs[v].bmax;
    ok[v] = !(vs[v].ow && (Kpg > 8 || SW != 1)) && (argc < 7 || !strcmp(argv[6], vs[v].name));
    f32_gspc_shape sh = {1, C, H, H, C, Ho, Ho, G, 3, 3, SW, SW, 1, 1, 1, 1, to, ti, owb,
                         (Ho - 1) * SW + 3, (Ho - 1) * SW + 3, 1, vs[v].fn, NULL};
    s[v] = sh;
  }
  const double macs = (double)C * Cpg * 9 * Ho * Ho;
  for (int r = 0; r < reps; r++)
    for (int v = 0; v < nv; v++) {
      if (!ok[v]) continue;
      f32_gspc_args a = {x, y, w, NULL, NULL, 0, {EC_ACT_RELU, 0, 0}, xp};
      const double t0 = now_ms();
      f32_gspc_run(&s[v], &a, NULL);
      t[v * reps + r] = now_ms() - t0;
    }
  printf("C%zu H%zu G%zu SW%zu (Kpg %zu): %.2f MMAC\n", C, H, G, SW, Kpg, macs * 1e-6);
  for (int v = 0; v < nv; v++) {
    if (!ok[v]) continue;
    qsort(t + v * reps, (size_t)reps, sizeof(double), cmp);
    const double med = t[v * reps + reps / 2];
    printf("  %-4s T_O %2zu OWB %2zu: %.4f ms  %.1f GMAC/s\n", vs[v].name, s[v].T_O, s[v].OWB, med,
           macs / med * 1e-6);
  }
  return 0;
}
