/* GSPC (f32-gspc.h + one row kernel) vs the naive reference. -DT_ROW=<row kernel> -DTEST_TO=<lanes>
 * (0 = scalar: T_O chosen per case); -DTEST_OW for the along-ow kernel (T_O = Kpg, SW phases).
 * A T_O tile kernel also runs as the tail kernel (row_tail) of a twice as wide packing whose other tiles the
 * scalar kernel computes: it then reads the first T_O lanes of each packed weight row.
 * Exit status != 0 on mismatch. */
#include "f32-gspc/f32-gspc.h"
#include "ref.h"

/* ONNX [K][Cpg][KH][KW] -> [G][tiles][Cpg/TI][KH][KW][TI][TO] */
static void pack_w(const conv_p *p, size_t TO, size_t TI, const float *w, float *dst) {
  const size_t Kpg = p->K / p->G, Cpg = p->C / p->G, tiles = EC_DIV_UP(Kpg, TO);
  size_t i = 0;
  for (size_t g = 0; g < p->G; g++)
    for (size_t t = 0; t < tiles; t++)
      for (size_t cb = 0; cb < Cpg / TI; cb++)
        for (size_t kh = 0; kh < p->KH; kh++)
          for (size_t kw = 0; kw < p->KW; kw++)
            for (size_t ti = 0; ti < TI; ti++)
              for (size_t o = 0; o < TO; o++, i++) {
                const size_t k = t * TO + o, c = cb * TI + ti;
                dst[i] = k < Kpg ? w[(((g * Kpg + k) * Cpg + c) * p->KH + kh) * p->KW + kw] : 0.0f;
              }
}

static size_t largest_div(size_t n, size_t cap) {
  size_t d = 1;
  for (size_t i = 1; i <= cap && i <= n; i++)
    if (n % i == 0) d = i;
  return d;
}

static int g_ran = 0; /* cases a kernel with restrictions (TEST_OW) actually ran */

#if TEST_TO && !defined(TEST_OW)
#define TAIL_MAIN f32_gspc_row__scalar /* the other tiles of a tail case */
#else
#define TAIL_MAIN T_ROW
#endif

/* TP: the packing's tile width; TP > TO: T_ROW runs each group's last tile only (Kpg % TP <= TO lanes) */
static int run_packed(const conv_p *p, size_t TO, size_t TP, size_t owb, ec_act act, int use_res, int before) {
  const size_t Ho = conv_ho(p), Wo = conv_wo(p), Kpg = p->K / p->G, Cpg = p->C / p->G;
  const int tail = TP > TO;
  TO = TP;
#ifdef TEST_OW /* the along-ow kernel: one tile of all Kpg <= 8 channels, T_I = 1, SW phases */
  if (Kpg > 8) return 0;
  TO = Kpg;
  const size_t TI = 1, tiles = 1, PH = p->SW, WP = Wo + (p->KW - 1) * p->DW / p->SW;
#else
  const size_t TI = largest_div(Cpg, TO), tiles = EC_DIV_UP(Kpg, TO), PH = 1;
  const size_t WP = (Wo - 1) * p->SW + (p->KW - 1) * p->DW + 1;
#endif
  const size_t nx = p->N * p->C * p->H * p->W, ny = p->N * p->K * Ho * Wo;
  float *x = falloc(nx), *w = falloc(p->K * Cpg * p->KH * p->KW), *b = falloc(p->K);
  float *r = falloc(ny), *y = falloc(ny), *yr = falloc(ny);
  float *wp = falloc(p->G * tiles * TO * Cpg * p->KH * p->KW);
  pack_w(p, TO, TI, w, wp);
  g_ran++;
  f32_gspc_shape s = {p->N, p->C, p->H, p->W, p->K, Ho, Wo, p->G, p->KH, p->KW, p->SH, p->SW,
                      p->DH, p->DW, p->PT, p->PL, TO, TI, owb,
                      (Ho - 1) * p->SH + (p->KH - 1) * p->DH + 1, WP, PH, tail ? TAIL_MAIN : T_ROW,
                      tail ? T_ROW : NULL};
  float *xp = falloc(f32_gspc_scratch_bytes(&s) / sizeof(float));
  f32_gspc_args a = {x, y, wp, b, use_res ? r : NULL, before, act, xp};
  for (size_t i = 0; i < f32_gspc_pack_items(&s); i++) f32_gspc_pack_item(&s, &a, i);
  for (size_t i = 0; i < f32_gspc_items(&s); i++) f32_gspc_item(&s, &a, i);
  ref_conv(p, x, w, b, use_res ? r : NULL, before, act, yr);
  double e = max_err(y, yr, ny);
  int bad = !(e < 1e-4);
  if (bad)
    printf("FAIL C%zu H%zu W%zu K%zu G%zu k%zux%zu s%zu d%zu TO%zu OWB%zu act%d res%d tail%d: %g\n",
           p->C, p->H, p->W, p->K, p->G, p->KH, p->KW, p->SH, p->DH, TO, owb, (int)act.kind,
           use_res, tail, e);
  free(x), free(w), free(b), free(r), free(y), free(yr), free(wp), free(xp);
  return bad;
}

