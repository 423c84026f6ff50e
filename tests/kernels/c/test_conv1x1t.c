/* 1x1 conv as the transposed GEMM (f32-conv1x1t.h + one microkernel) vs the naive reference, on
 * odd channel counts and maps, every epilogue, K blocks shorter than C, and work items of several
 * output-channel blocks run by alternating thread slices. Build with -DT_UK=.. -DT_MR=.. -DT_NR=.. */
#include "f32-conv/f32-conv1x1t.h"
#include "ref.h"

static int run(size_t N, size_t C, size_t H, size_t W, size_t K, size_t KC, size_t KCH, ec_act act,
               int use_res, int before) {
  const conv_p p = {N, C, H, W, K, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
  const size_t P = H * W, nx = N * C * P, ny = N * K * P;
  float *x = falloc(nx), *w = falloc(K * C), *b = falloc(K), *r = falloc(ny), *y = falloc(ny), *yr = falloc(ny);
  float *wp = falloc(EC_ROUND_UP(K, T_NR) * C);
  f32_gemm_pack_b(C, K, w, 1, C, 0, K, T_NR, wp); /* W^T: element (c, k) = w[k*C + c] */
  const f32_conv1x1t_shape s = {N, C, P, K, T_MR, T_NR, KC, KCH, T_UK};
  const size_t threads = 2, per = f32_conv1x1t_scratch_floats(P, T_MR, T_NR);
  float *scratch = falloc(threads * per), *xt = falloc(f32_conv1x1t_xt_floats(N, C, P, T_MR));
  const f32_conv1x1t_args a = {x, y, wp, b, use_res ? r : NULL, before, act, xt, scratch, per};
  f32_conv1x1t_pack(&s, &a);
  for (size_t i = 0; i < f32_conv1x1t_items(&s); i++) f32_conv1x1t_item(&s, &a, i % threads, i);
  ref_conv(&p, x, w, b, use_res ? r : NULL, before, act, yr);
  const double e = max_err(y, yr, ny);
  const int bad = !(e < 1e-4);
  if (bad)
    printf("FAIL N%zu C%zu %zux%zu K%zu KC%zu KCH%zu act%d res%d: %g\n", N, C, H, W, K, KC, KCH, (int)act.kind,
           use_res, e);
  free(x), free(w), free(b), free(r), free(y), free(yr), free(wp), free(scratch), free(xt);
  return bad;
}

int main(int argc, char **argv) {
  static const size_t odd[] = {1, 3, 7, 15, 17, 31, 33};
  int fails = 0, cases = 0;
  const int quick = argc > 1 && !strcmp(argv[1], "quick");
  for (size_t i = 0; i < 7; i++)
    for (size_t j = 0; j < 7; j += quick ? 3 : 1) {
      const size_t C = odd[j] + 2, K = odd[(i + j) % 7] + T_NR - 1, hw = 1 + (i + j) % 8;
      fails += run(1 + i % 2, C, hw, hw + 1, K, 1 + j * 3, T_NR * (1 + i % 3), k_acts[(i + j) % N_ACTS], (i + j) % 2,
                   (int)i % 2), cases++;
    }
  for (size_t ai = 0; ai < N_ACTS; ai++) /* 7x7 map, K not a multiple of NR, one K block */
    fails += run(1, 24, 7, 7, 2 * T_NR + 5, 64, T_NR, k_acts[ai], (int)ai % 2, (int)ai % 3 == 0), cases++;
  printf("%d/%d cases ok\n", cases - fails, cases);
  return fails != 0;
}
