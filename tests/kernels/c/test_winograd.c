/* Winograd F(T_M,3) (f32-winograd.h + transforms T_IN/T_OUT + GEMM microkernel T_UK)
 * vs the naive direct convolution, and vs the same driver on the portable transforms T_REF_IN /
 * T_REF_OUT (a SIMD transform must agree with them to rounding). Odd shapes, pads 0/1/2 and
 * asymmetric, groups, N = 2, several tile blocks and K passes, K blocking, every epilogue.
 * With T_INC (SIMD transforms, T_VL lanes) also channel-blocked layers on f32-winograd-nchwc.h (T_INC, T_OUTC
 * and the blocked 1x1 T_1X1): input, residual and output NCHWc, unblocked and held to the direct convolution.
 * Prints the worst errors; exit status != 0 on mismatch. */
#include "f32-winograd/f32-winograd.h"
#ifdef T_INC
#include "f32-winograd/f32-winograd-nchwc.h"
#endif
#include "ref.h"

#define T_A (T_M + 2)

#if T_M == 2
static const double Gm[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};
#elif T_M == 4
static const double Gm[6][3] = {{1. / 4, 0, 0},           {-1. / 6, -1. / 6, -1. / 6}, {-1. / 6, 1. / 6, -1. / 6},
                                {1. / 24, 1. / 12, 1. / 6}, {1. / 24, -1. / 12, 1. / 6}, {0, 0, 1}};
#else
static const double Gm[8][3] = {{1, 0, 0},
                                {-2. / 9, -2. / 9, -2. / 9},
                                {-2. / 9, 2. / 9, -2. / 9},
                                {1. / 90, 1. / 45, 2. / 45},
                                {1. / 90, -1. / 45, 2. / 45},
                                {32. / 45, 16. / 45, 8. / 45},
                                {32. / 45, -16. / 45, 8. / 45},
                                {0, 0, 1}};
#endif

/* ONNX [K][Cpg][3][3] -> U = G g G^T packed [G][A*A][ceil(Kpg/NR)][Cpg][NR] (the GEMMs' B) */
static void pack_u(const conv_p *p, const float *w, float *dst) {
  const size_t Kpg = p->K / p->G, Cpg = p->C / p->G, Mp = EC_ROUND_UP(Kpg, T_NR);
  memset(dst, 0, p->G * T_A * T_A * Mp * Cpg * sizeof(float));
  for (size_t g = 0; g < p->G; g++)
    for (size_t k = 0; k < Kpg; k++)
      for (size_t c = 0; c < Cpg; c++) {
        const float *gk = w + ((g * Kpg + k) * Cpg + c) * 9;
        for (size_t r = 0; r < T_A; r++)
          for (size_t q = 0; q < T_A; q++) {
            double s = 0.0;
            for (size_t i = 0; i < 3; i++)
              for (size_t j = 0; j < 3; j++) s += Gm[r][i] * gk[i * 3 + j] * Gm[q][j];
            dst[(((g * T_A * T_A + r * T_A + q) * Mp + k / T_NR * T_NR) * Cpg + c * T_NR) + k % T_NR] = (float)s;
          }
      }
}

static double g_worst = 0.0, g_worst_simd = 0.0;
static ec_pool *g_pool = NULL; /* "pool": whole layers through f32_winograd_run on 3 threads */
static int g_split_diff = 0;    /* layers whose 3-thread output differs from the 1-thread one */

