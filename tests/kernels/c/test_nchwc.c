/* Channel-blocked kernels of one ISA (-DISA=avx2|avx512|neon, -DLANES=<its lanes>) vs the scalar references
 * in f32-nchwc-scalar.c, on odd shapes: channels not a multiple of LANES, odd maps, strides 1-3, pads,
 * dilations, every epilogue; SIMD runs through the run helpers on a 2-thread pool. Exit != 0 on mismatch. */
#include "f32-nchwc/f32-nchwc.h"
#include "ktest.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t nblk(size_t c) { return EC_DIV_UP(c, (size_t)LANES); }
static ec_pool pool;
static int fails, cases;

static void check(const char *what, double e, double tol, const char *fmt, size_t a, size_t b, size_t c, size_t d) {
  cases++;
  if (!(e <= tol)) {
    fails++;
    printf("FAIL %s (", what);
    printf(fmt, a, b, c, d);
    printf("): %g\n", e);
  }
}

/* blocked copy of an NCHW tensor with the pad lanes set to finite noise (kernels must not read them) */
static float *blocked(const float *x, size_t N, size_t C, size_t HW) {
  f32_nchwc_reorder_shape s = {N, C, HW, LANES};
  float *y = falloc(N * nblk(C) * HW * LANES);
  for (size_t i = 0; i < f32_nchwc_reorder_items(&s); i++) f32_nchwc_to_blocked__scalar(&s, x, y, i);
  for (size_t n = 0; n < N; n++)
    for (size_t p = 0; p < HW; p++)
      for (size_t l = C; l < nblk(C) * LANES; l++) y[((n * nblk(C) + l / LANES) * HW + p) * LANES + l % LANES] = 0.25f;
  return y;
}

static void test_reorder(size_t N, size_t C, size_t HW) {
  f32_nchwc_reorder_shape s = {N, C, HW, LANES};
  const size_t nx = N * C * HW, nb = N * nblk(C) * HW * LANES;
  float *x = falloc(nx), *b0 = falloc(nb), *b1 = falloc(nb), *x0 = falloc(nx), *x1 = falloc(nx);
  for (size_t i = 0; i < f32_nchwc_reorder_items(&s); i++) f32_nchwc_to_blocked__scalar(&s, x, b0, i);
  f32_nchwc_reorder_run(&s, SIMD(f32_nchwc_to_blocked), x, b1, &pool);
  check("to_blocked", err(b1, b0, nb), 0.0, "N%zu C%zu HW%zu%.0zu", N, C, HW, 0);
  for (size_t i = 0; i < f32_nchwc_reorder_items(&s); i++) f32_nchwc_from_blocked__scalar(&s, b0, x0, i);
  f32_nchwc_reorder_run(&s, SIMD(f32_nchwc_from_blocked), b0, x1, &pool);
  check("from_blocked", err(x1, x0, nx) + err(x0, x, nx), 0.0, "N%zu C%zu HW%zu%.0zu", N, C, HW, 0);
  free(x), free(b0), free(b1), free(x0), free(x1);
}

static const ec_act ACTS[] = {{EC_ACT_NONE, 0, 0}, {EC_ACT_RELU, 0, 0}, {EC_ACT_HARD_SWISH, 0, 0},
                              {EC_ACT_CLIP, -0.5f, 0.5f}, {EC_ACT_SIGMOID, 0, 0}, {EC_ACT_HARD_SIGMOID, 0.2f, 0.5f}};

static size_t dense_kt = 2, grouped_kt = 2;

