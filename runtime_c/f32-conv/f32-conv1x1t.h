/* 1x1 stride-1 convolution on small maps as the transposed GEMM, NCHW fp32:
 *   Y^T[P][K] = X^T[P][C] x W^T[C][K]   (P = H*W pixels of one image)
 * The NCHW GEMM (f32-conv.h) puts the P pixels on the microkernel's NR columns: on a 7x7 map a
 * 16-wide tile computes 64 columns for 49 pixels (31% wasted FMAs). Transposed, the pixels go on
 * the MR rows (6-row tiles: 54 for 49) and the output channels on the columns, which K fills.
 *
 * Weights (packed offline, codegen/ops/conv.py): W^T as B panels [ceil(K/NR)][C][NR].
 * X^T of every image is packed once ([N][ceil(P/MR)][C][MR], strided copies), then work items
 * (n, block of KCH output channels) run their panels into a per-thread [ceil(P/MR)*MR][NR] tile
 * and write it back as NR output-channel rows with the bias, activation and residual of each row
 * (ec_epi_row). */
#ifndef F32_CONV1X1T_H
#define F32_CONV1X1T_H

#include "../ec_common.h"
#include "../ec_threadpool.h"
#include "../f32-gemm/f32-gemm.h"

typedef struct {
  size_t N, C, P, K;
  size_t MR, NR, KC;
  size_t KCH; /* output channels per work item, a multiple of NR */
  f32_gemm_ukernel_fn uk;
} f32_conv1x1t_shape;

typedef struct {
  const float *x;
  float *y;
  const float *w;
  const float *bias;
  const float *res;
  int res_before_act;
  ec_act act;
  float *xt;      /* packed X^T: f32_conv1x1t_xt_floats */
  float *scratch; /* threads x f32_conv1x1t_scratch_floats: the tile and one gathered row */
  size_t scratch_floats_per_thread;
} f32_conv1x1t_args;

static inline size_t f32_conv1x1t_xt_floats(size_t N, size_t C, size_t P, size_t MR) {
  return N * EC_ROUND_UP(P, MR) * C;
}

static inline size_t f32_conv1x1t_scratch_floats(size_t P, size_t MR, size_t NR) {
  const size_t pp = EC_ROUND_UP(P, MR);
  return pp * NR + pp;
}

EC_INLINE size_t f32_conv1x1t_items(const f32_conv1x1t_shape *s) { return s->N * EC_DIV_UP(s->K, s->KCH); }

EC_INLINE void f32_conv1x1t_item(const f32_conv1x1t_shape *s, const f32_conv1x1t_args *a, size_t tid,
                                 size_t item) {
  const size_t C = s->C, P = s->P, K = s->K, MR = s->MR, NR = s->NR;
  const size_t nkb = EC_DIV_UP(K, s->KCH), n = item / nkb, k0 = (item % nkb) * s->KCH;
  const size_t k1 = EC_MIN(K, k0 + s->KCH), pp = EC_ROUND_UP(P, MR);
  const float *ap = a->xt + n * pp * C;
  float *tile = a->scratch + tid * a->scratch_floats_per_thread, *row = tile + pp * NR;
  for (size_t j0 = k0; j0 < k1; j0 += NR) {
    const size_t nr = EC_MIN(NR, k1 - j0);
    const float *bp = a->w + j0 * C; /* panel j0/NR */
    for (size_t c0 = 0; c0 < C; c0 += s->KC) {
      const size_t kc = EC_MIN(s->KC, C - c0);
      for (size_t i0 = 0; i0 < P; i0 += MR)
        s->uk(EC_MIN(MR, P - i0), NR, kc, ap + i0 * C + c0 * MR, bp + c0 * NR, tile + i0 * NR, NR, c0 != 0,
              NULL);
    }
    for (size_t q = 0; q < nr; q++) {
      const size_t o = (n * K + j0 + q) * P;
      for (size_t p = 0; p < P; p++) row[p] = tile[p * NR + q];
      ec_epi_row(row, a->y + o, P, a->bias ? a->bias[j0 + q] : 0.0f, a->res ? a->res + o : NULL,
                 a->res_before_act, a->act);
    }
  }
}

typedef struct {
  const f32_conv1x1t_shape *s;
  const f32_conv1x1t_args *a;
} f32_conv1x1t_job;

static inline void f32_conv1x1t_task(void *ctx, size_t tid, size_t begin, size_t end) {
  const f32_conv1x1t_job *j = (const f32_conv1x1t_job *)ctx;
  for (size_t i = begin; i < end; i++) f32_conv1x1t_item(j->s, j->a, tid, i);
}

/* X^T of every image, before the items (element (p, c) at x[c*P + p]) */
EC_INLINE void f32_conv1x1t_pack(const f32_conv1x1t_shape *s, const f32_conv1x1t_args *a) {
  for (size_t n = 0; n < s->N; n++)
    f32_gemm_pack_a(s->P, s->C, a->x + n * s->C * s->P, 1, s->P, s->MR, a->xt + n * EC_ROUND_UP(s->P, s->MR) * s->C);
}

EC_INLINE void f32_conv1x1t_run(const f32_conv1x1t_shape *s, const f32_conv1x1t_args *a, ec_pool *pool) {
  const size_t n = f32_conv1x1t_items(s);
  f32_conv1x1t_pack(s, a);
  if (ec_pool_threads(pool) <= 1) {
    for (size_t i = 0; i < n; i++) f32_conv1x1t_item(s, a, 0, i);
    return;
  }
  f32_conv1x1t_job j = {s, a};
  ec_parallel_for_tid(pool, n, 1, f32_conv1x1t_task, &j);
}

#endif