static int run(const conv_p *p, size_t TO, size_t owb, ec_act act, int use_res, int before) {
  return run_packed(p, TO, TO, owb, act, use_res, before);
}

int main(int argc, char **argv) {
  static const size_t odd[] = {1, 3, 7, 15, 17, 31, 33};
  static const size_t groups[] = {1, 2, 4, 8, 16};
  const size_t TO = TEST_TO ? TEST_TO : 3; /* scalar kernel: an odd tile */
  int fails = 0, cases = 0, quick = argc > 1 && !strcmp(argv[1], "quick");
  for (size_t gi = 0; gi < 5; gi++) {
    for (size_t i = 0; i < 7; i += quick ? 2 : 1) {
      const size_t G = groups[gi];
      /* Kpg below/at/above the tile, odd widths, strides, dilation, asymmetric pads */
      const size_t kpg = (i % 3 == 0) ? TO : (i % 3 == 1 ? TO + 1 : (TO > 1 ? TO - 1 : 2));
      conv_p p = {1 + i % 2, G * (1 + i % 3), odd[i] % 9 + 3, odd[i] + 2, G * kpg, G, 3, 3,
                  1 + i % 2, 1 + (i / 2) % 2, 1 + (i == 3), 1 + (i == 5), 1, i % 2, 1, 1 - i % 2};
      const size_t wo = conv_wo(&p);
      fails += run(&p, TO, largest_div(wo, 7), k_acts[(i + gi) % N_ACTS], i % 2, (int)gi % 2);
      fails += run(&p, TO, 5, k_acts[(i + gi + 3) % N_ACTS], (i + 1) % 2, 1);
      cases += 2;
    }
  }
  conv_p dw = {1, 16, 9, 17, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}; /* g = C */
  fails += run(&dw, TO, 17, k_acts[1], 1, 0), cases++;
  conv_p c1d = {1, 8, 1, 33, 16, 4, 1, 5, 1, 2, 1, 1, 0, 2, 0, 2}; /* Conv1D as H=1 */
  fails += run(&c1d, TO, 4, k_acts[2], 0, 1), cases++;
  conv_p k5 = {1, 32, 7, 7, 32, 2, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2};
  fails += run(&k5, TO, 7, k_acts[6], 1, 1), cases++;
  for (size_t ai = 0; ai < N_ACTS; ai++) {
    conv_p p = {1, 16, 5, 31, 2 * TO + 3, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
    fails += run(&p, TO, 31, k_acts[ai], (int)ai % 2, (int)(ai / 2) % 2), cases++;
  }
#if TEST_TO && !defined(TEST_OW)
  /* as a tail kernel: Kpg = 2 T_O + r, r = 1, T_O - 1, T_O lanes in the last tile; strides 1 and 2, residual */
  for (size_t i = 0; i < 6; i++) {
    const size_t r = i % 3 == 0 ? 1 : (i % 3 == 1 ? (TO > 1 ? TO - 1 : 1) : TO), G = 1 + i % 2;
    conv_p p = {1 + i / 3, G * (5 + i), 9 + i, 11 + 2 * i, G * (2 * TO + r), G, 3, 3, 1 + i % 2, 1 + i % 2,
                1, 1, 1, 1, 1, 1};
    fails += run_packed(&p, TO, 2 * TO, 1 + i % 5, k_acts[(i + 1) % N_ACTS], (int)i % 2, (int)(i / 2) % 2), cases++;
  }
#endif
  printf("%d/%d cases ok (%d run)\n", cases - fails, cases, g_ran);
  if (g_ran < 10) return 1; /* a kernel that runs almost nothing proves nothing */
  return fails != 0;
}