/* 1x1 (dense or grouped, groups of any width) or depthwise conv; weights/bias packed as the emitter does */
static void test_conv(int dw, size_t N, size_t C, size_t K, size_t H, size_t W, size_t KH, size_t KW, size_t S,
                      size_t D, size_t P, size_t pc, int ai, int res, int before, size_t G, size_t KC, size_t IS) {
  /* output blocks per tile: a dense 1x1 takes dense_kt (2, or 3-4 where the codegen picks it), a grouped one
   * grouped_kt (the band tile: 1-2), a shuffled input 2 */
  const size_t KT = dw || IS > 1 ? 2 : G == 1 ? dense_kt : grouped_kt;
  f32_nchwc_conv_shape s = {N, C, H, W, K, 0, 0, KH, KW, S, S, D, D, P, P, LANES, pc, G, KC, 0, IS, KT, 0, NULL};
  s.Ho = (H + 2 * P - ((KH - 1) * D + 1)) / S + 1, s.Wo = (W + 2 * P - ((KW - 1) * D + 1)) / S + 1;
  s.YHW = s.Ho * s.Wo;
  const size_t taps = KH * KW, kb = nblk(K), HWo = s.Ho * s.Wo, ny = N * kb * HWo * LANES;
  for (size_t k = 0; k < kb && !dw; k++) { /* rows per block: the widest block's input range */
    size_t lo, hi;
    f32_nchwc_1x1_range(&s, k, &lo, &hi);
    if (hi - lo > s.WS) s.WS = hi - lo;
  }
  if (!dw && KC == 0) s.KC = s.WS;
  float *xr = falloc(N * C * H * W), *x = blocked(xr, N, C, H * W);
  float *wp = falloc(dw ? kb * taps * LANES : kb * s.WS * LANES), *bias = falloc(kb * LANES);
  for (size_t k = K; k < kb * LANES; k++) { /* zero pad lanes, as packed for the kernels */
    bias[k] = 0.0f;
    if (dw)
      for (size_t t = 0; t < taps; t++) wp[(k / LANES * taps + t) * LANES + k % LANES] = 0.0f;
  }
  for (size_t k = 0; k < kb * LANES && !dw; k++) { /* 1x1: zero where the lane's group does not read c */
    size_t lo, hi, row = 0;
    f32_nchwc_1x1_range(&s, k / LANES, &lo, &hi);
    const size_t sg = IS > 1 ? IS : 1; /* rows in shuffle-group order (c = j * IS + i, group i first) */
    for (size_t i = 0; i < sg; i++)
      for (size_t c = lo; c < hi; c++)
        if (c % sg == i && (k >= K || c / (C / G) != k / (K / G))) wp[(k / LANES * s.WS + row++) * LANES + k % LANES] = 0.0f;
        else if (c % sg == i) row++;
    for (; row < s.WS; row++) wp[(k / LANES * s.WS + row) * LANES + k % LANES] = 0.0f;
  }
  float *rr = falloc(N * K * HWo), *r = res ? blocked(rr, N, K, HWo) : NULL;
  float *y0 = falloc(ny), *y1 = falloc(ny);
  f32_nchwc_conv_args a0 = {x, y0, wp, bias, r, before, ACTS[ai], NULL}, a1 = a0;
  a1.y = y1;
  size_t items;
  if (dw) {
    items = f32_nchwc_dwconv_items(&s);
    for (size_t i = 0; i < items; i++) f32_nchwc_dwconv__scalar(&s, &a0, i);
    s.fn = SIMD(f32_nchwc_dwconv);
  } else {
    items = f32_nchwc_conv1x1_items(&s);
    for (size_t i = 0; i < items; i++) f32_nchwc_conv1x1__scalar(&s, &a0, i);
    s.fn = SIMD(f32_nchwc_conv1x1);
  }
  f32_nchwc_conv_run(&s, &a1, items, &pool);
  char what[64];
  snprintf(what, sizeof what, "%s k%zux%zu s%zu d%zu p%zu g%zu is%zu act%d res%d%d", dw ? "dwconv" : "conv1x1", KH,
           KW, S, D, P, G, IS, ai, res, before);
  check(what, err(y1, y0, ny), 1e-5, "C%zu K%zu H%zu W%zu", C, K, H, W);
  free(xr), free(x), free(wp), free(bias), free(rr), free(r), free(y0), free(y1);
}

/* A strided dense conv as the blocked im2col + the dense 1x1 (f32_nchwc_im2col_conv, packed as codegen/ops/nchwc.py
 * packs it): RC output rows at a time on the SIMD kernel against all rows at once on the scalar one, and that
 * against a plain NCHW conv on the real channels. */
