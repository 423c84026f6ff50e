/* The channel-lane Winograd F(T_M,3) transforms (T_INC, T_OUTC on T_VL lanes: f32_winograd_inc_* / outc_*) against
 * their portable twins (T_INCB, T_OUTCB with cb = T_VL), call by call.
 * inc: maps whose sides are not multiples of m, pads 0-3 and asymmetric (tiles over every border, rows of tiles
 * wholly in the padding), the tiles in runs from t0 > 0 of odd lengths, V's xi stride with and without a gap.
 * outc: every tile of odd maps (clipped at the right and bottom edges), one to three output blocks, M's stride with
 * and without a gap, every activation, residual none / before / after it, bias and NULL.
 * Each buffer is allocated to exactly what the call may touch (ASan sees an overrun) and starts filled with a
 * sentinel that every value the call does not write must keep. Prints the worst error as a fraction of the
 * tolerance; exit status != 0 on mismatch. */
#include <float.h>

#include "f32-winograd/f32-winograd.h"
#include "ref.h"

#define T_A (T_M + 2)
#define A2 (T_A * T_A)

/* |B^T| and |A^T| of f32-winograd-scalar-tmpl.h: the error bounds below are sums of absolute terms */
#if T_M == 2
static const double BTa[4][4] = {{1, 0, 1, 0}, {0, 1, 1, 0}, {0, 1, 1, 0}, {0, 1, 0, 1}};
static const double ATa[2][4] = {{1, 1, 1, 0}, {0, 1, 1, 1}};
#define M_SCALE 1.0
#elif T_M == 4
static const double BTa[6][6] = {{4, 0, 5, 0, 1, 0}, {0, 4, 4, 1, 1, 0}, {0, 4, 4, 1, 1, 0},
                                 {0, 2, 1, 2, 1, 0}, {0, 2, 1, 2, 1, 0}, {0, 4, 0, 5, 0, 1}};
static const double ATa[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, 1, 2, 2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, 1, 8, 8, 1}};
#define M_SCALE 0.1
#else
static const double BTa[8][8] = {{1, 0, 5.25, 0, 5.25, 0, 1, 0},     {0, 1, 1, 4.25, 4.25, 1, 1, 0},
                                 {0, 1, 1, 4.25, 4.25, 1, 1, 0},     {0, .5, .25, 2.5, 1.25, 2, 1, 0},
                                 {0, .5, .25, 2.5, 1.25, 2, 1, 0},   {0, 2, 4, 2.5, 5, .5, 1, 0},
                                 {0, 2, 4, 2.5, 5, .5, 1, 0},        {0, 1, 0, 5.25, 0, 5.25, 0, 1}};
static const double ATa[6][8] = {{1, 1, 1, 1, 1, 1, 1, 0},          {0, 1, 1, 2, 2, .5, .5, 0},
                                 {0, 1, 1, 4, 4, .25, .25, 0},      {0, 1, 1, 8, 8, .125, .125, 0},
                                 {0, 1, 1, 16, 16, .0625, .0625, 0}, {0, 1, 1, 32, 32, .03125, .03125, 1}};
#define M_SCALE 0.005 /* M values scaled so that outputs are O(1), where the activations are not saturated */
#endif

/* Tolerance. Both sides compute each transformed value as two passes of alpha-term sums (SIMD: factored into
 * FMA chains, scalar: plain dot products in another order), so each is within ~2*alpha*eps/2 of the exact value
 * relative to the sum of the absolute terms, mag = (|B^T| |d| |B^T|^T)[r][c] (or with |A^T| and M); the two may
 * differ by twice that: 4*alpha*eps*mag leaves a factor 2. An index error moves whole terms, far beyond it.
 * After the output transform the activation scales that error by its slope (at most 1.5: hard swish), and the
 * SIMD activations are polynomials within 7 ulp of the exact result (docs/kernels.md) where the scalar side calls
 * libm: 16 eps of |act| (|y|, or |y - res| <= |y| + |res| with the residual after it) covers both. */
#define TRANSFORM_TOL(mag) (4.0 * T_A * FLT_EPSILON * (mag))
#define ACT_SLOPE 1.5
#define ACT_TOL(y, r) (16.0 * FLT_EPSILON * (fabs(y) + fabs(r)))

static const float SENTINEL = -12345.5f;
static double g_worst = 0.0; /* max |simd - ref| / tolerance */

static float *sentinels(size_t n) {
  float *p = (float *)malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; i < n; i++) p[i] = SENTINEL;
  return p;
}

static int is_sentinel(float v) { return memcmp(&v, &SENTINEL, sizeof v) == 0; }

/* one value the call wrote: within tol of the reference (NaN fails) */
static int close_enough(float got, float want, double tol) {
  const double e = fabs((double)got - (double)want);
  if (!(e <= tol)) return 0;
  if (tol > 0 && e / tol > g_worst) g_worst = e / tol;
  return 1;
}

