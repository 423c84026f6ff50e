/* Dense/grouped conv via packed GEMM (f32-conv.h + one microkernel) vs the naive reference;
 * stride-1 cases also through the indirect path when -DT_IUK=<igemm microkernel> is given, and every case
 * again with -DT_UKP=<the microkernel's packing twin> (1x1 panels packed by their first strip): outputs
 * must be bit-identical to the copy-packed run's.
 * Build with -DT_UK=<microkernel> -DT_MR=.. -DT_NR=.. ; exit status != 0 on mismatch. */
#include "f32-conv/f32-conv.h"
#include "ref.h"

static void pack_w(const conv_p *p, const float *w, float *dst) {
  const size_t Kpg = p->K / p->G, Kg = p->C / p->G * p->KH * p->KW, Mp = EC_ROUND_UP(Kpg, T_MR);
  for (size_t g = 0; g < p->G; g++)
    for (size_t m = 0; m < Mp; m++)
      for (size_t k = 0; k < Kg; k++)
        dst[g * Mp * Kg + (m / T_MR) * Kg * T_MR + k * T_MR + m % T_MR] =
            m < Kpg ? w[(g * Kpg + m) * Kg + k] : 0.0f;
}

static int run_mc(const conv_p *p, size_t KC, size_t NC, size_t MSPLIT, size_t MC, ec_act act, int use_res,
                  int before) {
  const size_t Ho = conv_ho(p), Wo = conv_wo(p), Kg = p->C / p->G * p->KH * p->KW;
  const size_t nx = p->N * p->C * p->H * p->W, ny = p->N * p->K * Ho * Wo;
  float *x = falloc(nx), *w = falloc(p->K * Kg), *b = falloc(p->K), *r = falloc(ny);
  float *y = falloc(ny), *yr = falloc(ny);
  float *wp = falloc(p->G * EC_ROUND_UP(p->K / p->G, T_MR) * Kg);
  pack_w(p, w, wp);
  f32_conv_shape s = {p->N, p->C, p->H, p->W, p->K, Ho, Wo, p->G, p->KH, p->KW, p->SH, p->SW,
                      p->DH, p->DW, p->PT, p->PL, T_MR, T_NR, KC, NC, MSPLIT, T_UK, MC, NULL};
  /* one K block and one pass over the rows: the driver keeps a ring of two B panels, and gets only that
   * much scratch here */
  const size_t threads = 2,
               per = Kg * (KC >= Kg && !MC ? EC_MIN(EC_ROUND_UP(NC, T_NR), 2 * T_NR) : EC_ROUND_UP(NC, T_NR));
  float *scratch = falloc(threads * per);
  f32_conv_args a = {x, y, wp, b, use_res ? r : NULL, before, act, scratch, per};
  for (size_t i = 0; i < f32_conv_items(&s); i++) f32_conv_gemm_item(&s, &a, i % threads, i);
  ref_conv(p, x, w, b, use_res ? r : NULL, before, act, yr);
  double e = max_err(y, yr, ny);
  int same = 1;
#ifdef T_UKP
  {
    float *y2 = falloc(ny);
    s.ukp = T_UKP;
    for (size_t i = 0; i < f32_conv_items(&s); i++) f32_conv_gemm_item(&s, &a, i % threads, i);
    memcpy(y2, y, ny * sizeof(float));
    s.ukp = NULL;
    for (size_t i = 0; i < f32_conv_items(&s); i++) f32_conv_gemm_item(&s, &a, i % threads, i);
    same = !memcmp(y, y2, ny * sizeof(float));
    free(y2);
  }
#endif
#ifdef T_IUK
  if (p->SH == 1 && p->SW == 1) { /* same case through the indirect stride-1 path */
    const size_t Hp = Ho + (p->KH - 1) * p->DH, Wp = Wo + (p->KW - 1) * p->DW;
    const size_t direct = p->KH == 1 && p->KW == 1 && p->PT == 0 && p->PL == 0 && Ho == p->H && Wo == p->W;
    f32_conv_s1_shape s1 = {p->N, p->C, p->H, p->W, p->K, Ho, Wo, p->G, p->KH, p->KW, p->DH, p->DW,
                            p->PT, p->PL, Hp, Wp, T_MR, T_NR, KC, NC, MSPLIT, direct, T_IUK};
    const size_t Cpg = p->C / p->G;
    int32_t *koff = (int32_t *)malloc(Kg * sizeof(int32_t)), *kpan = (int32_t *)malloc(Kg * sizeof(int32_t));
    for (size_t k = 0; k < Kg; k++) kpan[k] = (int32_t)(k * T_NR);
    for (size_t c = 0; c < Cpg; c++)
      for (size_t kh = 0; kh < p->KH; kh++)
        for (size_t kw = 0; kw < p->KW; kw++)
          koff[(c * p->KH + kh) * p->KW + kw] = (int32_t)(c * Hp * Wp + kh * p->DH * Wp + kw * p->DW);
    const size_t tper = EC_ROUND_UP(p->K / p->G, T_MR) * EC_ROUND_UP(NC, T_NR) + Kg * T_NR;
    float *xpad = falloc(f32_conv_s1_pad_floats(p->N, p->C, Hp, Wp, T_NR));
    float *tmp = falloc(threads * tper), *y1 = falloc(ny);
    f32_conv_s1_args a1 = {x, y1, wp, koff, kpan, b, use_res ? r : NULL, before, act, xpad, tmp, tper};
    for (size_t i = 0; i < p->N * p->C && !direct; i++) f32_conv_s1_pad_plane(&s1, &a1, i);
    for (size_t i = 0; i < f32_conv_s1_items(&s1); i++) f32_conv_s1_item(&s1, &a1, i % threads, i);
    const double e1 = max_err(y1, yr, ny);
    if (!(e1 <= e)) e = e1;
    free(koff), free(kpan), free(xpad), free(tmp), free(y1);
  }
#endif
  int bad = !(e < 1e-4) || !same;
  if (bad)
    printf("FAIL C%zu H%zu W%zu K%zu G%zu k%zux%zu s%zu d%zu p%zu KC%zu NC%zu MS%zu MC%zu act%d res%d: %g%s\n",
           p->C, p->H, p->W, p->K, p->G, p->KH, p->KW, p->SH, p->DH, p->PT, KC, NC, MSPLIT, MC,
           (int)act.kind, use_res, e, same ? "" : " (packing kernel: different bits)");
  free(x), free(w), free(b), free(r), free(y), free(yr), free(wp), free(scratch);
  return bad;
}

