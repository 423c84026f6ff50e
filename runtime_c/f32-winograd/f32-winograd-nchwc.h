/* Winograd F(m,3) inside a channel-blocked region: NCHWc in and out, channels in the vector lanes throughout.
 *
 * A work item (image n, TT tiles, a range of output blocks) transforms its tiles' input block by block into
 * V[xi][cb][tile][c] (f32_winograd_inc_*: one tile's 6x6 pixel vectors in registers, no packing), runs the
 * alpha^2 GEMMs M[xi] = V[xi] x U[xi] as the dense blocked 1x1 conv over the tiles (V[xi] is an NCHWc map of
 * TT pixels, U[xi] the 1x1's weights [K/c][C][c], M[xi] its output), and transforms M into the output tiles with
 * bias, activation and residual (f32_winograd_outc_*). The NCHW-layout path (f32-winograd.h) packs the input into
 * phase planes, transforms with tiles in the lanes and runs its own GEMM; from a blocked input that packing was
 * a third of the layer's time (64 channels at 56x56, F(4,3)). */
#ifndef F32_WINOGRAD_NCHWC_H
#define F32_WINOGRAD_NCHWC_H

#include "../f32-nchwc/f32-nchwc.h"
#include "f32-winograd.h"

typedef struct {
  size_t N, C, H, W, K, Ho, Wo, PT, PL;
  size_t M, TH, TW; /* tile side, tiles per column and per row */
  size_t TT;        /* tiles per work item */
  size_t KS;        /* output-block ranges per tile chunk (parallelism for few tiles): multiples of gemm.KT */
  size_t CB;        /* channels a block (the vector's lanes) */
  f32_winograd_inc_fn tin;
  f32_winograd_out_fn tout; /* an outc transform */
  f32_nchwc_conv_shape gemm; /* the 1x1 over the tiles: C, K, G, KC, WS, KT, fn; the rest set per item. Dense
                              * (G = 1, WS = C), or grouped where G of the model's groups were merged into one of
                              * whole blocks (codegen/layout.py merge_groups: each block reads its groups' channels) */
  size_t G; /* groups: C and K count one group's channels, whole blocks; an image's groups' blocks follow one
             * another, so group g of image n is "image" n G + g of a dense conv with group g's weights */
} f32_winograd_nchwc_shape;

typedef struct {
  const float *x;
  float *y;
  const float *u;    /* [G][alpha^2][K/CB][gemm.WS][CB]: per xi the 1x1's weights */
  const float *zero; /* K zeros: the GEMMs' bias */
  const float *bias; /* G K floats, or NULL */
  const float *res;
  int res_before_act;
  ec_act act;
  float *tmp; /* EC_MAX_THREADS slices of f32_winograd_nchwc_tmp_floats: V then M */
} f32_winograd_nchwc_args;

/* the xi stride of V or M for n floats: one cache line more, so the alpha^2 streams of a transform do not share
 * an L1 set when n is a multiple of 1 KB */
static inline size_t f32_winograd_nchwc_xs(size_t n) { return n + 16; }

static inline size_t f32_winograd_nchwc_tmp_floats(size_t C, size_t K, size_t M, size_t TT) {
  const size_t a2 = (M + 2) * (M + 2);
  return a2 * (f32_winograd_nchwc_xs(C * TT) + f32_winograd_nchwc_xs(K * TT));
}

static inline size_t f32_winograd_nchwc_items(const f32_winograd_nchwc_shape *s) {
  return s->N * s->G * EC_DIV_UP(s->TH * s->TW, s->TT) * s->KS;
}

