/* Channel-blocked (NCHWc) fp32 kernels. A blocked tensor of logical shape [N][C][H][W] is stored
 * [N][ceil(C/CB)][H][W][CB], CB = the ISA's vector lanes: every pixel's CB channels are one vector,
 * so depthwise taps, pools and elementwise ops run at full width with no per-layer transposes.
 * Channels past C in the last block are padding: every kernel writes them with finite values
 * (zero weights and bias make them act(0)), and no kernel lets them reach a real channel.
 * Work items are independent output blocks; the *__scalar functions are the references the SIMD
 * variants are tested against (same shapes and packing, any CB). */
#ifndef F32_NCHWC_H
#define F32_NCHWC_H

#include <string.h>

#include "../ec_common.h"
#include "../ec_threadpool.h"

/* ---- reorders: item = (n, channel block) ---------------------------------------------------- */
typedef struct {
  size_t N, C, HW, CB;
} f32_nchwc_reorder_shape;
typedef void (*f32_nchwc_reorder_fn)(const f32_nchwc_reorder_shape *s, const float *x, float *y, size_t item);

/* ---- conv: 1x1 stride-1, dense or grouped (weights [ceil(K/CB)][WS][CB]: output block k reads the input
 * channels [lo, hi) of the groups its real lanes belong to, f32_nchwc_1x1_range; its weights for channel c
 * are at [k][c - lo], zero for a lane whose group does not read c: a block straddling a group edge reads
 * both groups), or depthwise (weights [ceil(C/CB)][KH*KW][CB]); bias [ceil(K/CB)*CB]; pad lanes of weights
 * and bias are zero. ------------------------------------------------------------------------------ */
typedef struct f32_nchwc_conv_shape f32_nchwc_conv_shape;
typedef struct {
  const float *x;
  float *y;
  const float *w;
  const float *bias; /* never NULL: zeros when the model has none */
  const float *res;  /* blocked like y, or NULL */
  int res_before_act;
  ec_act act;
  const float *wn; /* dense 1x1: the weights (KT blocks) of the item its caller runs next, prefetched during this one;
                    * NULL: the next block group's, else block 0's (f32_nchwc_conv1x1's own order) */
} f32_nchwc_conv_args;
typedef void (*f32_nchwc_conv_fn)(const f32_nchwc_conv_shape *s, const f32_nchwc_conv_args *a, size_t item);

struct f32_nchwc_conv_shape {
  size_t N, C, H, W, K, Ho, Wo;
  size_t KH, KW, SH, SW, DH, DW, PT, PL;
  size_t CB;
  size_t PC; /* 1x1: pixels per item; depthwise: output rows per item */
  size_t G;  /* 1x1 groups (any: a group need not be whole blocks) */
  size_t KC; /* 1x1: input channels per pass over a block pair's channels (the last pass may be shorter) */
  size_t WS; /* 1x1: weight rows per output block, the widest block's hi - lo */
  size_t IS; /* 1x1: > 1: the input is that of a channel shuffle of IS groups (at most NCHWC_MAX_RUNS), fused */
  size_t KT; /* 1x1: output blocks per item and tile, 1-4; above 2 only dense (G = 1, IS <= 1): the codegen picks 4
              * where the register file holds 4 blocks x 6 pixels of accumulators */
  size_t YHW; /* 1x1: pixels of one block of y and res (Ho*Wo; more for a dense 1x1 writing rows of a larger
               * output, f32_nchwc_im2col_conv) */
  f32_nchwc_conv_fn fn;
};

#define NCHWC_MAX_RUNS 16

/* 1x1: the input channels [lo, hi) output block k reads, the groups of its first and last real lanes */
EC_INLINE void f32_nchwc_1x1_range(const f32_nchwc_conv_shape *s, size_t k, size_t *lo, size_t *hi) {
  const size_t cpg = s->C / s->G, kpg = s->K / s->G, last = EC_MIN(s->K, (k + 1) * s->CB) - 1;
  *lo = k * s->CB / kpg * cpg;
  *hi = (last / kpg + 1) * cpg;
}

