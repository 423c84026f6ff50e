/* Dense (and per-group dense) convolution as packed GEMM, NCHW fp32.
 * Per group g: Y_g[Kpg][Ho*Wo] = W_g[Kpg][Cpg*KH*KW] x B_g, where B_g is the im2col matrix of
 * the group's input channels, produced directly in packed-panel form one column block at a
 * time (spatial pack), so it never exists whole. 1x1/stride 1/no pad packs by plain copies.
 *
 * Weights (packed offline, codegen/ops/conv.py): [G][ceil(Kpg/MR)][Cpg*KH*KW][MR].
 * Work items: (n, g, column block of NC, M chunk); each packs its block into its thread's
 * scratch slice of f32_conv_gemm_scratch_bytes()/threads bytes.
 * The shape struct is meant to be a static const literal in generated code so that the
 * inlined driver folds every bound and stride. */
#ifndef F32_CONV_H
#define F32_CONV_H

#include "../ec_common.h"
#include "../ec_threadpool.h"
#include "../f32-gemm/f32-gemm.h"

typedef struct {
  size_t N, C, H, W;  /* input */
  size_t K, Ho, Wo;   /* output channels (all groups) and spatial size */
  size_t G;
  size_t KH, KW, SH, SW, DH, DW, PT, PL; /* bottom/right pads are implied by Ho, Wo */
  size_t MR, NR, KC, NC; /* NC: columns per work item, a multiple of NR */
  size_t MSPLIT;         /* M chunks per column block */
  f32_gemm_ukernel_fn uk;
} f32_conv_shape;

typedef struct {
  const float *x;
  float *y;
  const float *w;
  const float *bias;
  const float *res;
  int res_before_act;
  ec_act act;
  float *scratch;
  size_t scratch_floats_per_thread;
} f32_conv_args;

static inline size_t f32_conv_gemm_scratch_bytes(size_t cpg_khkw, size_t nc, size_t nr,
                                                 size_t threads) {
  return threads * cpg_khkw * EC_ROUND_UP(nc, nr) * sizeof(float);
}

EC_INLINE size_t f32_conv_items(const f32_conv_shape *s) {
  return s->N * s->G * EC_DIV_UP(s->Ho * s->Wo, s->NC) * s->MSPLIT;
}

/* im2col of output columns [n0, n0+nc) straight into [nc/NR][Kg][NR] panels. A panel's
 * columns split into runs along one output row; each run reads one input row segment. */
EC_INLINE void f32_conv_pack_b(const f32_conv_shape *s, const float *EC_RESTRICT x, size_t n0,
                               size_t nc, float *EC_RESTRICT dst) {
  const size_t Cpg = s->C / s->G, Kg = Cpg * s->KH * s->KW, HoWo = s->Ho * s->Wo, NR = s->NR;
  const ptrdiff_t SW = (ptrdiff_t)s->SW, W = (ptrdiff_t)s->W;
  if (s->KH == 1 && s->KW == 1 && s->SH == 1 && s->SW == 1 && s->PT == 0 && s->PL == 0 &&
      s->Ho == s->H && s->Wo == s->W) {
    f32_gemm_pack_b(Kg, HoWo, x, s->H * s->W, 1, n0, nc, NR, dst);
    return;
  }
  for (size_t j0 = 0; j0 < nc; j0 += NR) {
    float *dp = dst + j0 * Kg;
    const size_t w = EC_MIN(NR, nc - j0);
    for (size_t j = 0; j < w;) {
      /* run: columns j.. on output row oh starting at column ow */
      const size_t col = n0 + j0 + j, oh = col / s->Wo, ow = col % s->Wo;
      const size_t len = EC_MIN(w - j, s->Wo - ow);
      const ptrdiff_t iw0 = (ptrdiff_t)ow * SW - (ptrdiff_t)s->PL;
      for (size_t c = 0; c < Cpg; c++) {
        const float *xc = x + c * s->H * s->W;
        for (size_t kh = 0; kh < s->KH; kh++) {
          const ptrdiff_t ih = (ptrdiff_t)(oh * s->SH + kh * s->DH) - (ptrdiff_t)s->PT;
          float *d = dp + ((c * s->KH + kh) * s->KW) * NR + j;
          if (ih < 0 || ih >= (ptrdiff_t)s->H) {
            for (size_t kw = 0; kw < s->KW; kw++)
              for (size_t q = 0; q < len; q++) d[kw * NR + q] = 0.0f;
            continue;
          }
          const float *row = xc + ih * W;
          for (size_t kw = 0; kw < s->KW; kw++) {
            const ptrdiff_t b = iw0 + (ptrdiff_t)(kw * s->DW); /* iw of q = b + q*SW */
            ptrdiff_t lo = b >= 0 ? 0 : (-b + SW - 1) / SW;
            ptrdiff_t hi = b >= W ? 0 : (W - b + SW - 1) / SW;
            if (lo > (ptrdiff_t)len) lo = (ptrdiff_t)len;
            if (hi > (ptrdiff_t)len) hi = (ptrdiff_t)len;
            if (hi < lo) hi = lo;
            float *dk = d + kw * NR;
            for (ptrdiff_t q = 0; q < lo; q++) dk[q] = 0.0f;
            for (ptrdiff_t q = lo; q < hi; q++) dk[q] = row[b + q * SW];
            for (ptrdiff_t q = hi; q < (ptrdiff_t)len; q++) dk[q] = 0.0f;
          }
        }
      }
      j += len;
    }
    for (size_t k = 0; k < Kg && w < NR; k++)
      for (size_t q = w; q < NR; q++) dp[k * NR + q] = 0.0f;
  }
}