static void test_im2col_conv(size_t N, size_t C, size_t K, size_t H, size_t W, size_t KH, size_t KW, size_t S,
                             size_t D, size_t P, size_t RC, int ai, int res, size_t KT) {
  const size_t Ho = (H + 2 * P - ((KH - 1) * D + 1)) / S + 1, Wo = (W + 2 * P - ((KW - 1) * D + 1)) / S + 1;
  const size_t taps = KH * KW, nbc = nblk(C), CC = taps * nbc * LANES, kb = nblk(K), HWo = Ho * Wo;
  const size_t ny = N * kb * HWo * LANES;
  float *xr = falloc(N * C * H * W), *x = blocked(xr, N, C, H * W), *w = falloc(K * C * taps);
  float *wp = falloc(kb * CC * LANES), *bias = falloc(kb * LANES), *col = falloc(CC * EC_MAX(RC, Ho) * Wo);
  for (size_t k = 0; k < kb * LANES; k++) { /* [K/c][tap-major channels][c], zero on pad lanes and channels */
    if (k >= K) bias[k] = 0.0f;
    for (size_t t = 0; t < taps; t++)
      for (size_t c = 0; c < nbc * LANES; c++)
        wp[(k / LANES * CC + t * nbc * LANES + c) * LANES + k % LANES] =
            k < K && c < C ? w[(k * C + c) * taps + t] : 0.0f;
  }
  float *rr = falloc(N * K * HWo), *r = res ? blocked(rr, N, K, HWo) : NULL;
  float *y0 = falloc(ny), *y1 = falloc(ny), *yr = falloc(N * K * HWo), *ye = falloc(N * K * HWo);
  f32_nchwc_im2col_shape g = {x, col, N, nbc, H, W, Ho, Wo, KH, KW, S, S, D, D, P, P, LANES, 0, 0};
  f32_nchwc_conv_shape s = {1, CC, Ho, Wo, K, Ho, Wo, 1, 1, 1, 1, 1, 1, 0, 0, LANES, 5, 1, CC, CC, 1, 2, 0, NULL};
  f32_nchwc_conv_args a0 = {x, y0, wp, bias, r, ai % 2, ACTS[ai], NULL}, a1 = a0;
  a1.y = y1;
  s.fn = f32_nchwc_conv1x1__scalar;
  f32_nchwc_im2col_conv(&g, &s, &a0, Ho, NULL);
  s.fn = SIMD(f32_nchwc_conv1x1), s.KT = KT, s.KC = 2 * LANES; /* several passes over the taps' channels */
  s.Ho = RC, s.PC = EC_MAX((size_t)1, RC * Wo / 3);
  f32_nchwc_im2col_conv(&g, &s, &a1, RC, &pool);
  check("im2col_conv", err(y1, y0, ny), 1e-5, "C%zu K%zu H%zu RC%zu", C, K, H, RC);
  f32_nchwc_reorder_shape o = {N, K, HWo, LANES};
  for (size_t i = 0; i < f32_nchwc_reorder_items(&o); i++) f32_nchwc_from_blocked__scalar(&o, y0, yr, i);
  for (size_t n = 0; n < N; n++) /* the plain conv */
    for (size_t k = 0; k < K; k++)
      for (size_t oh = 0; oh < Ho; oh++)
        for (size_t ow = 0; ow < Wo; ow++) {
          float acc = bias[k];
          for (size_t c = 0; c < C; c++)
            for (size_t kh = 0; kh < KH; kh++)
              for (size_t kw = 0; kw < KW; kw++) {
                const ptrdiff_t ih = (ptrdiff_t)(oh * S + kh * D) - (ptrdiff_t)P;
                const ptrdiff_t iw = (ptrdiff_t)(ow * S + kw * D) - (ptrdiff_t)P;
                if (ih >= 0 && ih < (ptrdiff_t)H && iw >= 0 && iw < (ptrdiff_t)W)
                  acc += xr[((n * C + c) * H + (size_t)ih) * W + (size_t)iw] * w[(k * C + c) * taps + kh * KW + kw];
              }
          const size_t i = ((n * K + k) * Ho + oh) * Wo + ow;
          ye[i] = ec_epi_value(acc, res ? rr + i : NULL, ai % 2, ACTS[ai]);
        }
  check("im2col_conv vs plain conv", err(yr, ye, N * K * HWo), 1e-4, "C%zu K%zu H%zu RC%zu", C, K, H, RC);
  free(xr), free(x), free(w), free(wp), free(bias), free(col), free(rr), free(r), free(y0), free(y1), free(yr);
  free(ye);
}

