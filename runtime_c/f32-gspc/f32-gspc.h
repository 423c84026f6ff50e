/* Grouped Spatial Pack Convolution (GSPC), NCHW fp32. Per group j (Kpg = K/G, Cpg = C/G):
 *   weights, packed offline: [G][ceil(Kpg/T_O)][Cpg/T_I][KH][KW][T_I][T_O] (T_O tail zero-padded)
 *   input, padded + packed at run time (f32_gspc_pack_item): [N][G][Cpg/T_I][Hp][T_I][Wp]
 *   compute: one output row (n, j, oc tile, oh) per work item; the ISA row kernel keeps an
 *   ow register block of T_O-wide accumulators, so each input value feeds T_O outputs.
 * The tiled output is never materialised: row kernels transpose their block into NCHW while
 * applying the epilogue (bias, activation, residual). */
#ifndef F32_GSPC_H
#define F32_GSPC_H

#include "../ec_common.h"
#include "../ec_threadpool.h"

#include <string.h>

typedef struct f32_gspc_shape f32_gspc_shape;

typedef struct {
  const float *xp;   /* packed input of (n, group) */
  const float *w;    /* packed weights of (group, oc tile) */
  float *y;          /* output at (n, first channel of the tile, oh, 0) */
  const float *bias; /* at the tile's first channel, or NULL */
  const float *res;  /* like y, or NULL */
  size_t oh, nvalid; /* output row; valid channels of the tile (< T_O at a padded tail) */
  int res_before_act;
  ec_act act;
} f32_gspc_row_args;

typedef void (*f32_gspc_row_fn)(const f32_gspc_shape *s, const f32_gspc_row_args *a);

struct f32_gspc_shape {
  size_t N, C, H, W, K, Ho, Wo, G;
  size_t KH, KW, SH, SW, DH, DW, PT, PL;
  size_t T_O, T_I, OWB; /* OWB: ow register block, <= the row kernel's maximum */
  size_t Hp, Wp;        /* padded input extent actually read (per column phase when PH > 1) */
  size_t PH;            /* column phases: 1, or SW for the along-ow kernel (T_I = 1) */
  f32_gspc_row_fn row;
  f32_gspc_row_fn row_tail; /* NULL, or a narrower T_O tile for each group's last tile (Kpg % T_O lanes): it reads
                             * the T_O-wide packing's first lanes */
};

void f32_gspc_row__scalar(const f32_gspc_shape *s, const f32_gspc_row_args *a);
void f32_gspc_row_o16__avx512(const f32_gspc_shape *s, const f32_gspc_row_args *a);
void f32_gspc_row_o8__avx512(const f32_gspc_shape *s, const f32_gspc_row_args *a);
void f32_gspc_row_o8__avx2(const f32_gspc_shape *s, const f32_gspc_row_args *a);
void f32_gspc_row_o4__avx2(const f32_gspc_shape *s, const f32_gspc_row_args *a);
void f32_gspc_row_o4__neon(const f32_gspc_shape *s, const f32_gspc_row_args *a);
/* several vectors per tile (T_O = GV vectors): one input broadcast feeds GV FMAs */
void f32_gspc_row_o32__avx512(const f32_gspc_shape *s, const f32_gspc_row_args *a);
void f32_gspc_row_o48__avx512(const f32_gspc_shape *s, const f32_gspc_row_args *a);
void f32_gspc_row_o16__avx2(const f32_gspc_shape *s, const f32_gspc_row_args *a);
void f32_gspc_row_o8__neon(const f32_gspc_shape *s, const f32_gspc_row_args *a);
/* along ow: T_O = Kpg <= 8, T_I = 1, SW = 1 */
void f32_gspc_row_ow__avx2(const f32_gspc_shape *s, const f32_gspc_row_args *a);
void f32_gspc_row_ow__avx512(const f32_gspc_shape *s, const f32_gspc_row_args *a);
void f32_gspc_row_ow__neon(const f32_gspc_shape *s, const f32_gspc_row_args *a);

typedef struct {
  const float *x;
  float *y;
  const float *w;
  const float *bias;
  const float *res;
  int res_before_act;
  ec_act act;
  float *xp; /* scratch: f32_gspc_scratch_bytes */
} f32_gspc_args;