/* One work item (see f32_conv_items); tid selects the scratch slice. */
EC_INLINE void f32_conv_gemm_item(const f32_conv_shape *s, const f32_conv_args *a, size_t tid,
                                  size_t item) {
  const size_t HoWo = s->Ho * s->Wo, nblocks = EC_DIV_UP(HoWo, s->NC);
  const size_t Cpg = s->C / s->G, Kpg = s->K / s->G, Kg = Cpg * s->KH * s->KW;
  const size_t ms = item % s->MSPLIT;
  size_t t = item / s->MSPLIT;
  const size_t nb = t % nblocks;
  t /= nblocks;
  const size_t g = t % s->G, n = t / s->G;
  const size_t mchunk = EC_ROUND_UP(EC_DIV_UP(Kpg, s->MSPLIT), s->MR);
  const size_t m0 = ms * mchunk, m1 = EC_MIN(Kpg, m0 + mchunk);
  if (m0 >= m1) return;
  const size_t n0 = nb * s->NC, nc = EC_MIN(s->NC, HoWo - n0);
  float *bp = a->scratch + tid * a->scratch_floats_per_thread;
  f32_conv_pack_b(s, a->x + (n * s->C + g * Cpg) * s->H * s->W, n0, nc, bp);
  const size_t yoff = (n * s->K + g * Kpg) * HoWo;
  f32_gemm_epi e;
  e.bias_r = a->bias ? a->bias + g * Kpg : NULL;
  e.bias_c = NULL;
  e.res = a->res ? a->res + yoff : NULL;
  e.res_before_act = a->res_before_act;
  e.act = a->act;
  const float *wg = a->w + g * EC_ROUND_UP(Kpg, s->MR) * Kg;
  f32_gemm_block(s->uk, s->MR, s->NR, s->KC, Kg, m0, m1, wg, bp, n0, nc, a->y + yoff, HoWo, &e);
}

typedef struct {
  const f32_conv_shape *s;
  const f32_conv_args *a;
} f32_conv_job;

static inline void f32_conv_task(void *ctx, size_t tid, size_t begin, size_t end) {
  const f32_conv_job *j = (const f32_conv_job *)ctx;
  for (size_t i = begin; i < end; i++) f32_conv_gemm_item(j->s, j->a, tid, i);
}

/* Serial runs inline with the caller's constant shape; threads share the generic task. */
EC_INLINE void f32_conv_run(const f32_conv_shape *s, const f32_conv_args *a, ec_pool *pool) {
  const size_t n = f32_conv_items(s);
  if (ec_pool_threads(pool) <= 1 || n == 1) {
    for (size_t i = 0; i < n; i++) f32_conv_gemm_item(s, a, 0, i);
    return;
  }
  f32_conv_job j = {s, a};
  ec_parallel_for_tid(pool, n, 1, f32_conv_task, &j);
}

#endif