static void test_pool(int max, size_t N, size_t C, size_t H, size_t W, size_t KH, size_t KW, size_t S, size_t D,
                      size_t P, size_t extra, int cip) {
  f32_nchwc_pool_shape s = {N, C, H, W, 0, 0, KH, KW, S, S, D, D, P, P, P + extra, P + extra, LANES, 2, max, cip, NULL};
  /* extra end padding: the ceil_mode cells */
  s.Ho = (H + 2 * P + extra - ((KH - 1) * D + 1)) / S + 1, s.Wo = (W + 2 * P + extra - ((KW - 1) * D + 1)) / S + 1;
  const size_t ny = N * nblk(C) * s.Ho * s.Wo * LANES;
  float *xr = falloc(N * C * H * W), *x = blocked(xr, N, C, H * W), *y0 = falloc(ny), *y1 = falloc(ny);
  for (size_t i = 0; i < f32_nchwc_pool_items(&s); i++) f32_nchwc_pool__scalar(&s, x, y0, i);
  s.fn = SIMD(f32_nchwc_pool);
  f32_nchwc_pool_run(&s, x, y1, &pool);
  char what[64];
  snprintf(what, sizeof what, "%s k%zux%zu s%zu d%zu p%zu+%zu cip%d", max ? "maxpool" : "avgpool", KH, KW, S, D, P,
           extra, cip);
  check(what, err(y1, y0, ny), max ? 0.0 : 1e-6, "N%zu C%zu H%zu W%zu", N, C, H, W);
  free(xr), free(x), free(y0), free(y1);
}

static void test_shuffle(size_t N, size_t C, size_t G, size_t HW) {
  f32_nchwc_shuffle_shape s = {N, C, HW, LANES, G};
  const size_t nb = N * nblk(C) * HW * LANES;
  float *xr = falloc(N * C * HW), *x = blocked(xr, N, C, HW), *y0 = falloc(nb), *y1 = falloc(nb);
  for (size_t i = 0; i < f32_nchwc_shuffle_items(&s); i++) f32_nchwc_shuffle__scalar(&s, x, y0, i);
  f32_nchwc_shuffle_run(&s, SIMD(f32_nchwc_shuffle), x, y1, &pool);
  double e = err(y1, y0, nb);
  /* the reference itself against the NCHW definition: y[c] = x[(c % G) * (C/G) + c / G] */
  for (size_t n = 0; n < N; n++)
    for (size_t c = 0; c < C; c++)
      for (size_t p = 0; p < HW; p++) {
        const float want = xr[(n * C + c % G * (C / G) + c / G) * HW + p];
        if (y0[((n * nblk(C) + c / LANES) * HW + p) * LANES + c % LANES] != want) e += 1.0;
      }
  check("shuffle", e, 0.0, "N%zu C%zu G%zu HW%zu", N, C, G, HW);
  free(xr), free(x), free(y0), free(y1);
}

static void test_gap_scale(size_t N, size_t C, size_t H, size_t W) {
  f32_nchwc_pool_shape s = {N, C, H, W, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, LANES, 1, 0, 0, NULL};
  const size_t nb = N * nblk(C) * LANES, nx = nb * H * W;
  float *xr = falloc(N * C * H * W), *x = blocked(xr, N, C, H * W), *g0 = falloc(nb), *g1 = falloc(nb);
  for (size_t i = 0; i < f32_nchwc_pool_items(&s); i++) f32_nchwc_gavgpool__scalar(&s, x, g0, i);
  s.fn = SIMD(f32_nchwc_gavgpool);
  f32_nchwc_pool_run(&s, x, g1, &pool);
  check("gavgpool", err(g1, g0, nb), 1e-6, "N%zu C%zu H%zu W%zu", N, C, H, W);
  f32_nchwc_scale_shape ss = {N, C, H * W, LANES};
  float *y0 = falloc(nx), *y1 = falloc(nx);
  for (size_t i = 0; i < f32_nchwc_scale_items(&ss); i++) f32_nchwc_scale__scalar(&ss, x, g0, y0, i);
  f32_nchwc_scale_run(&ss, SIMD(f32_nchwc_scale), x, g0, y1, &pool);
  check("scale", err(y1, y0, nx), 0.0, "N%zu C%zu H%zu W%zu", N, C, H, W);
  free(xr), free(x), free(g0), free(g1), free(y0), free(y1);
}

