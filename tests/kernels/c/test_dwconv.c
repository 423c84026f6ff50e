/* Depthwise conv (f32-dwconv.h + one plane kernel) vs the naive reference.
 * -DT_PLANE=<kernel> -DT_K=<3|5|0 for any>; with -DT_CB=<channel-blocked kernel>
 * -DT_CB_LANES=<lanes> that kernel runs every case too. Exit status != 0 on mismatch. */
#include "f32-dwconv/f32-dwconv.h"
#include "ref.h"

static int run(const conv_p *p, ec_act act, int use_res, int before, size_t wround) {
  const size_t Ho = conv_ho(p), Wo = conv_wo(p);
  const size_t nx = p->N * p->C * p->H * p->W, ny = p->N * p->C * Ho * Wo;
  float *x = falloc(nx), *w = falloc(p->C * p->KH * p->KW), *b = falloc(p->C);
  float *r = falloc(ny), *y = falloc(ny), *yr = falloc(ny);
  f32_dwconv_shape s = {p->N, p->C, p->H, p->W, Ho, Wo, p->KH, p->KW, p->SH, p->SW, p->DH, p->DW,
                        p->PT, p->PL, (Ho - 1) * p->SH + (p->KH - 1) * p->DH + 1,
                        EC_ROUND_UP(Wo, wround) + (p->KW - 1) * p->DW / p->SW,
                        (p->KW - 1) * p->DW / p->SW, T_PLANE};
  float *xp = falloc(f32_dwconv_scratch_bytes(&s) / sizeof(float));
  f32_dwconv_args a = {x, y, w, b, use_res ? r : NULL, before, act, xp};
  f32_dwconv_run(&s, &a, NULL);
  ref_conv(p, x, w, b, use_res ? r : NULL, before, act, yr);
  double e = max_err(y, yr, ny);
#ifdef T_CB /* the channel-blocked kernel on the same case (rows of up to 256 outputs: the emitter's limit) */
  if (Wo <= 256) {
    f32_dwconv_cb_shape cs = {p->N, p->C, p->H, p->W, Ho, Wo, p->KH, p->KW, p->SH, p->SW, p->DH, p->DW,
                              p->PT, p->PL, (Ho - 1) * p->SH + (p->KH - 1) * p->DH + 1,
                              (Wo - 1) * p->SW + (p->KW - 1) * p->DW + 1, T_CB_LANES, T_CB};
    float *xc = falloc(f32_dwconv_cb_scratch_bytes(&cs) / sizeof(float)), *yc = falloc(ny);
    f32_dwconv_args ac = {x, yc, w, b, use_res ? r : NULL, before, act, xc};
    f32_dwconv_cb_run(&cs, &ac, NULL);
    const double ec = max_err(yc, yr, ny);
    if (!(ec <= e)) e = ec;
    free(xc), free(yc);
  }
#endif
  int bad = !(e < 1e-4);
  if (bad)
    printf("FAIL C%zu H%zu W%zu k%zux%zu s%zux%zu d%zu p%zu,%zu act%d res%d: %g\n", p->C, p->H,
           p->W, p->KH, p->KW, p->SH, p->SW, p->DH, p->PT, p->PL, (int)act.kind, use_res, e);
  free(x), free(w), free(b), free(r), free(y), free(yr), free(xp);
  return bad;
}

