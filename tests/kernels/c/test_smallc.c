/* Direct few-input-channel conv (f32-conv-smallc) of one ISA (-DISA=avx2|neon, -DLANES=<its lanes>) against the
 * scalar reference, and the reference against a plain NCHW conv of the unpacked weights: C 1..4, kernels 1/3/5/7
 * (and 2x5), strides 1-3, pads (asymmetric too), odd maps, output channels not a multiple of the block, blocks
 * of one and two vectors, NCHW and blocked outputs (blocks of LANES and 2 * LANES channels), every kind of
 * epilogue; the SIMD kernel runs through the run helper on a 2-thread pool. Exit != 0 on a mismatch. */
#include "f32-conv/f32-conv-smallc.h"
#include "ktest.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *nanalloc(size_t n) { /* outputs start NaN: an element no kernel writes fails the comparison */
  float *p = malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; i < n; i++) p[i] = NAN;
  return p;
}
static ec_pool pool;
static int fails, cases;

static const ec_act ACTS[] = {{EC_ACT_NONE, 0, 0}, {EC_ACT_RELU, 0, 0}, {EC_ACT_CLIP, -0.5f, 0.5f},
                              {EC_ACT_LEAKY_RELU, 0.1f, 0}, {EC_ACT_HARD_SWISH, 0, 0}, {EC_ACT_SIGMOID, 0, 0}};
#define NACTS (sizeof ACTS / sizeof *ACTS)

/* KH x KW conv, stride SH x SW, pads PT/PL (bottom/right pads PB/PR), OB output channels per weight block,
 * output blocked by CB channels (0: NCHW), epilogue ACTS[ai] with or without a residual */
static void test_case(size_t N, size_t C, size_t K, size_t H, size_t W, size_t KH, size_t KW, size_t SH, size_t SW,
                      size_t PT, size_t PL, size_t PB, size_t PR, size_t OB, size_t CB, size_t RC, int ai, int res,
                      int before) {
  if (H + PT + PB < KH || W + PL + PR < KW) return;
  f32_conv_smallc_shape s = {N, C, H, W, K, 0, 0, KH, KW, SH, SW, PT, PL, OB, RC, CB, NULL};
  s.Ho = (H + PT + PB - KH) / SH + 1, s.Wo = (W + PL + PR - KW) / SW + 1;
  const size_t kout = f32_conv_smallc_kout(&s), nob = EC_DIV_UP(kout, OB), taps = C * KH * KW;
  const size_t HoWo = s.Ho * s.Wo, ny = N * kout * HoWo, nx = N * C * H * W;
  float *x = falloc(nx), *wu = falloc(K * taps), *bu = falloc(K);
  float *w = calloc(nob * taps * OB, sizeof(float)), *bias = calloc(nob * OB, sizeof(float));
  for (size_t k = 0; k < K; k++) { /* [K][C][KH][KW] -> [K/OB][C][KH][KW][OB], pad lanes zero */
    bias[k] = bu[k];
    for (size_t t = 0; t < taps; t++) w[(k / OB * taps + t) * OB + k % OB] = wu[k * taps + t];
  }
  float *r = res ? falloc(ny) : NULL, *y0 = nanalloc(ny), *y1 = nanalloc(ny), *yn = nanalloc(ny);
  f32_conv_smallc_args a = {x, y0, w, bias, r, before, ACTS[ai]};
  s.fn = f32_conv_smallc__scalar;
  for (size_t i = 0; i < f32_conv_smallc_items(&s); i++) f32_conv_smallc__scalar(&s, &a, i);
  /* plain conv of the unpacked weights, laid out like the output (pad channels: act(0) + residual) */
  for (size_t n = 0; n < N; n++)
    for (size_t k = 0; k < kout; k++)
      for (size_t oh = 0; oh < s.Ho; oh++)
        for (size_t ow = 0; ow < s.Wo; ow++) {
          double acc = k < K ? bu[k] : 0.0;
          for (size_t c = 0; c < C && k < K; c++)
            for (size_t kh = 0; kh < KH; kh++)
              for (size_t kw = 0; kw < KW; kw++) {
                const long ih = (long)(oh * SH + kh) - (long)PT, iw = (long)(ow * SW + kw) - (long)PL;
                if (ih >= 0 && iw >= 0 && ih < (long)H && iw < (long)W)
                  acc += (double)x[((n * C + c) * H + (size_t)ih) * W + (size_t)iw] *
                         wu[((k * C + c) * KH + kh) * KW + kw];
              }
          const size_t o = CB ? (((n * (kout / CB) + k / CB) * s.Ho + oh) * s.Wo + ow) * CB + k % CB
                              : (n * K + k) * HoWo + oh * s.Wo + ow;
          yn[o] = ec_epi_value((float)acc, r ? r + o : NULL, before, ACTS[ai]);
        }
  a.y = y1;
  s.fn = SIMD(f32_conv_smallc);
  f32_conv_smallc_run(&s, &a, &pool);
  const double tol = ACTS[ai].kind == EC_ACT_SIGMOID ? 2e-5 : 1e-5;
  const double e_ref = err(y0, yn, ny), e_simd = err(y1, y0, ny);
  cases++;
  if (!(e_ref <= tol) || !(e_simd <= tol)) {
    fails++;
    printf("FAIL smallc N%zu C%zu K%zu %zux%zu k%zux%zu s%zux%zu p%zu,%zu,%zu,%zu OB%zu CB%zu RC%zu act%d res%d/%d: "
           "reference %g, " STR(ISA) " %g\n",
           N, C, K, H, W, KH, KW, SH, SW, PT, PL, PB, PR, OB, CB, RC, ai, res, before, e_ref, e_simd);
  }
  free(x), free(wu), free(bu), free(w), free(bias), free(r), free(y0), free(y1), free(yn);
}