static void winograd(const conv_p *p, size_t TB, size_t KB, size_t KSPLIT, size_t KC, f32_winograd_in_fn tin,
                     f32_winograd_out_fn tout, const float *x, const float *u, const float *b, const float *r,
                     int before, ec_act act, float *y) {
  const size_t Ho = conv_ho(p), Wo = conv_wo(p), TH = EC_DIV_UP(Ho, T_M), TW = EC_DIV_UP(Wo, T_M);
  const size_t Cpg = p->C / p->G, HP = TH * T_M + 2, Q = TW + 1, threads = 3;
  f32_winograd_shape s = {p->N, p->C, p->H, p->W, p->K, Ho, Wo, p->G, p->PT, p->PL, T_M, TH, TW, HP, Q,
                          TB, KB, KSPLIT, T_MR, T_NR, KC, T_UK, tin, tout, g_pool != NULL, T_NRV, T_NRH};
  float *xp = falloc(f32_winograd_xp_floats(p->N, p->C, T_M, HP, Q));
  float *tmp = falloc((s.PHASE ? f32_winograd_vall_floats(T_M, p->N, p->G, Cpg, TH * TW, T_MR) : 0) +
                      threads * f32_winograd_tmp_floats(T_M, Cpg, KB, TB, T_MR));
  f32_winograd_args a = {x, y, u, b, r, before, act, xp, tmp};
  if (g_pool) { /* 3 threads, then 1: the same bits (the phase-parallel and blocked splits agree) */
    f32_winograd_run(&s, &a, g_pool);
    const size_t ny = p->N * p->K * Ho * Wo;
    float *y1 = falloc(ny);
    memcpy(y1, y, ny * sizeof(float));
    ec_pool_set_threads(g_pool, 1);
    f32_winograd_run(&s, &a, g_pool);
    ec_pool_set_threads(g_pool, 3);
    if (memcmp(y1, y, ny * sizeof(float))) g_split_diff++;
    free(y1);
  } else {
    for (size_t i = 0; i < p->N * p->C; i++) f32_winograd_pack_plane(&s, &a, i);
    for (size_t i = 0; i < f32_winograd_items(&s); i++) f32_winograd_item(&s, &a, i % threads, i);
  }
  free(xp), free(tmp);
}

/* TB in MR tile strips; KB in NR channel panels */
static int run(const conv_p *p, size_t tb_strips, size_t kb_panels, size_t KSPLIT, size_t KC, ec_act act,
               int use_res, int before) {
  const size_t Ho = conv_ho(p), Wo = conv_wo(p), Kpg = p->K / p->G, Cpg = p->C / p->G;
  const size_t nx = p->N * p->C * p->H * p->W, ny = p->N * p->K * Ho * Wo;
  const size_t TB = tb_strips * T_MR, KB = EC_MIN(kb_panels * T_NR, EC_ROUND_UP(Kpg, T_NR));
  float *x = falloc(nx), *w = falloc(p->K * Cpg * 9), *b = falloc(p->K), *r = falloc(ny);
  float *y = falloc(ny), *y0 = falloc(ny), *yr = falloc(ny);
  float *u = falloc(p->G * T_A * T_A * EC_ROUND_UP(Kpg, T_NR) * Cpg);
  pack_u(p, w, u);
  const float *res = use_res ? r : NULL;
  winograd(p, TB, KB, KSPLIT, KC, T_IN, T_OUT, x, u, b, res, before, act, y);
  winograd(p, TB, KB, KSPLIT, KC, T_REF_IN, T_REF_OUT, x, u, b, res, before, act, y0);
  ref_conv(p, x, w, b, res, before, act, yr);
  const double e = max_err(y, yr, ny), e0 = max_err(y0, yr, ny), es = max_err(y, y0, ny);
  if (e > g_worst) g_worst = e;
  if (es > g_worst_simd) g_worst_simd = es;
  /* vs direct: transform rounding grows with m (measured worst here: 7e-6, 7e-5, 1.6e-4) */
  const double tol = T_M == 2 ? 2e-5 : T_M == 4 ? 2e-4 : 5e-4;
  const int bad = !(e < tol) || !(e0 < tol) || !(es < tol);
  if (bad)
    printf("FAIL N%zu C%zu H%zu W%zu K%zu G%zu p%zu,%zu,%zu,%zu TB%zu KB%zu KS%zu KC%zu act%d res%d: "
           "%g (ref transforms %g, vs them %g)\n",
           p->N, p->C, p->H, p->W, p->K, p->G, p->PT, p->PL, p->PB, p->PR, TB, KB, KSPLIT, KC, (int)act.kind,
           use_res, e, e0, es);
  free(x), free(w), free(b), free(r), free(y), free(y0), free(yr), free(u);
  return bad;
}