/* ---- pools: MaxPool / AveragePool windows, and the global average; item = (n, block, rows) --- */
typedef struct f32_nchwc_pool_shape f32_nchwc_pool_shape;
typedef void (*f32_nchwc_pool_fn)(const f32_nchwc_pool_shape *s, const float *x, float *y, size_t item);
struct f32_nchwc_pool_shape {
  size_t N, C, H, W, Ho, Wo;
  size_t KH, KW, SH, SW, DH, DW, PT, PL, PB, PR;
  size_t CB, RC;  /* RC: output rows per item */
  int max;        /* 1: MaxPool, 0: AveragePool */
  int count_pad;  /* AveragePool count_include_pad */
  f32_nchwc_pool_fn fn;
};

/* ---- SE-style scale: y[n][c][p] = x[n][c][p] * s[n][c] (s blocked [N][ceil(C/CB)][1][1][CB]) -- */
typedef struct {
  size_t N, C, HW, CB;
} f32_nchwc_scale_shape;
typedef void (*f32_nchwc_scale_fn)(const f32_nchwc_scale_shape *s, const float *x, const float *sc, float *y,
                                   size_t item);

/* ---- channel shuffle: y channel c = x channel (c % G) * (C/G) + c / G (Reshape [N,G,C/G,H,W], Transpose
 * [0,2,1,3,4], Reshape back), both blocked; item = (n, output block); pad lanes written 0 ------------------- */
typedef struct {
  size_t N, C, HW, CB, G;
} f32_nchwc_shuffle_shape;
typedef void (*f32_nchwc_shuffle_fn)(const f32_nchwc_shuffle_shape *s, const float *x, float *y, size_t item);

#define F32_NCHWC_DECL(isa)                                                                                      \
  void f32_nchwc_to_blocked__##isa(const f32_nchwc_reorder_shape *s, const float *x, float *y, size_t item);     \
  void f32_nchwc_from_blocked__##isa(const f32_nchwc_reorder_shape *s, const float *x, float *y, size_t item);   \
  void f32_nchwc_conv1x1__##isa(const f32_nchwc_conv_shape *s, const f32_nchwc_conv_args *a, size_t item);      \
  void f32_nchwc_dwconv__##isa(const f32_nchwc_conv_shape *s, const f32_nchwc_conv_args *a, size_t item);       \
  void f32_nchwc_pool__##isa(const f32_nchwc_pool_shape *s, const float *x, float *y, size_t item);             \
  void f32_nchwc_gavgpool__##isa(const f32_nchwc_pool_shape *s, const float *x, float *y, size_t item);         \
  void f32_nchwc_scale__##isa(const f32_nchwc_scale_shape *s, const float *x, const float *sc, float *y, size_t item); \
  void f32_nchwc_shuffle__##isa(const f32_nchwc_shuffle_shape *s, const float *x, float *y, size_t item);

F32_NCHWC_DECL(scalar)
F32_NCHWC_DECL(avx2)
F32_NCHWC_DECL(avx512)
F32_NCHWC_DECL(neon)

/* Blocked im2col of a dense conv, output rows [r0, r1): block (n, t*nbc + cb) of y ((r1 - r0) x Wo pixels, c lanes
 * each) holds, for tap t = kh*KW + kw, input block cb's pixel (oh*SH + kh*DH - PT, ow*SW + kw*DW - PL) at (oh - r0,
 * ow), zero outside the input; a 1x1 conv over its KH*KW*nbc blocks is then the conv's rows (codegen/ops/nchwc.py,
 * strided convs). One unit a block of y, shared among the pool's threads (one thread copying left the other idle
 * for ~1% of ResNet-50 at 2). */
typedef struct {
  const float *x;
  float *y;
  size_t N, nbc, H, W, Ho, Wo, KH, KW, SH, SW, DH, DW, PT, PL, c, r0, r1;
} f32_nchwc_im2col_shape;

/* one pixel's c floats: a constant size for the usual lane counts, so the copy is a few vector moves, not a call */
EC_INLINE void f32_nchwc_copy_px(float *d, const float *s, size_t c) {
  switch (c) {
  case 16: memcpy(d, s, 16 * sizeof(float)); break;
  case 8: memcpy(d, s, 8 * sizeof(float)); break;
  case 4: memcpy(d, s, 4 * sizeof(float)); break;
  default: memcpy(d, s, c * sizeof(float));
  }
}

