/* Dense conv as the transposed GEMM (f32-convt.h + one microkernel) vs the naive reference, on odd
 * channel counts and small maps, 1x1 and windows with strides, dilations and asymmetric pads, every
 * epilogue, K blocks shorter than Kg, and work items of several output-channel blocks run by
 * alternating thread slices. Build with -DT_UK=.. -DT_MR=.. -DT_NR=.. */
#include "f32-conv/f32-convt.h"
#include "ref.h"

static int run(const conv_p *p, size_t KC, size_t KCH, ec_act act, int use_res, int before) {
  const size_t Ho = conv_ho(p), Wo = conv_wo(p), P = Ho * Wo, Kg = p->C * p->KH * p->KW;
  const size_t nx = p->N * p->C * p->H * p->W, ny = p->N * p->K * P;
  float *x = falloc(nx), *w = falloc(p->K * Kg), *b = falloc(p->K), *r = falloc(ny), *y = falloc(ny);
  float *yr = falloc(ny), *wp = falloc(EC_ROUND_UP(p->K, T_NR) * Kg);
  f32_gemm_pack_b(Kg, p->K, w, 1, Kg, 0, p->K, T_NR, wp); /* W^T: element (k, o) = w[o*Kg + k] */
  const f32_convt_shape s = {p->N, p->C, p->H, p->W, p->K, Ho, Wo, p->KH, p->KW, p->SH, p->SW, p->DH, p->DW,
                             p->PT, p->PL, T_MR, T_NR, KC, KCH, T_UK};
  const size_t threads = 2, per = f32_convt_scratch_floats(P, T_MR, T_NR);
  float *scratch = falloc(threads * per), *ap = falloc(f32_convt_a_floats(p->N, Kg, P, T_MR));
  const f32_convt_args a = {x, y, wp, b, use_res ? r : NULL, before, act, ap, scratch, per};
  const f32_convt_job j = {&s, &a, 1};
  f32_convt_pack_task((void *)&j, 0, p->N);
  for (size_t i = 0; i < f32_convt_items(&s); i++) f32_convt_item(&s, &a, i % threads, i);
  /* pixel strips in 3 blocks (the threaded split): the same bits */
  float *y3 = falloc(ny);
  f32_convt_args a3 = a;
  a3.y = y3;
  const f32_convt_job j3 = {&s, &a3, 3};
  f32_convt_pack_task((void *)&j3, 0, p->N * 3);
  f32_convt_task((void *)&j3, 1, 0, f32_convt_items(&s) * 3);
  const int split_differs = memcmp(y, y3, ny * sizeof(float)) != 0;
  free(y3);
  ref_conv(p, x, w, b, use_res ? r : NULL, before, act, yr);
  const double e = max_err(y, yr, ny);
  const int bad = !(e < 1e-4) || split_differs;
  if (bad)
    printf("FAIL N%zu C%zu %zux%zu K%zu k%zux%zu s%zu d%zu p%zu KC%zu KCH%zu act%d res%d: %g\n", p->N, p->C, p->H,
           p->W, p->K, p->KH, p->KW, p->SH, p->DH, p->PT, KC, KCH, (int)act.kind, use_res, e);
  free(x), free(w), free(b), free(r), free(y), free(yr), free(wp), free(scratch), free(ap);
  return bad;
}

int main(int argc, char **argv) {
  static const size_t odd[] = {1, 3, 7, 15, 17, 31, 33};
  int fails = 0, cases = 0;
  const int quick = argc > 1 && !strcmp(argv[1], "quick");
  for (size_t i = 0; i < 7; i++)
    for (size_t j = 0; j < 7; j += quick ? 3 : 1) {
      const size_t C = odd[j] + 2, K = odd[(i + j) % 7] + T_NR - 1, hw = 1 + (i + j) % 8;
      const conv_p p1 = {1 + i % 2, C, hw, hw + 1, K, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}; /* 1x1 in place */
      fails += run(&p1, 1 + j * 3, T_NR * (1 + i % 3), k_acts[(i + j) % N_ACTS], (i + j) % 2, (int)i % 2), cases++;
      const size_t k = 1 + 2 * (i % 3), st = 1 + j % 2, dl = 1 + (i + j) % 2;
      const conv_p p3 = {1 + j % 2, odd[i] % 9 + 1, hw + 4, hw + 6, K, 1, k, k, st, st, dl, dl, k / 2, k / 2 + (j % 2),
                         k / 2, (i % 2)}; /* windows, strides, dilations, asymmetric pads */
      fails += run(&p3, 5 + i, T_NR * (1 + j % 2), k_acts[(i * 3 + j) % N_ACTS], (i + j + 1) % 2, (int)j % 2),
          cases++;
    }
  for (size_t ai = 0; ai < N_ACTS; ai++) { /* 7x7 maps, K not a multiple of NR, one K block */
    const conv_p p = {1, 24, 7, 7, 2 * T_NR + 5, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
    fails += run(&p, 1000, T_NR, k_acts[ai], (int)ai % 2, (int)ai % 3 == 0), cases++;
  }
  const conv_p s2 = {1, 12, 14, 14, 20, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}; /* stride 2, 14 -> 7 */
  fails += run(&s2, 32, T_NR * 2, k_acts[1], 1, 0), cases++;
  /* a window past the pack's offset table (KH*KW*MR > F32_CONVT_TAB): the per-element im2col */
  const conv_p big = {2, 2, 17, 16, 9, 1, 15, 15, 1, 1, 1, 1, 7, 7, 6, 7};
  fails += run(&big, 100, T_NR, k_acts[2], 1, 1), cases++;
  printf("%d/%d cases ok\n", cases - fails, cases);
  return fails != 0;
}