/* pixel (i, j) lane l of an H x W block of T_VL lanes, zero outside */
static double px(const float *x, size_t H, size_t W, ptrdiff_t i, ptrdiff_t j, size_t l) {
  return i < 0 || j < 0 || i >= (ptrdiff_t)H || j >= (ptrdiff_t)W ? 0.0 : x[((size_t)i * W + (size_t)j) * T_VL + l];
}

/* inc vs incb on the nt tiles from t0; V's xi stride nt*T_VL + gap */
static int check_inc(const float *x, size_t H, size_t W, size_t PT, size_t PL, size_t TW, size_t t0, size_t nt,
                     size_t gap) {
  const size_t vs = nt * T_VL + gap, n = A2 * vs;
  float *v = sentinels(n), *v0 = sentinels(n);
  T_INC(x, H, W, PT, PL, TW, t0, nt, v, vs);
  T_INCB(T_VL, x, H, W, PT, PL, TW, t0, nt, v0, vs);
  int bad = 0;
  for (size_t xi = 0; xi < A2 && !bad; xi++) {
    const size_t r = xi / T_A, c = xi % T_A;
    for (size_t k = 0; k < nt; k++) {
      const size_t t = t0 + k;
      const ptrdiff_t i0 = (ptrdiff_t)(t / TW * T_M) - (ptrdiff_t)PT, j0 = (ptrdiff_t)(t % TW * T_M) - (ptrdiff_t)PL;
      for (size_t l = 0; l < T_VL; l++) {
        double mag = 0.0;
        for (int i = 0; i < T_A; i++)
          for (int j = 0; j < T_A; j++) mag += BTa[r][i] * fabs(px(x, H, W, i0 + i, j0 + j, l)) * BTa[c][j];
        const size_t o = xi * vs + k * T_VL + l;
        if (!close_enough(v[o], v0[o], TRANSFORM_TOL(mag))) {
          printf("FAIL inc H%zu W%zu PT%zu PL%zu TW%zu t0 %zu nt %zu gap %zu: tile %zu xi %zu lane %zu: %.9g vs "
                 "%.9g\n", H, W, PT, PL, TW, t0, nt, gap, t, xi, l, v[o], v0[o]);
          bad = 1;
          break;
        }
      }
      if (bad) break;
    }
    for (size_t o = xi * vs + nt * T_VL; o < (xi + 1) * vs && !bad; o++)
      if (!is_sentinel(v[o]) || !is_sentinel(v0[o])) {
        printf("FAIL inc H%zu W%zu t0 %zu nt %zu gap %zu: the gap after xi %zu written\n", H, W, t0, nt, gap, xi);
        bad = 1;
      }
  }
  free(v), free(v0);
  return bad;
}

/* Every tile of the map (H, W, pads) in runs of len tiles (len 0: one call for all), the first run from t0 */
static int inc_cases(size_t H, size_t W, size_t PT, size_t PL, size_t PB, size_t PR, int *cases) {
  const size_t Ho = H + PT + PB - 2, Wo = W + PL + PR - 2;
  const size_t TW = EC_DIV_UP(Wo, (size_t)T_M), T = EC_DIV_UP(Ho, (size_t)T_M) * TW;
  float *x = falloc(H * W * T_VL);
  static const size_t lens[] = {0, 1, 3, 5, 7};
  int fails = 0;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    const size_t len = lens[li] ? lens[li] : T;
    for (size_t t0 = 0; t0 < T; t0 += len)
      fails += check_inc(x, H, W, PT, PL, TW, t0, EC_MIN(len, T - t0), (t0 + li) % 3 * 5), (*cases)++;
  }
  if (T > 2) /* one run from an odd t0 inside a tile row to the end */
    fails += check_inc(x, H, W, PT, PL, TW, T / 3 | 1, T - (T / 3 | 1), 1), (*cases)++;
  free(x);
  return fails;
}

/* outc vs outcb for tile (th, tw) of an Ho x Wo map of nb blocks (ys apart: one block passes 0 like the blocked
 * driver), M's stride nb*T_VL + gap; res: 0 none, 1 before the activation, 2 after */