EC_INLINE void f32_nchwc_im2col_unit(const f32_nchwc_im2col_shape *s, size_t u) {
  const size_t c = s->c, H = s->H, W = s->W, Wo = s->Wo, taps = s->KH * s->KW;
  const size_t cb = u % s->nbc, t = u / s->nbc % taps, n = u / s->nbc / taps, kh = t / s->KW, kw = t % s->KW;
  const float *src = s->x + (n * s->nbc + cb) * H * W * c;
  float *d = s->y + u * (s->r1 - s->r0) * Wo * c;
  for (size_t oh = s->r0; oh < s->r1; oh++, d += Wo * c) {
    const ptrdiff_t ih = (ptrdiff_t)(oh * s->SH + kh * s->DH) - (ptrdiff_t)s->PT;
    if (ih < 0 || ih >= (ptrdiff_t)H) {
      memset(d, 0, Wo * c * sizeof(float));
      continue;
    }
    const float *r = src + (size_t)ih * W * c;
    for (size_t ow = 0; ow < Wo; ow++) {
      const ptrdiff_t iw = (ptrdiff_t)(ow * s->SW + kw * s->DW) - (ptrdiff_t)s->PL;
      if (iw < 0 || iw >= (ptrdiff_t)W)
        memset(d + ow * c, 0, c * sizeof(float));
      else
        f32_nchwc_copy_px(d + ow * c, r + (size_t)iw * c, c);
    }
  }
}

static inline void f32_nchwc_im2col_task(void *ctx, size_t begin, size_t end) {
  for (size_t u = begin; u < end; u++) f32_nchwc_im2col_unit((const f32_nchwc_im2col_shape *)ctx, u);
}

EC_INLINE size_t f32_nchwc_reorder_items(const f32_nchwc_reorder_shape *s) { return s->N * EC_DIV_UP(s->C, s->CB); }
EC_INLINE size_t f32_nchwc_conv1x1_items(const f32_nchwc_conv_shape *s) {
  return s->N * EC_DIV_UP(EC_DIV_UP(s->K, s->CB), s->KT) * EC_DIV_UP(s->Ho * s->Wo, s->PC); /* KT blocks each */
}
EC_INLINE size_t f32_nchwc_dwconv_items(const f32_nchwc_conv_shape *s) {
  return s->N * EC_DIV_UP(s->C, s->CB) * EC_DIV_UP(s->Ho, s->PC);
}
EC_INLINE size_t f32_nchwc_pool_items(const f32_nchwc_pool_shape *s) {
  return s->N * EC_DIV_UP(s->C, s->CB) * EC_DIV_UP(s->Ho, s->RC);
}
EC_INLINE size_t f32_nchwc_scale_items(const f32_nchwc_scale_shape *s) { return s->N * EC_DIV_UP(s->C, s->CB); }
EC_INLINE size_t f32_nchwc_shuffle_items(const f32_nchwc_shuffle_shape *s) { return s->N * EC_DIV_UP(s->C, s->CB); }

/* One job type for every kernel: the run functions below fill the members their kernel uses. */
typedef struct {
  const void *s, *a;
  const float *x, *x2;
  float *y;
  int kind; /* 0 reorder, 1 conv, 2 pool, 3 scale, 4 shuffle */
  void (*fn)(void);
} f32_nchwc_job;

static inline void f32_nchwc_task(void *ctx, size_t begin, size_t end) {
  const f32_nchwc_job *j = (const f32_nchwc_job *)ctx;
  for (size_t i = begin; i < end; i++) {
    switch (j->kind) {
    case 0: ((f32_nchwc_reorder_fn)j->fn)((const f32_nchwc_reorder_shape *)j->s, j->x, j->y, i); break;
    case 1: ((f32_nchwc_conv_fn)j->fn)((const f32_nchwc_conv_shape *)j->s, (const f32_nchwc_conv_args *)j->a, i); break;
    case 2: ((f32_nchwc_pool_fn)j->fn)((const f32_nchwc_pool_shape *)j->s, j->x, j->y, i); break;
    case 3: ((f32_nchwc_scale_fn)j->fn)((const f32_nchwc_scale_shape *)j->s, j->x, j->x2, j->y, i); break;
    default: ((f32_nchwc_shuffle_fn)j->fn)((const f32_nchwc_shuffle_shape *)j->s, j->x, j->y, i); break;
    }
  }
}