#ifdef T_INC
/* [N][C][HW] <-> [N][C/vl][HW][vl] (C whole blocks) */
static void to_blocked(const float *x, size_t N, size_t C, size_t HW, float *d) {
  for (size_t n = 0; n < N; n++)
    for (size_t c = 0; c < C; c++)
      for (size_t i = 0; i < HW; i++) d[((n * C + c) / T_VL * HW + i) * T_VL + c % T_VL] = x[(n * C + c) * HW + i];
}
static void from_blocked(const float *x, size_t N, size_t C, size_t HW, float *d) {
  for (size_t n = 0; n < N; n++)
    for (size_t c = 0; c < C; c++)
      for (size_t i = 0; i < HW; i++) d[(n * C + c) * HW + i] = x[((n * C + c) / T_VL * HW + i) * T_VL + c % T_VL];
}

/* the channel-lane driver (f32-winograd-nchwc.h: T_INC transforms, the blocked 1x1 as the GEMMs, kt output blocks a
 * tile, TT tiles and KS output-block ranges an item) against the direct conv; groups of whole blocks */
static int run_nchwc(const conv_p *p, size_t TT, size_t KS, size_t kt, size_t KC, ec_act act, int use_res,
                     int before) {
  const size_t Ho = conv_ho(p), Wo = conv_wo(p), A = T_M + 2, a2 = A * A, G = p->G, C = p->C / G, K = p->K / G;
  const size_t nx = p->N * p->C * p->H * p->W, ny = p->N * p->K * Ho * Wo;
  float *x = falloc(nx), *w = falloc(p->K * C * 9), *b = falloc(p->K), *r = falloc(ny), *zero = falloc(K);
  float *xb = falloc(nx), *rb = falloc(ny), *ybk = falloc(ny), *y = falloc(ny), *yr = falloc(ny);
  float *u = falloc(a2 * p->K * C);
  for (size_t k = 0; k < K; k++) zero[k] = 0.0f;
  for (size_t g = 0; g < G; g++) /* U = G g G^T, [g][xi][K/vl][C][vl] (C, K a group's) */
    for (size_t k = 0; k < K; k++)
      for (size_t c = 0; c < C; c++)
        for (size_t i = 0; i < A; i++)
          for (size_t j = 0; j < A; j++) {
            double acc = 0;
            for (size_t a = 0; a < 3; a++)
              for (size_t bb = 0; bb < 3; bb++)
                acc += Gm[i][a] * w[((g * K + k) * C + c) * 9 + a * 3 + bb] * Gm[j][bb];
            u[((((g * A + i) * A + j) * (K / T_VL) + k / T_VL) * C + c) * T_VL + k % T_VL] = (float)acc;
          }
  to_blocked(x, p->N, p->C, p->H * p->W, xb);
  to_blocked(r, p->N, p->K, Ho * Wo, rb);
  const size_t TH = EC_DIV_UP(Ho, (size_t)T_M), TW = EC_DIV_UP(Wo, (size_t)T_M);
  f32_winograd_nchwc_shape s = {p->N, C, p->H, p->W, K, Ho, Wo, p->PT, p->PL, T_M, TH, TW, TT, KS, T_VL, T_INC,
                                T_OUTC, {1, C, 1, 1, K, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, T_VL, 1, 1, KC, C, 1, kt, 1,
                                         T_1X1}, G};
  float *tmp = falloc(EC_MAX_THREADS * f32_winograd_nchwc_tmp_floats(C, K, T_M, TT));
  f32_winograd_nchwc_args a = {xb, ybk, u, zero, b, use_res ? rb : NULL, before, act, tmp};
  f32_winograd_nchwc_run(&s, &a, g_pool);
  from_blocked(ybk, p->N, p->K, Ho * Wo, y);
  ref_conv(p, x, w, b, use_res ? r : NULL, before, act, yr);
  const double e = max_err(y, yr, ny);
  if (e > g_worst) g_worst = e;
  const double tol = T_M == 2 ? 2e-5 : T_M == 4 ? 2e-4 : 5e-4;
  const int bad = !(e < tol);
  if (bad)
    printf("FAIL nchwc N%zu C%zu H%zu W%zu K%zu G%zu p%zu,%zu,%zu,%zu TT%zu KS%zu kt%zu KC%zu act%d res%d: %g\n",
           p->N, p->C, p->H, p->W, p->K, G, p->PT, p->PL, p->PB, p->PR, TT, KS, kt, KC, (int)act.kind, use_res, e);
  free(x), free(w), free(b), free(r), free(zero), free(xb), free(rb), free(ybk), free(y), free(yr), free(u);
  free(tmp);
  return bad;
}
#endif