static int check_outc(size_t Ho, size_t Wo, size_t nb, size_t th, size_t tw, size_t gap, ec_act act, int resm,
                      int use_bias) {
  const size_t nk = nb * T_VL, ms = nk + gap, HWc = Ho * Wo * T_VL, ys = nb > 1 ? HWc : 0;
  const size_t rows = EC_MIN((size_t)T_M, Ho - th * T_M), cols = EC_MIN((size_t)T_M, Wo - tw * T_M);
  const size_t o = (th * T_M * Wo + tw * T_M) * T_VL;
  float *mm = falloc(A2 * ms), *bias = falloc(nk), *res = falloc(nb * HWc);
  float *y = sentinels(nb * HWc), *y0 = sentinels(nb * HWc);
  for (size_t i = 0; i < A2 * ms; i++) mm[i] *= (float)M_SCALE;
  const float *b = use_bias ? bias : NULL, *r = resm ? res + o : NULL;
  T_OUTC(nk, mm, ms, y + o, Wo, ys, rows, cols, b, r, resm == 1, act);
  T_OUTCB(T_VL, nk, mm, ms, y0 + o, Wo, ys, rows, cols, b, r, resm == 1, act);
  int bad = 0;
  for (size_t kb = 0; kb < nb && !bad; kb++)
    for (size_t p = 0; p < Ho * Wo && !bad; p++) {
      const size_t i = p / Wo, j = p % Wo;
      const int in = i >= th * T_M && i < th * T_M + rows && j >= tw * T_M && j < tw * T_M + cols;
      for (size_t l = 0; l < T_VL && !bad; l++) {
        const size_t q = kb * HWc + p * T_VL + l, k = kb * T_VL + l;
        if (!in) {
          bad = !is_sentinel(y[q]) || !is_sentinel(y0[q]);
          if (bad) printf("FAIL outc Ho%zu Wo%zu nb%zu tile %zu,%zu: pixel %zu,%zu outside it written\n", Ho, Wo, nb,
                          th, tw, i, j);
          continue;
        }
        const size_t a = i - th * T_M, bb = j - tw * T_M;
        double mag = use_bias ? fabs(bias[k]) : 0.0;
        for (int rr = 0; rr < T_A; rr++)
          for (int c = 0; c < T_A; c++) mag += ATa[a][rr] * fabs(mm[(size_t)(rr * T_A + c) * ms + k]) * ATa[bb][c];
        const double rv = resm ? res[q] : 0.0;
        if (resm == 1) mag += fabs(rv);
        const double tol = ACT_SLOPE * TRANSFORM_TOL(mag) + ACT_TOL(y0[q], resm == 2 ? rv : 0.0);
        if (!close_enough(y[q], y0[q], tol)) {
          printf("FAIL outc Ho%zu Wo%zu nb%zu tile %zu,%zu gap %zu act%d res%d bias%d: channel %zu pixel %zu,%zu: "
                 "%.9g vs %.9g\n", Ho, Wo, nb, th, tw, gap, (int)act.kind, resm, use_bias, k, i, j, y[q], y0[q]);
          bad = 1;
        }
      }
    }
  free(mm), free(bias), free(res), free(y), free(y0);
  return bad;
}

/* every tile of an Ho x Wo map; each (activation, residual mode, bias) on tiles in turn, so every combination
 * meets an interior and an edge tile where the map has both */
static int outc_cases(size_t Ho, size_t Wo, size_t nb, int *cases) {
  const size_t TH = EC_DIV_UP(Ho, (size_t)T_M), TW = EC_DIV_UP(Wo, (size_t)T_M), T = TH * TW;
  int fails = 0;
  for (size_t e = 0; e < N_ACTS * 6; e++) {
    const ec_act act = k_acts[e % N_ACTS];
    const int resm = (int)(e / N_ACTS % 3), use_bias = (int)(e / N_ACTS / 3);
    for (size_t t = e % 2; t < T; t += 2)
      fails += check_outc(Ho, Wo, nb, t / TW, t % TW, (t + e) % 3 * 3, act, resm, use_bias), (*cases)++;
    if (T > 1 && e % 2 == 1) /* the last tile (bottom right, clipped both ways) with every combination */
      fails += check_outc(Ho, Wo, nb, TH - 1, TW - 1, 1, act, resm, use_bias), (*cases)++;
    if (e % 2 == 1) /* and tile 0 */
      fails += check_outc(Ho, Wo, nb, 0, 0, 0, act, resm, use_bias), (*cases)++;
  }
  return fails;
}

int main(void) {
  int fails = 0, cases = 0;
  /* H, W, PT, PL, PB, PR: maps below, at and past a tile, sides no multiple of m; pads 0-3, asymmetric */
  static const size_t in_shapes[][6] = {{1, 1, 1, 1, 1, 1}, {3, 3, 0, 0, 0, 0},  {5, 7, 1, 1, 1, 1},
                                        {7, 5, 0, 1, 2, 0}, {9, 13, 2, 1, 0, 2}, {13, 11, 1, 2, 2, 1},
                                        {2, 17, 1, 0, 1, 1}, {11, 2, 3, 1, 0, 3}, {20, 23, 1, 1, 1, 1},
                                        {17, 9, 2, 2, 2, 2}};
  for (size_t i = 0; i < sizeof in_shapes / sizeof in_shapes[0]; i++) {
    const size_t *s = in_shapes[i];
    fails += inc_cases(s[0], s[1], s[2], s[3], s[4], s[5], &cases);
  }
  /* Ho, Wo, blocks: one tile clipped both ways, a row, a column, maps a multiple of no m, one of every m */
  static const size_t out_shapes[][3] = {{1, 1, 1}, {1, 9, 2}, {7, 1, 1}, {5, 7, 3}, {13, 11, 1}, {12, 12, 2}};
  for (size_t i = 0; i < sizeof out_shapes / sizeof out_shapes[0]; i++)
    fails += outc_cases(out_shapes[i][0], out_shapes[i][1], out_shapes[i][2], &cases);
  printf("F(%d,3) on %d lanes: worst error %.3g of the tolerance\n", T_M, T_VL, g_worst);
  printf("%d/%d cases ok\n", cases - fails, cases);
  return fails != 0;
}