static int run(const conv_p *p, size_t KC, size_t NC, size_t MSPLIT, ec_act act, int use_res, int before) {
  return run_mc(p, KC, NC, MSPLIT, 0, act, use_res, before);
}

int main(int argc, char **argv) {
  static const size_t odd[] = {1, 3, 7, 15, 17, 31, 33};
  int fails = 0, cases = 0;
  int quick = argc > 1 && !strcmp(argv[1], "quick"); /* emulator runs */
  for (size_t i = 0; i < 7; i++) {
    for (size_t j = 0; j < 7; j += quick ? 3 : 1) {
      /* M (out channels) and spatial width odd; 1x1 and 3x3 */
      conv_p p1 = {1, odd[j], 3, odd[i], odd[(i + j) % 7], 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
      fails += run(&p1, 4, T_NR * 2, 1, k_acts[(i + j) % N_ACTS], (i + j) % 2, i % 2), cases++;
      /* rows in passes of MR or 2 MR over the block (MC), one K block or several */
      fails += run_mc(&p1, j % 2 ? 4 : 64, T_NR * 3, 1, (1 + i % 2) * T_MR, k_acts[(i + j) % N_ACTS], (i + j + 1) % 2,
                      j % 2), cases++;
      conv_p p3 = {1, odd[j] % 9 + 1, odd[i] % 11 + 4, odd[(i + 3) % 7] + 4, odd[i] + T_MR - 1, 1, 3, 3, 1 + i % 2, 1 + j % 2, 1 + (i + j) % 2, 1, 1, 0, 2, 1};
      fails += run(&p3, 7, T_NR, 2, k_acts[(i * 3 + j) % N_ACTS], (i + j + 1) % 2, j % 2), cases++;
      fails += run_mc(&p3, 1024, T_NR * 2, 1, T_MR, k_acts[(i * 3 + j) % N_ACTS], (i + j) % 2, i % 2), cases++;
    }
  }
  static const size_t groups[] = {1, 2, 4, 8, 16};
  for (size_t gi = 0; gi < 5; gi++) {
    conv_p p = {2, 16, 5, 9, 32, groups[gi], 3, 3, 1, 2, 1, 1, 1, 1, 1, 1};
    fails += run(&p, 64, T_NR * 3, 3, k_acts[gi], gi % 2, 1), cases++;
  }
  for (size_t ms = 1; ms <= 3; ms++) { /* grouped 1x1 (per-group input rows), row chunks, K blocks */
    conv_p p = {2, 15, 5, 7, 3 * (2 * T_MR + 1), 3, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    fails += run(&p, 2 + ms, T_NR * ms, ms, k_acts[ms], ms % 2, 0), cases++;
  }
  conv_p dw = {1, 16, 6, 6, 16, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}; /* g = C */
  fails += run(&dw, 64, T_NR, 1, k_acts[1], 1, 0), cases++;
  conv_p c1d = {1, 5, 1, 40, 9, 1, 1, 5, 1, 1, 1, 2, 0, 2, 0, 2}; /* Conv1D as H=1, dilation */
  fails += run(&c1d, 3, T_NR * 2, 1, k_acts[2], 0, 1), cases++;
  for (size_t ai = 0; ai < N_ACTS; ai++) {
    conv_p p = {1, 8, 4, 5, T_MR + 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0}; /* asymmetric pads */
    fails += run(&p, 1000, T_NR * 4, 1, k_acts[ai], 1, (int)ai % 2), cases++;
  }
  for (size_t ai = 0; ai < N_ACTS; ai++) { /* a last panel of NR / 2 columns: one whole vector on NV = 2 kernels (its
                                              * full-vector stores), K blocks, residual before / after the activation */
    conv_p p = {1, 9, 1, T_NR / 2 * 3, T_MR + 2, 1, ai % 2 ? 3 : 1, ai % 2 ? 3 : 1, 1, 1, 1, 1, ai % 2, ai % 2, ai % 2,
                ai % 2};
    fails += run(&p, 4, T_NR * 2, 1, k_acts[ai], 1, (int)(ai / 2) % 2), cases++;
    fails += run(&p, 64, T_NR * 2, 1, k_acts[ai], 0, 0), cases++;
    /* last panels of NR / 4 and 3 NR / 4 columns: AVX-512's half-vector tails (one ymm; a zmm and a ymm) */
    for (size_t q = 5; q <= 7; q += 2) {
      conv_p h = {1, 5, 1, T_NR / 4 * q, T_MR + 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
      fails += run(&h, ai % 2 ? 3 : 64, T_NR * 2, 1, k_acts[ai], (int)(ai + q) % 2, (int)(ai / 2) % 2), cases++;
    }
  }
  for (size_t v = 0; v < 4; v++) { /* im2col panels packed ahead: stem-like 7x7 s2 and a dilated 3x3, odd
                                      * sizes, many panels per block, ring (one K block) and K blocks */
    conv_p st = {1 + v % 2, 3, 23 + v, 21, 2 * T_MR + 1 + v, 1, 7, 7, 2, 2, 1, 1, 3, 3, 2, 3};
    fails += run(&st, v < 2 ? 1000 : 50, T_NR * (5 + v), 1 + v % 2, k_acts[v % N_ACTS], (int)v % 2, 1), cases++;
    conv_p dl = {1, 5, 13, 11 + v, 9 + 2 * v, 1, 3, 3, 1 + v % 2, 2, 2, 2, 2, 1, 1, 2};
    fails += run(&dl, v % 2 ? 1000 : 17, T_NR * (3 + v), 1, k_acts[(v + 1) % N_ACTS], 1, (int)v % 2), cases++;
  }
  for (size_t v = 0; v < 3; v++) { /* stride 2 over rows wide enough for the vector im2col (16-input loads), an
                                      * odd width whose last loads end at the row's edge, padding on the left */
    conv_p wide = {1, 3, 9 + v, 69 + v, T_MR + 3, 1, 3, 3, 2, 2, 1, 1, v, v, v, 1};
    fails += run(&wide, 1000, T_NR * 3, 1, k_acts[v % N_ACTS], 0, 1), cases++;
  }
  printf("%d/%d cases ok\n", cases - fails, cases);
  return fails != 0;
}