static conv_p cp(size_t N, size_t C, size_t H, size_t W, size_t K, size_t G, size_t pt, size_t pl, size_t pb,
                 size_t pr) {
  conv_p p = {N, C, H, W, K, G, 3, 3, 1, 1, 1, 1, pt, pl, pb, pr};
  return p;
}

int main(int argc, char **argv) {
  static const size_t odd[] = {1, 3, 7, 15, 17, 31, 33};
  int fails = 0, cases = 0;
  const int quick = argc > 1 && strcmp(argv[1], "full"); /* emulator / sanitizer runs */
  static ec_pool pool;
  if (argc > 1 && !strcmp(argv[1], "pool")) {
    if (ec_pool_init(&pool, 3)) return 2;
    g_pool = &pool;
  }
  for (size_t i = 0; i < 7; i++)
    for (size_t j = 0; j < 7; j += quick ? 3 : 1) {
      /* C, K and the map odd (below / at / above vector, tile and panel sizes); pads 1 and 0 */
      const size_t c = odd[j], k = odd[(i + j) % 7], h = odd[i] % 13 + 3, w = odd[(i + 2) % 7] + 2;
      conv_p p1 = cp(1, c, h, w, k, 1, 1, 1, 1, 1);
      fails += run(&p1, 1 + i % 2, 1 + j % 3, 1, 64, k_acts[(i + j) % N_ACTS], (i + j) % 2, i % 2), cases++;
      conv_p p0 = cp(1 + i % 2, c, w, h, k, 1, 0, 0, 0, 0);
      fails += run(&p0, 1, 2, 1 + j % 2, 5, k_acts[(i * 3 + j) % N_ACTS], (i + j + 1) % 2, j % 2), cases++;
    }
  static const size_t groups[] = {2, 4, 8};
  for (size_t gi = 0; gi < 3; gi++) { /* grouped, several tile blocks, K split, K blocks */
    conv_p p = cp(2, 48, 13, 11, 40, groups[gi], 1, 1, 1, 1);
    fails += run(&p, 1, 1, 2, 4, k_acts[gi], gi % 2, 1), cases++;
    fails += run(&p, 3, 2, 1, 64, k_acts[gi + 3], (gi + 1) % 2, 0), cases++;
  }
  /* many narrow groups: odd channels a group in and out (a tail panel's whole-NR GEMM tile past Kpg, or its
   * columns only where they fit one vector: T_NRV, or whole half vectors: T_NRH), up to
   * 32 groups, 12 a group like 192ch at g=16; K passes, K split and K blocks within a group */
  static const size_t gw[][5] = {{16, 3, 5, 9, 10}, {32, 3, 5, 7, 7}, {8, 13, 17, 12, 12}, {16, 12, 12, 10, 10},
                                 {32, 1, 7, 6, 9}, {4, 7, 33, 11, 8}};
  for (size_t i = 0; i < sizeof gw / sizeof gw[0]; i++) {
    conv_p p = cp(1 + i % 2, gw[i][0] * gw[i][1], gw[i][3], gw[i][4], gw[i][0] * gw[i][2], gw[i][0], 1, 1, 1, 1);
    fails += run(&p, 1 + i % 3, 1, 1 + i % 2, i % 2 ? 5 : 64, k_acts[i % N_ACTS], (int)i % 2, 0), cases++;
    fails += run(&p, 2, 2, 1, 64, k_acts[(i + 1) % N_ACTS], 0, 1), cases++;
  }
  /* asymmetric and wider pads (the phase planes' zero rows/columns), tiles cut at both edges */
  conv_p pa = cp(1, 9, 10, 12, 11, 1, 1, 0, 0, 1), pb = cp(1, 6, 5, 9, 7, 1, 2, 2, 2, 2);
  conv_p pc = cp(1, 5, 3, 3, 3, 1, 0, 1, 2, 0);
  fails += run(&pa, 1, 1, 1, 64, k_acts[1], 1, 0), cases++;
  fails += run(&pb, 2, 1, 3, 2, k_acts[2], 0, 0), cases++;
  fails += run(&pc, 1, 1, 1, 64, k_acts[3], 1, 1), cases++;
  /* a map one tile wide: a block of 12 strips is one run a tile, more than the input transform's batch of runs */
  conv_p pn = cp(1, 3, 400, 2, 5, 1, 1, 1, 1, 1);
  fails += run(&pn, 12, 1, 1, 64, k_acts[0], 0, 0), cases++;
  for (size_t ai = 0; ai < N_ACTS; ai++) { /* every activation, residual before and after it */
    conv_p p = cp(1, 16, 14, 14, T_NR + 1, 1, 1, 1, 1, 1); /* channels past a panel, a partial vector */
    fails += run(&p, 1, 1, 1, 64, k_acts[ai], 1, (int)ai % 2), cases++;
    fails += run(&p, 2, 1, 1, 64, k_acts[ai], 0, 0), cases++;
  }
#ifdef T_INC
  for (size_t i = 0; i < 7; i++) { /* channel-blocked: 1-3 blocks in and out, odd maps, pads 1 / 0 / asymmetric */
    const size_t c = T_VL * (1 + i % 3), k = T_VL * (1 + (i + 1) % 3), h = odd[i] % 13 + 3, w = odd[(i + 3) % 7] + 2;
    conv_p p1 = cp(1 + i % 2, c, h, w, k, 1, 1, 1, 1, 1), p0 = cp(1, c, w, h, k, 1, 0, 0, 0, 0);
    conv_p pa = cp(1, c, h, w, k, 1, i % 3, 1, 0, 2);
    /* the channel-lane driver: one item or several tiles an item (a partial last one), output-block ranges, tiles
     * of 2 and of 4 blocks, one pass over the channels or several */
    const size_t T1 = EC_DIV_UP(conv_ho(&p1), (size_t)T_M) * EC_DIV_UP(conv_wo(&p1), (size_t)T_M);
    fails += run_nchwc(&p1, T1, 1, 2 + 2 * (i % 2), c, k_acts[i % N_ACTS], (int)i % 2, (int)(i / 2) % 2), cases++;
    fails += run_nchwc(&p0, 1 + i % 4, 1 + i % 3, 4, T_VL, k_acts[(i + 2) % N_ACTS], (int)(i + 1) % 2, 1), cases++;
    fails += run_nchwc(&pa, 2 + i, 2, 2, c, k_acts[(i + 4) % N_ACTS], 1, (int)i % 2), cases++;
  }
  for (size_t i = 0; i < 4; i++) { /* groups of whole blocks: 2-4 groups of 1-2 blocks in and out, 1-2 images */
    static const size_t gs[] = {2, 3, 4, 2};
    const size_t G = gs[i], cg = T_VL * (1 + i % 2), c = G * cg, k = G * T_VL * (1 + (i + 1) % 2);
    conv_p p = cp(1 + i % 2, c, odd[i + 2] % 13 + 3, odd[i + 1] + 2, k, G, 1, 1, 1, 1);
    fails += run_nchwc(&p, 1 + i, 1 + i % 2, 2, cg, k_acts[i % N_ACTS], (int)i % 2, 1), cases++;
  }
#endif
  if (!quick) { /* a layer of real size */
    conv_p p = cp(1, 64, 28, 28, 64, 1, 1, 1, 1, 1);
    fails += run(&p, 2, 4, 1, 64, k_acts[1], 0, 0), cases++;
  }
  printf("F(%d,3): max err vs direct %.3g, vs portable transforms %.3g\n", T_M, g_worst, g_worst_simd);
  if (g_split_diff) printf("FAIL %d layers differ between 3 threads and 1\n", g_split_diff), fails += g_split_diff;
  printf("%d/%d cases ok\n", cases - fails, cases);
  if (g_pool) ec_pool_destroy(g_pool);
  return fails != 0;
}