int main(int argc, char **argv) {
  const int quick = argc > 1 && !strcmp(argv[1], "quick");
  if (ec_pool_init(&pool, 2)) return 2;
  static const size_t KS[][2] = {{1, 1}, {3, 3}, {5, 5}, {7, 7}, {2, 5}};
  static const size_t KOUT[] = {1, LANES - 1, LANES + 3, 2 * LANES, 3 * LANES + 5, 64};
  static const size_t MAPS[][2] = {{1, 1}, {5, 3}, {9, 13}, {17, 11}, {23, 61}};
  int ai = 0;
  for (size_t c = 1; c <= F32_CONV_SMALLC_MAX_C; c++)
    for (size_t k = 0; k < sizeof KS / sizeof *KS; k++)
      for (size_t st = 1; st <= 3; st++)
        for (size_t m = 0; m < sizeof MAPS / sizeof *MAPS; m++)
          for (size_t ko = 0; ko < sizeof KOUT / sizeof *KOUT; ko += quick ? 2 : 1) {
            const size_t kh = KS[k][0], kw = KS[k][1], H = MAPS[m][0], W = MAPS[m][1];
            const size_t pt = kh / 2, pl = kw / 2, K = KOUT[ko];
            const size_t ob = (ko + m) % 2 ? LANES : 2 * LANES;
            const size_t cb = (ko + k + st) % 3 == 0 ? 0 : (ko + c) % 2 ? LANES : 2 * LANES;
            const int res = (int)((k + m + ko) % 3 == 1);
            test_case(1, c, K, H, W, kh, kw, st, st, pt, pl, pt, pl, ob, cb, 1 + (m + ko) % 3, ai, res, (int)(ko % 2));
            ai = (ai + 1) % (int)NACTS;
            if (!quick || (k + m) % 2 == 0) { /* asymmetric pads, unequal strides, no pad, two images */
              test_case(2, c, K, H, W, kh, kw, st, st == 1 ? 2 : 1, pt, pl + 1 > kw ? 0 : pl + 1, 0, pl, ob, 0, 2, ai,
                        0, 0);
              test_case(1, c, K, H, W, kh, kw, st, st, 0, 0, 0, 0, 2 * LANES / ob * LANES, cb, 3, ai, res, 1);
              ai = (ai + 1) % (int)NACTS;
            }
          }
  /* the two stems the kernel is for, at a reduced map */
  test_case(1, 3, 64, 57, 57, 3, 3, 2, 2, 0, 0, 0, 0, 2 * LANES, 0, 4, 1, 0, 0);
  test_case(1, 3, 64, 59, 59, 7, 7, 2, 2, 3, 3, 3, 3, 2 * LANES, LANES, 4, 1, 0, 0);
  ec_pool_destroy(&pool);
  printf("%d cases ok, %d failed\n", cases - fails, fails);
  return fails != 0;
}