static inline void f32_winograd_nchwc_item(const f32_winograd_nchwc_shape *s, const f32_winograd_nchwc_args *a,
                                           size_t item, float *tmp) {
  const size_t CB = s->CB, nbc = s->C / CB, kbn = s->K / CB, a2 = (s->M + 2) * (s->M + 2), T = s->TH * s->TW;
  /* n counts images x groups (the blocks' order), grp is its group */
  const size_t nch = EC_DIV_UP(T, s->TT), ks = item % s->KS, n = item / s->KS / nch, grp = n % s->G;
  const size_t t0 = item / s->KS % nch * s->TT, nt = EC_MIN(s->TT, T - t0);
  /* this item's output blocks: whole groups of the 1x1's KT, split evenly */
  const size_t kq = EC_DIV_UP(kbn, s->gemm.KT), q0 = kq * ks / s->KS, q1 = kq * (ks + 1) / s->KS;
  if (q0 == q1) return;
  const size_t VS = f32_winograd_nchwc_xs(s->C * nt), MS = f32_winograd_nchwc_xs(s->K * nt);
  float *V = tmp, *Mm = tmp + a2 * VS;
  for (size_t cb = 0; cb < nbc; cb++)
    s->tin(a->x + (n * nbc + cb) * s->H * s->W * CB, s->H, s->W, s->PT, s->PL, s->TW, t0, nt, V + cb * nt * CB, VS);
  f32_nchwc_conv_shape g = s->gemm;
  g.N = 1, g.H = g.Ho = 1, g.W = g.Wo = nt, g.YHW = nt, g.PC = nt;
  const ec_act none = {EC_ACT_NONE, 0.0f, 0.0f};
  for (size_t xi = 0; xi < a2; xi++) {
    const float *u = a->u + (grp * a2 + xi) * kbn * s->gemm.WS * CB;
    f32_nchwc_conv_args ga = {V + xi * VS, Mm + xi * MS, u, a->zero, NULL, 0, none, NULL};
    for (size_t q = q0; q < q1; q++) { /* one pixel chunk: item q is output blocks q*KT.. */
      /* after this range of U[xi]'s blocks comes the same range of U[xi + 1]'s: its weights are prefetched */
      ga.wn = q + 1 < q1 || xi + 1 == a2 ? NULL : u + (kbn + q0 * s->gemm.KT) * s->gemm.WS * CB;
      g.fn(&g, &ga, q);
    }
  }
  const size_t HWo = s->Ho * s->Wo, m = s->M;
  for (size_t k = 0; k < nt; k++) {
    const size_t th = (t0 + k) / s->TW, tw = (t0 + k) % s->TW;
    const size_t rows = EC_MIN(m, s->Ho - th * m), cols = EC_MIN(m, s->Wo - tw * m);
    for (size_t kb = q0 * s->gemm.KT; kb < EC_MIN(kbn, q1 * s->gemm.KT); kb++) {
      const size_t o = ((n * kbn + kb) * HWo + th * m * s->Wo + tw * m) * CB;
      s->tout(CB, Mm + (kb * nt + k) * CB, MS, a->y + o, s->Wo, 0, rows, cols,
              a->bias ? a->bias + (grp * kbn + kb) * CB : NULL,
              a->res ? a->res + o : NULL, a->res_before_act, a->act);
    }
  }
}

typedef struct {
  const f32_winograd_nchwc_shape *s;
  const f32_winograd_nchwc_args *a;
  size_t per; /* tmp floats per thread */
} f32_winograd_nchwc_job;

static inline void f32_winograd_nchwc_task(void *ctx, size_t tid, size_t begin, size_t end) {
  const f32_winograd_nchwc_job *j = (const f32_winograd_nchwc_job *)ctx;
  float *tmp = j->a->tmp + tid * j->per;
  for (size_t i = begin; i < end; i++) f32_winograd_nchwc_item(j->s, j->a, i, tmp);
}

static inline void f32_winograd_nchwc_run(const f32_winograd_nchwc_shape *s, const f32_winograd_nchwc_args *a,
                                          ec_pool *pool) {
  f32_winograd_nchwc_job j = {s, a, f32_winograd_nchwc_tmp_floats(s->C, s->K, s->M, s->TT)};
  ec_parallel_for_tid(pool, f32_winograd_nchwc_items(s), 1, f32_winograd_nchwc_task, &j);
}

#endif
