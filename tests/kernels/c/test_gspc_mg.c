/* Multi-group GSPC (f32-gspc-mg.h + one row kernel) vs the naive reference.
 * -DT_ROW=<row kernel> -DT_GB=<groups per vector> -DT_KP=<lanes per group>; T_GB=0 (scalar
 * kernel): every GB x KP layout up to 16 lanes. Exit status != 0 on mismatch. */
#include "f32-gspc/f32-gspc-mg.h"
#include "ref.h"

/* ONNX [K][Cpg][KH][KW] -> [blocks][Cpg][KH][KW][KP][GB] */
static void pack_w(const conv_p *p, size_t GB, size_t KP, const float *w, float *dst) {
  const size_t Kpg = p->K / p->G, Cpg = p->C / p->G, nblk = EC_DIV_UP(p->G, GB);
  size_t i = 0;
  for (size_t blk = 0; blk < nblk; blk++)
    for (size_t c = 0; c < Cpg; c++)
      for (size_t kh = 0; kh < p->KH; kh++)
        for (size_t kw = 0; kw < p->KW; kw++)
          for (size_t k = 0; k < KP; k++)
            for (size_t gb = 0; gb < GB; gb++, i++) {
              const size_t g = blk * GB + gb;
              dst[i] = (g < p->G && k < Kpg) ? w[(((g * Kpg + k) * Cpg + c) * p->KH + kh) * p->KW + kw] : 0.0f;
            }
}

static int run(const conv_p *p, size_t GB, size_t KP, size_t owb, ec_act act, int use_res, int before,
               int nobias) {
  const size_t Ho = conv_ho(p), Wo = conv_wo(p), Cpg = p->C / p->G, nblk = EC_DIV_UP(p->G, GB);
  const size_t nx = p->N * p->C * p->H * p->W, ny = p->N * p->K * Ho * Wo;
  float *x = falloc(nx), *w = falloc(p->K * Cpg * p->KH * p->KW), *b = falloc(p->K);
  float *r = falloc(ny), *y = falloc(ny), *yr = falloc(ny);
  float *wp = falloc(nblk * GB * KP * Cpg * p->KH * p->KW);
  pack_w(p, GB, KP, w, wp);
  f32_gspc_mg_shape s = {p->N, p->C, p->H, p->W, p->K, Ho, Wo, p->G, p->KH, p->KW, p->SH, p->SW,
                         p->DH, p->DW, p->PT, p->PL, GB, KP, owb,
                         (Ho - 1) * p->SH + (p->KH - 1) * p->DH + 1,
                         (Wo - 1) * p->SW + (p->KW - 1) * p->DW + 1, T_ROW};
  float *xp = falloc(f32_gspc_mg_scratch_bytes(&s) / sizeof(float));
  f32_gspc_args a = {x, y, wp, nobias ? NULL : b, use_res ? r : NULL, before, act, xp};
  for (size_t i = 0; i < f32_gspc_mg_pack_items(&s); i++) f32_gspc_mg_pack_item(&s, &a, i);
  for (size_t i = 0; i < f32_gspc_mg_items(&s); i++) f32_gspc_mg_item(&s, &a, i);
  ref_conv(p, x, w, nobias ? NULL : b, use_res ? r : NULL, before, act, yr);
  double e = max_err(y, yr, ny);
  int bad = !(e < 1e-4);
  if (bad)
    printf("FAIL C%zu H%zu W%zu K%zu G%zu k%zux%zu s%zux%zu d%zu GB%zu KP%zu OWB%zu act%d res%d: %g\n",
           p->C, p->H, p->W, p->K, p->G, p->KH, p->KW, p->SH, p->SW, p->DH, GB, KP, owb, (int)act.kind,
           use_res, e);
  free(x), free(w), free(b), free(r), free(y), free(yr), free(wp), free(xp);
  return bad;
}

int main(int argc, char **argv) {
  static const size_t odd[] = {1, 3, 7, 15, 17, 31, 33};
  static const size_t layouts[][2] = {{T_GB, T_KP}, {2, 8}, {4, 4}, {8, 2}, {2, 4}, {4, 2}, {2, 2}, {3, 5}};
  const size_t nl = T_GB ? 1 : sizeof layouts / sizeof layouts[0];
  int fails = 0, cases = 0, quick = argc > 1 && !strcmp(argv[1], "quick");
  for (size_t li = T_GB ? 0 : 1; li < (T_GB ? 1 : nl); li++) {
    const size_t GB = layouts[li][0], KP = layouts[li][1];
    /* G: below one block, a whole number of blocks, a tail block; Kpg: KP and below it */
    const size_t groups[] = {1, GB, 2 * GB + 1, 3 * GB};
    for (size_t gi = 0; gi < 4; gi++)
      for (size_t i = 0; i < 7; i += quick ? 2 : 1) {
        const size_t G = groups[gi], kpg = (i % 2 == 0) ? KP : (KP > 1 ? KP - 1 - (i % 3 == 1 && KP > 2) : 1);
        const size_t cpg = 1 + (i + gi) % 4;
        conv_p p = {1 + i % 2, G * cpg, odd[i] % 9 + 3, odd[i] + 2, G * kpg, G, 3, 3,
                    1 + i % 2, 1 + (i / 2) % 2, 1 + (i == 3), 1 + (i == 5), 1, i % 2, 1, 1 - i % 2};
        fails += run(&p, GB, KP, 1 + (i * 5) % 13, k_acts[(i + gi) % N_ACTS], i % 2, (int)gi % 2, i == 4);
        fails += run(&p, GB, KP, 28, k_acts[(i + gi + 3) % N_ACTS], (i + 1) % 2, 1, 0);
        cases += 2;
      }
    conv_p k5 = {1, 4 * GB, 7, 11, 4 * (KP - 1 ? KP - 1 : 1), 4, 5, 5, 1, 2, 1, 1, 2, 2, 2, 2};
    fails += run(&k5, GB, KP, 3, k_acts[6], 1, 1, 0), cases++;
    conv_p c1d = {1, 2 * GB, 1, 33, 2 * GB * KP, 2 * GB, 1, 5, 1, 2, 1, 1, 0, 2, 0, 2}; /* Conv1D as H=1 */
    fails += run(&c1d, GB, KP, 4, k_acts[2], 0, 1, 0), cases++;
    for (size_t ai = 0; ai < N_ACTS; ai++) {
      conv_p p = {1, 2 * GB, 5, 31, 2 * GB * KP, 2 * GB, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1};
      fails += run(&p, GB, KP, 7, k_acts[ai], (int)ai % 2, (int)(ai / 2) % 2, 0), cases++;
    }
  }
  printf("%d/%d cases ok\n", cases - fails, cases);
  return fails != 0;
}