int main(int argc, char **argv) {
  static const size_t odd[] = {1, 3, 7, 15, 17, 31, 33};
  int fails = 0, cases = 0, quick = argc > 1 && !strcmp(argv[1], "quick");
  const size_t k = T_K ? T_K : 3;
  for (size_t i = 0; i < 7; i++) {
    for (size_t j = 0; j < 7; j += quick ? 3 : 1) {
      const size_t s = 1 + (i + j) % 2, d = (T_K == 0 && j % 3 == 2) ? 2 : 1, sh = j == 1 ? 3 - s : s;
      const size_t pad = (k - 1) * d / 2;
      /* widths 1..33 around the vector length; asymmetric pads on odd i */
      conv_p p = {1 + j % 2, 1 + j % 3, odd[(i + j) % 7] + 2, odd[i], 0, 0, k, k, sh, s, d, d, /* SH != SW too */
                  pad, pad, pad + i % 2, pad + (i + 1) % 2};
      p.K = p.G = p.C;
      if (p.W + p.PL + p.PR < (k - 1) * d + 1) p.PR += (k - 1) * d + 1 - p.W - p.PL - p.PR;
      fails += run(&p, k_acts[(i * 7 + j) % N_ACTS], (i + j) % 2, (int)i % 2, j % 2 ? 16 : 1), cases++;
    }
  }
  { /* wide rows: several vectors per row, interior ones away from the padding */
    const size_t pad = (k - 1) / 2;
    conv_p w2 = {1, 3, 5, 100, 3, 3, k, k, 2, 2, 1, 1, pad, pad, pad, pad};
    fails += run(&w2, k_acts[1], 1, 0, 1), cases++;
    conv_p w1 = {1, 2, 4, 75, 2, 2, k, k, 1, 1, 1, 1, pad, pad, pad + 1, pad};
    fails += run(&w1, k_acts[3], 0, 0, 16), cases++;
  }
  { /* channels past whole vectors (full blocks and a tail), rows of 8, 4 and 1 outputs */
    const size_t pad = (k - 1) / 2;
    conv_p c1 = {1, 19, 9, 13, 19, 19, k, k, 1, 1, 1, 1, pad, pad, pad, pad};
    fails += run(&c1, k_acts[1], 0, 0, 1), cases++;
    conv_p c2 = {2, 37, 10, 27, 37, 37, k, k, 2, 2, 1, 1, pad, pad, pad, pad};
    fails += run(&c2, k_acts[4 % N_ACTS], 1, 1, 16), cases++;
  }
  { /* planes past the L1 row buffer (F32_DWCONV_ROWS): stride 1 in bands of padded rows (SH 1 and 2), and
     * rows too wide for a band packed whole into per-item / per-thread scratch slices (9 planes > 8 slices) */
    const size_t pad = (k - 1) / 2;
    conv_p b1 = {1, 3, 70, 100, 3, 3, k, k, 1, 1, 1, 1, pad, pad, pad, pad + 1};
    fails += run(&b1, k_acts[1], 1, 0, 1), cases++;
    conv_p b2 = {1, 2, 61, 90, 2, 2, k, k, 2, 1, 1, 1, pad, pad, pad, pad};
    fails += run(&b2, k_acts[2 % N_ACTS], 0, 0, 16), cases++;
    conv_p b3 = {1, 9, 5, 1500, 9, 9, k, k, 1, 1, 1, 1, pad, pad, pad, pad};
    fails += run(&b3, k_acts[0], 0, 0, 1), cases++;
    conv_p b4 = {1, 4, 5, 1500, 4, 4, k, k, 1, 1, 1, 1, pad, pad, pad, pad};
    fails += run(&b4, k_acts[3], 1, 1, 16), cases++;
  }
  { /* stride 2 both ways (the x86 kernels' strips of phases split in registers, dw_s2v): left pads 0-2, right pads
     * read or not, output rows of a few lanes to several vectors with a partial last one, planes shorter than two
     * vectors, tall and short planes (rows read whole and masked) */
    static const size_t ws[] = {2, 5, 8, 13, 14, 16, 17, 28, 29, 32, 33, 40, 47, 60, 64, 70};
    for (size_t wi = 0; wi < sizeof ws / sizeof ws[0]; wi++)
      for (size_t pl = 0; pl <= 2 && pl < k; pl++) {
        const size_t pt = (pl + wi) % 3 < k ? (pl + wi) % 3 : 0;
        conv_p p = {1 + wi % 2, 1 + (wi + pl) % 3, 1 + (wi * 7 + pl * 3) % 30, ws[wi], 0, 0, k, k, 2, 2, 1, 1,
                    pt, pl, wi % 2, (pl + wi) % 2 ? pl : 0};
        p.K = p.G = p.C;
        if (p.H + p.PT + p.PB < k) p.PB += k - p.H - p.PT - p.PB;
        if (p.W + p.PL + p.PR < k) p.PR += k - p.W - p.PL - p.PR;
        fails += run(&p, k_acts[(wi + pl) % N_ACTS], (wi + pl) % 3 == 1, (int)wi % 2, 1), cases++;
      }
  }
  if (T_K == 0) { /* generic: non-square windows, Conv1D as H=1 */
    conv_p r = {1, 4, 9, 20, 4, 4, 2, 7, 2, 3, 1, 2, 0, 3, 1, 4};
    fails += run(&r, k_acts[2], 1, 1, 4), cases++;
    conv_p c1d = {1, 6, 1, 37, 6, 6, 1, 5, 1, 1, 1, 1, 0, 2, 0, 2};
    fails += run(&c1d, k_acts[6], 0, 1, 1), cases++;
  }
  printf("%d/%d cases ok\n", cases - fails, cases);
  return fails != 0;
}