static inline size_t f32_gspc_scratch_bytes(const f32_gspc_shape *s) {
  return s->N * s->C * s->PH * s->Hp * s->Wp * sizeof(float);
}

EC_INLINE size_t f32_gspc_pack_items(const f32_gspc_shape *s) {
  return s->N * s->G * (s->C / s->G / s->T_I);
}

/* PH > 1 (T_I = 1): one channel as PH column phases [PH][Hp][Wp], phase p holding padded columns
 * p, p+PH, ..., so a strided row is read with unit-stride vectors. */
EC_INLINE void f32_gspc_pack_phases(const f32_gspc_shape *s, const float *src, float *dst) {
  const size_t PH = s->PH, Hp = s->Hp, Wp = s->Wp, H = s->H, W = s->W;
  for (size_t p = 0; p < PH; p++)
    for (size_t ih = 0; ih < Hp; ih++) {
      float *d = dst + (p * Hp + ih) * Wp;
      const ptrdiff_t r = (ptrdiff_t)ih - (ptrdiff_t)s->PT, off = (ptrdiff_t)p - (ptrdiff_t)s->PL;
      for (size_t q = 0; q < Wp; q++) {
        const ptrdiff_t iw = (ptrdiff_t)(q * PH) + off;
        d[q] = (r >= 0 && r < (ptrdiff_t)H && iw >= 0 && iw < (ptrdiff_t)W) ? src[(size_t)r * W + (size_t)iw] : 0.0f;
      }
    }
}

/* Packs one (n, group, input-channel tile): [Hp][T_I][Wp] with zero padding. */
EC_INLINE void f32_gspc_pack_item(const f32_gspc_shape *s, const f32_gspc_args *a, size_t item) {
  const size_t TI = s->T_I, Hp = s->Hp, Wp = s->Wp, H = s->H, W = s->W;
  if (s->PH > 1) {
    f32_gspc_pack_phases(s, a->x + item * H * W, a->xp + item * s->PH * Hp * Wp);
    return;
  }
  float *dst = a->xp + item * Hp * TI * Wp;
  const float *src = a->x + item * TI * H * W; /* items enumerate channels in NCHW order */
  for (size_t ih = 0; ih < Hp; ih++) {
    const ptrdiff_t r = (ptrdiff_t)ih - (ptrdiff_t)s->PT;
    for (size_t ti = 0; ti < TI; ti++) {
      float *d = dst + (ih * TI + ti) * Wp;
      if (r < 0 || r >= (ptrdiff_t)H) {
        for (size_t iw = 0; iw < Wp; iw++) d[iw] = 0.0f;
        continue;
      }
      const float *sr = src + (ti * H + (size_t)r) * W;
      const size_t lo = EC_MIN(s->PL, Wp), hi = EC_MIN(Wp, s->PL + W);
      for (size_t iw = 0; iw < lo; iw++) d[iw] = 0.0f;
      /* memcpy: gcc unrolls a short element loop of a constant width into scalar moves (14 floats: 0.5 cycle a
       * float). Not bounded by a test: gcc then inlines a variable-size copy as `rep movsq` (1.16x the layer) */
      if (hi > lo) memcpy(d + lo, sr + (lo - s->PL), (hi - lo) * sizeof(float));
      for (size_t iw = hi; iw < Wp; iw++) d[iw] = 0.0f;
    }
  }
}

EC_INLINE size_t f32_gspc_items(const f32_gspc_shape *s) {
  return s->N * s->G * EC_DIV_UP(s->K / s->G, s->T_O) * s->Ho;
}

/* One output row: item enumerates (n, g, oc tile, oh) with oh fastest. */
EC_INLINE void f32_gspc_item(const f32_gspc_shape *s, const f32_gspc_args *a, size_t item) {
  const size_t Kpg = s->K / s->G, Cpg = s->C / s->G, tiles = EC_DIV_UP(Kpg, s->T_O);
  const size_t oh = item % s->Ho;
  size_t t = item / s->Ho;
  const size_t oc = t % tiles;
  t /= tiles;
  const size_t g = t % s->G, n = t / s->G;
  const size_t ch = g * Kpg + oc * s->T_O, HoWo = s->Ho * s->Wo;
  const size_t yoff = (n * s->K + ch) * HoWo + oh * s->Wo;
  f32_gspc_row_args r;
  r.xp = a->xp + (n * s->C + g * Cpg) * s->PH * s->Hp * s->Wp;
  r.w = a->w + (g * tiles + oc) * Cpg * s->KH * s->KW * s->T_O;
  r.y = a->y + yoff;
  r.bias = a->bias ? a->bias + ch : NULL;
  r.res = a->res ? a->res + yoff : NULL;
  r.oh = oh;
  r.nvalid = EC_MIN(s->T_O, Kpg - oc * s->T_O);
  r.res_before_act = a->res_before_act;
  r.act = a->act;
  (s->row_tail && oc + 1 == tiles ? s->row_tail : s->row)(s, &r);
}