int main(int argc, char **argv) {
  const int quick = argc > 1 && !strcmp(argv[1], "quick");
  if (ec_pool_init(&pool, 2) != 0) return 2;
  const size_t chans[] = {1, LANES - 1, LANES, LANES + 3, 2 * LANES + 5, 3 * LANES};
  for (size_t ci = 0; ci < sizeof chans / sizeof *chans; ci++) {
    const size_t C = chans[ci];
    test_reorder(1, C, 1);
    test_reorder(2, C, 7 * 5);
    test_reorder(1, C, 2 * LANES + 3);
    test_reorder(1, C, 3 * LANES - 1); /* a pixel tail longer than half a vector */
    test_gap_scale(2, C, 5, 3);
    for (dense_kt = 2; dense_kt <= 4; dense_kt++) { /* dense tiles of 1-2 blocks, 1-3 (balanced_kt), 1-4 */
      for (size_t kc = 0; kc < sizeof chans / sizeof *chans; kc += quick ? 2 : 1)
        for (size_t hw = 0; hw < 3; hw++) { /* maps: 1x1, odd, one with a pixel tail per item */
          const size_t H = hw == 0 ? 1 : hw == 1 ? 7 : 13, W = hw == 0 ? 1 : hw == 1 ? 5 : 11;
          test_conv(0, 1 + (hw == 1), C, chans[kc], H, W, 1, 1, 1, 1, 0, hw == 2 ? 18 : 6,
                    (int)((ci + kc + hw) % 6), (int)(kc % 2), (int)(hw % 2), 1, kc % 2 ? LANES : C,
                    0); /* one pass, or one per block */
        }
      for (size_t t = 2; t <= 4; t++) /* dense 1x1: a tail tile of 2-4 pixels after a whole one */
        test_conv(0, 1, C, 2 * LANES + 5, 1, 6 + t, 1, 1, 1, 1, 0, 18, (int)((ci + t) % 6), (int)(t % 2), 1, 1,
                  t == 3 ? LANES : C, 0);
      /* 4, 6 (4 + 2) and 7 (4 + 3) output blocks, the last partial, one pass or several */
      for (size_t kq = 0; kq < 3; kq++)
        test_conv(0, 1 + kq % 2, C, kq == 0 ? 4 * LANES : kq == 1 ? 5 * LANES + 3 : 7 * LANES, 7, 5, 1, 1, 1, 1, 0,
                  kq == 2 ? 35 : 12, (int)((ci + kq) % 6), (int)(kq % 2), (int)(ci % 2), 1, kq == 1 ? LANES : C, 0);
    }
    dense_kt = 2;
    /* strided dense convs in chunks of output rows: 3x3 s2 (the last chunk partial, or one), 1x1 s2, dilated */
    test_im2col_conv(1 + ci % 2, C, 2 * LANES + 3, 11, 9, 3, 3, 2, 1, 1, 2, (int)(ci % 6), (int)(ci % 2), 4);
    test_im2col_conv(1, C, 4 * LANES, 9, 7, 3, 3, 2, 1, 1, 5, (int)((ci + 1) % 6), 1, 4);
    test_im2col_conv(1, C, LANES + 1, 8, 8, 1, 1, 2, 1, 0, 3, (int)((ci + 2) % 6), (int)(ci % 2), 2);
    test_im2col_conv(2, C, 3 * LANES, 13, 10, 3, 3, 2, 2, 2, 1, (int)((ci + 3) % 6), 0, 4);
    static const size_t PG[][3] = {{24, 112, 4}, {136, 136, 4}, {20, 36, 4}, {9, 15, 3}, {30, 10, 5}, {12, 12, 6}};
    const size_t *pg = PG[ci];
    for (grouped_kt = 1; grouped_kt <= 2; grouped_kt++) { /* band tiles of 1-2 blocks */
      for (size_t g = 2; g <= 3; g++) /* grouped 1x1: 1 to 3 blocks per group, pairs split by group edges */
        test_conv(0, 1, g * (ci % 3 + 1) * LANES, g * (ci % 2 + 1) * LANES, 7, 5, 1, 1, 1, 1, 0, 12, (int)(ci % 6),
                  (int)(g % 2), 1, g, g == 2 ? LANES : 2 * LANES, 0);
      /* groups that are not whole blocks (ShuffleNet: 24->112, 136->136, 272->272 in 4 groups): blocks straddling
       * a group edge, a group narrower than a block, input ranges starting mid-block; one pass or several */
      for (size_t hw = 0; hw < 2; hw++)
        test_conv(0, 1 + hw, pg[0], pg[1], hw ? 7 : 13, hw ? 5 : 11, 1, 1, 1, 1, 0, hw ? 12 : 30,
                  (int)((ci + hw) % 6), (int)(hw + ci) % 2, (int)(ci % 2), pg[2], hw ? LANES + 3 : 0, 0);
      /* the blocked Winograd's merged groups: 2 of 1.5 blocks, 4 of 0.75 (blocks reading 1-2 groups), 3 of 5
       * channels past a block; pixel counts with a 1-5 pixel tail */
      static const size_t MG[][2] = {{3 * LANES, 2}, {3 * LANES, 4}, {3 * (LANES + 5), 3}};
      const size_t *mg = MG[ci % 3];
      test_conv(0, 1, mg[0], mg[0], 1, 6 * (ci % 3) + 1 + ci, 1, 1, 1, 1, 0, 6 * (ci % 3) + 1 + ci, (int)(ci % 6),
                0, 0, mg[1], 0, 0);
    }
    grouped_kt = 2;
    /* the input of a fused channel shuffle (ShuffleNet: 4 groups), with the conv's groups or without */
    for (size_t is = 2; is <= 4; is++)
      if (pg[0] % is == 0)
        test_conv(0, 1, pg[0], pg[1], 7, 5, 1, 1, 1, 1, 0, 12, (int)((ci + is) % 6), (int)(is % 2), 1,
                  is == 3 ? 1 : pg[2], 0, is);
    for (size_t g = 1; g <= 4; g++)
      if (C % g == 0) test_shuffle(1 + (g == 2), C, g, g == 3 ? 1 : 7 * 5);
    test_shuffle(1, 4 * C, 4, 13);
    static const size_t KS[][2] = {{3, 3}, {5, 5}, {1, 1}, {3, 1}, {7, 7}};
    for (size_t k = 0; k < sizeof KS / sizeof *KS; k++)
      for (size_t S = 1; S <= 3; S++)
        for (size_t D = 1; D <= 2; D++)
          for (size_t P = 0; P <= KS[k][0] / 2 * D; P += quick ? 2 : 1) {
            const size_t H = 9 + S, W = 10 + 2 * D + (k % 2);
            if ((KS[k][0] - 1) * D + 1 > H + 2 * P || (KS[k][1] - 1) * D + 1 > W + 2 * P) continue;
            test_conv(1, 1 + (S == 2), C, C, H, W, KS[k][0], KS[k][1], S, D, P, 1 + S, (int)((k + S + P) % 6),
                      (int)((S + D) % 2), (int)(P % 2), 1, C, 0);
            if (k != 2) /* all rows in one item: interior columns tiled down 8 and 4 rows at a time */
              test_conv(1, 1, C, C, H + 8, W + 9, KS[k][0], KS[k][1], S, D, P, H + 8, (int)((k + P) % 6), (int)(P % 2),
                        (int)(S % 2), 1, C, 0);
            test_pool(1, 1, C, H, W, KS[k][0], KS[k][1], S, D, P, S > 1, 0);
            test_pool(0, 1, C, H, W, KS[k][0], KS[k][1], S, D, P, S > 1, (int)(P % 2));
          }
    /* 3x3 stride 1: interior rows two at a time (an odd one left on 3-7 interior rows), 2-6 interior columns: 4-wide
     * tiles and a last tile of 1-3 */
    for (size_t w = 4; w <= 8; w++) {
      test_conv(1, 1, C, C, w + 1, w, 3, 3, 1, 1, 1, w + 1, (int)(w % 6), (int)(w % 2), (int)(ci % 2), 1, C, 0);
      /* 3x3 stride 2: 5-9 interior columns, tiles of 8 and 4 and a last one of 1-3 */
      test_conv(1, 1, C, C, w + 4, 2 * w + 5, 3, 3, 2, 1, 1, w + 4, (int)((w + 1) % 6), (int)(w % 2), (int)(w % 3 == 0),
                1, C, 0);
    }
  }
  ec_pool_destroy(&pool);
  printf("%d of %d cases ok\n", cases - fails, cases);
  return fails != 0;
}