/* items claimed ~8 chunks per thread (one claim per item would contend on the counter) */
EC_INLINE void f32_nchwc_for(ec_pool *pool, size_t n, f32_nchwc_job *j) {
  if (ec_pool_threads(pool) <= 1) {
    f32_nchwc_task(j, 0, n);
    return;
  }
  ec_parallel_for(pool, n, EC_MAX(1, n / (8 * (size_t)ec_pool_threads(pool))), f32_nchwc_task, j);
}

EC_INLINE void f32_nchwc_reorder_run(const f32_nchwc_reorder_shape *s, f32_nchwc_reorder_fn fn, const float *x,
                                     float *y, ec_pool *pool) {
  f32_nchwc_job j = {s, NULL, x, NULL, y, 0, (void (*)(void))fn};
  f32_nchwc_for(pool, f32_nchwc_reorder_items(s), &j);
}

EC_INLINE void f32_nchwc_conv_run(const f32_nchwc_conv_shape *s, const f32_nchwc_conv_args *a, size_t items,
                                  ec_pool *pool) {
  f32_nchwc_job j = {s, a, NULL, NULL, NULL, 1, (void (*)(void))s->fn};
  f32_nchwc_for(pool, items, &j);
}

/* A strided dense conv as the blocked im2col (g, all rows) + the dense 1x1 over its KH*KW*nbc blocks (s: that
 * 1x1 for RC output rows of one image: Ho = RC, its PC a share of them; YHW = g's Ho*Wo), RC rows at a time into col
 * (KH*KW*nbc blocks of RC*Wo pixels): a chunk's im2col stays in L2 between its copy and the 1x1. Written whole,
 * 56x56 -> 28x28 at 128 channels (3.6 MB), it went out to L3 and back: 1.35x onnxruntime's time on that layer. */
EC_INLINE void f32_nchwc_im2col_conv(const f32_nchwc_im2col_shape *g, const f32_nchwc_conv_shape *s,
                                     const f32_nchwc_conv_args *a, size_t RC, ec_pool *pool) {
  const size_t c = g->c, kb = EC_DIV_UP(s->K, c), HW = g->Ho * g->Wo;
  for (size_t n = 0; n < g->N; n++)
    for (size_t r0 = 0; r0 < g->Ho; r0 += RC) {
      const size_t r1 = EC_MIN(g->Ho, r0 + RC), off = (n * kb * HW + r0 * g->Wo) * c;
      f32_nchwc_im2col_shape gi = *g;
      gi.x = g->x + n * g->nbc * g->H * g->W * c, gi.N = 1, gi.r0 = r0, gi.r1 = r1;
      ec_parallel_for(pool, g->KH * g->KW * g->nbc, 1, f32_nchwc_im2col_task, &gi);
      f32_nchwc_conv_shape si = *s;
      si.N = 1, si.H = si.Ho = r1 - r0, si.YHW = HW;
      f32_nchwc_conv_args ai = *a;
      ai.x = g->y, ai.y = a->y + off, ai.res = a->res ? a->res + off : NULL;
      f32_nchwc_conv_run(&si, &ai, f32_nchwc_conv1x1_items(&si), pool);
    }
}

EC_INLINE void f32_nchwc_pool_run(const f32_nchwc_pool_shape *s, const float *x, float *y, ec_pool *pool) {
  f32_nchwc_job j = {s, NULL, x, NULL, y, 2, (void (*)(void))s->fn};
  f32_nchwc_for(pool, f32_nchwc_pool_items(s), &j);
}

EC_INLINE void f32_nchwc_scale_run(const f32_nchwc_scale_shape *s, f32_nchwc_scale_fn fn, const float *x,
                                   const float *sc, float *y, ec_pool *pool) {
  f32_nchwc_job j = {s, NULL, x, sc, y, 3, (void (*)(void))fn};
  f32_nchwc_for(pool, f32_nchwc_scale_items(s), &j);
}

EC_INLINE void f32_nchwc_shuffle_run(const f32_nchwc_shuffle_shape *s, f32_nchwc_shuffle_fn fn, const float *x,
                                     float *y, ec_pool *pool) {
  f32_nchwc_job j = {s, NULL, x, NULL, y, 4, (void (*)(void))fn};
  f32_nchwc_for(pool, f32_nchwc_shuffle_items(s), &j);
}

#endif