/* Transposes a block acc[b][o] (o fastest, T_O wide) into NCHW rows with the epilogue. */
EC_INLINE void f32_gspc_store_block(const f32_gspc_shape *s, const f32_gspc_row_args *a,
                                    const float *tile, size_t T_O, size_t ow0, size_t nb,
                                    int epi_done) {
  const size_t HoWo = s->Ho * s->Wo;
  for (size_t o = 0; o < a->nvalid; o++) {
    float *y = a->y + o * HoWo + ow0;
    if (epi_done) {
      for (size_t b = 0; b < nb; b++) y[b] = tile[b * T_O + o];
      continue;
    }
    const float bias = a->bias ? a->bias[o] : 0.0f;
    const float *res = a->res ? a->res + o * HoWo + ow0 : NULL;
    for (size_t b = 0; b < nb; b++)
      y[b] = ec_epi_value(tile[b * T_O + o] + bias, res ? res + b : NULL, a->res_before_act, a->act);
  }
}

typedef struct {
  const f32_gspc_shape *s;
  const f32_gspc_args *a;
} f32_gspc_job;

static inline void f32_gspc_pack_task(void *ctx, size_t begin, size_t end) {
  const f32_gspc_job *j = (const f32_gspc_job *)ctx;
  for (size_t i = begin; i < end; i++) f32_gspc_pack_item(j->s, j->a, i);
}

static inline void f32_gspc_task(void *ctx, size_t begin, size_t end) {
  const f32_gspc_job *j = (const f32_gspc_job *)ctx;
  for (size_t i = begin; i < end; i++) f32_gspc_item(j->s, j->a, i);
}

/* Groups [begin, end) of all images, each packed just before its rows are computed. */
EC_INLINE void f32_gspc_groups(const f32_gspc_shape *s, const f32_gspc_args *a, size_t begin, size_t end) {
  const size_t groups = s->N * s->G, pg = f32_gspc_pack_items(s) / groups, cg = f32_gspc_items(s) / groups;
  for (size_t q = begin; q < end; q++) {
    for (size_t i = q * pg; i < (q + 1) * pg; i++) f32_gspc_pack_item(s, a, i);
    for (size_t i = q * cg; i < (q + 1) * cg; i++) f32_gspc_item(s, a, i);
  }
}

static inline void f32_gspc_groups_task(void *ctx, size_t begin, size_t end) {
  const f32_gspc_job *j = (const f32_gspc_job *)ctx;
  f32_gspc_groups(j->s, j->a, begin, end);
}

/* Pack then compute; serial runs inline with the caller's constant shape. */
EC_INLINE void f32_gspc_run(const f32_gspc_shape *s, const f32_gspc_args *a, ec_pool *pool) {
  const size_t np = f32_gspc_pack_items(s), n = f32_gspc_items(s), t = (size_t)ec_pool_threads(pool);
  if (t <= 1) { /* group by group, each packed just before use */
    f32_gspc_groups(s, a, 0, s->N * s->G);
    return;
  }
  f32_gspc_job j = {s, a};
  if ((s->N * s->G) % t == 0) {
    /* whole groups a thread, as one pass: a thread computes from the input it packed, with no barrier between
     * packing and the rows (groups that do not divide among the threads keep the row split's balance) */
    ec_parallel_for(pool, s->N * s->G, 1, f32_gspc_groups_task, &j);
    return;
  }
  ec_parallel_for(pool, np, 1, f32_gspc_pack_task, &j);
  /* consecutive rows per chunk: rows of neighbouring items share cache lines of the output */
  ec_parallel_for(pool, n, EC_MAX(s->Ho / 2, n / (8 * (size_t)ec_pool_threads(pool))), f32_gspc_task, &j);
}

#endif
