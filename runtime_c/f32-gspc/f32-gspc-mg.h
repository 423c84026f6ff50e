/* GSPC with several groups per vector, for groups of few output channels (Kpg <= VL/2), where a
 * T_O tile of one group would leave most lanes idle. A vector holds GB groups x KP channels
 * (KP = Kpg rounded up to a power of two), lane l = k * GB + gb: group fastest, so the GB
 * input values a lane block needs are GB consecutive floats that one broadcast load (of 64, 128
 * or 256 bits) spreads over the vector, with no shuffle port involved.
 *   weights, packed offline: [ceil(G/GB)][Cpg][KH][KW][KP][GB] (missing groups/channels zero)
 *   input, packed per (n, group block): [Cpg][Hp][Wp][GB], zero padded, groups interleaved
 *   compute: one output row (n, group block, oh) per work item, an ow register block of
 *   accumulators; each weight vector feeds the whole block. Strides only change which packed
 *   pixel is broadcast, so stride 2 costs no deinterleave. */
#ifndef F32_GSPC_MG_H
#define F32_GSPC_MG_H

#include "f32-gspc.h"

#define F32_GSPC_MG_MAXVL 16

typedef struct f32_gspc_mg_shape f32_gspc_mg_shape;

typedef struct {
  const float *xp;   /* packed input of (n, group block) */
  const float *w;    /* packed weights of the block */
  float *y;          /* output at (n, first channel of the block, oh, 0) */
  const float *bias; /* at the block's first channel, or NULL */
  const float *bl;   /* bias in lane order (GB*KP floats; zeros when bias is NULL) */
  const float *res;  /* like y, or NULL */
  size_t oh, nvalid; /* output row; groups present in the block (< GB at the tail) */
  int res_before_act;
  ec_act act;
} f32_gspc_mg_row_args;

typedef void (*f32_gspc_mg_row_fn)(const f32_gspc_mg_shape *s, const f32_gspc_mg_row_args *a);

struct f32_gspc_mg_shape {
  size_t N, C, H, W, K, Ho, Wo, G;
  size_t KH, KW, SH, SW, DH, DW, PT, PL;
  size_t GB, KP, OWB; /* groups per vector, lanes per group (GB*KP = the kernel's VL), ow block */
  size_t Hp, Wp;      /* padded input extent read */
  f32_gspc_mg_row_fn row;
};

void f32_gspc_mg_row__scalar(const f32_gspc_mg_shape *s, const f32_gspc_mg_row_args *a);
void f32_gspc_mg_row_g2x8__avx512(const f32_gspc_mg_shape *s, const f32_gspc_mg_row_args *a);
void f32_gspc_mg_row_g4x4__avx512(const f32_gspc_mg_shape *s, const f32_gspc_mg_row_args *a);
void f32_gspc_mg_row_g8x2__avx512(const f32_gspc_mg_shape *s, const f32_gspc_mg_row_args *a);
void f32_gspc_mg_row_g2x4__avx2(const f32_gspc_mg_shape *s, const f32_gspc_mg_row_args *a);
void f32_gspc_mg_row_g4x2__avx2(const f32_gspc_mg_shape *s, const f32_gspc_mg_row_args *a);
void f32_gspc_mg_row_g2x2__neon(const f32_gspc_mg_shape *s, const f32_gspc_mg_row_args *a);

EC_INLINE size_t f32_gspc_mg_blocks(const f32_gspc_mg_shape *s) { return EC_DIV_UP(s->G, s->GB); }

static inline size_t f32_gspc_mg_scratch_bytes(const f32_gspc_mg_shape *s) {
  return s->N * f32_gspc_mg_blocks(s) * s->GB * (s->C / s->G) * s->Hp * s->Wp * sizeof(float);
}

EC_INLINE size_t f32_gspc_mg_pack_items(const f32_gspc_mg_shape *s) { return s->N * f32_gspc_mg_blocks(s); }

/* d[q*GB + gb] = rows[gb][q] for q < n; GB a compile-time constant so the loop vectorises into
 * loads + interleaving shuffles instead of GB strided scalar stores per value. */
EC_INLINE void f32_gspc_mg_interleave(float *restrict d, const float *const *rows, size_t n, const size_t GB) {
  for (size_t q = 0; q < n; q++)
    for (size_t gb = 0; gb < GB; gb++) d[q * GB + gb] = rows[gb][q];
}

/* Packs one (n, group block): [Cpg][Hp][Wp][GB]; padding and groups past G read as zeros. */
EC_INLINE void f32_gspc_mg_pack_item(const f32_gspc_mg_shape *s, const f32_gspc_args *a, size_t item) {
  const size_t GB = s->GB, Hp = s->Hp, Wp = s->Wp, H = s->H, W = s->W, cpg = s->C / s->G;
  const size_t nblk = f32_gspc_mg_blocks(s), blk = item % nblk, n = item / nblk, g0 = blk * GB;
  float *dst = a->xp + item * cpg * Hp * Wp * GB;
  const size_t lo = EC_MIN(s->PL, Wp), hi = EC_MIN(Wp, s->PL + W), full = g0 + GB <= s->G;
  for (size_t c = 0; c < cpg; c++)
    for (size_t ih = 0; ih < Hp; ih++) {
      float *d = dst + (c * Hp + ih) * Wp * GB;
      const ptrdiff_t r = (ptrdiff_t)ih - (ptrdiff_t)s->PT;
      if (r < 0 || r >= (ptrdiff_t)H) {
        for (size_t q = 0; q < Wp * GB; q++) d[q] = 0.0f;
        continue;
      }
      for (size_t q = 0; q < lo * GB; q++) d[q] = 0.0f;
      for (size_t q = hi * GB; q < Wp * GB; q++) d[q] = 0.0f;
      const float *rows[F32_GSPC_MG_MAXVL];
      for (size_t gb = 0; gb < GB; gb++)
        rows[gb] = a->x + ((n * s->C + (g0 + gb) * cpg + c) * H + (size_t)r) * W + (lo - s->PL);
      float *di = d + lo * GB;
      if (!full) { /* tail block: groups past G are zeros */
        for (size_t q = lo; q < hi; q++)
          for (size_t gb = 0; gb < GB; gb++) di[(q - lo) * GB + gb] = g0 + gb < s->G ? rows[gb][q - lo] : 0.0f;
        continue;
      }
      switch (GB) {
      case 2: f32_gspc_mg_interleave(di, rows, hi - lo, 2); break;
      case 4: f32_gspc_mg_interleave(di, rows, hi - lo, 4); break;
      case 8: f32_gspc_mg_interleave(di, rows, hi - lo, 8); break;
      default: f32_gspc_mg_interleave(di, rows, hi - lo, GB); break;
      }
    }
}

EC_INLINE size_t f32_gspc_mg_items(const f32_gspc_mg_shape *s) { return s->N * f32_gspc_mg_blocks(s) * s->Ho; }

/* One output row of one group block: item enumerates (n, block, oh) with oh fastest. */
EC_INLINE void f32_gspc_mg_item(const f32_gspc_mg_shape *s, const f32_gspc_args *a, size_t item) {
  const size_t Kpg = s->K / s->G, cpg = s->C / s->G, nblk = f32_gspc_mg_blocks(s), GB = s->GB;
  const size_t oh = item % s->Ho, t = item / s->Ho, blk = t % nblk, n = t / nblk, g0 = blk * GB;
  const size_t ch = g0 * Kpg, HoWo = s->Ho * s->Wo, yoff = (n * s->K + ch) * HoWo + oh * s->Wo;
  const size_t vl = GB * s->KP, nvalid = EC_MIN(GB, s->G - g0);
  float bl[F32_GSPC_MG_MAXVL] = {0};
  if (a->bias)
    for (size_t gb = 0; gb < nvalid; gb++)
      for (size_t k = 0; k < Kpg; k++) bl[k * GB + gb] = a->bias[ch + gb * Kpg + k];
  f32_gspc_mg_row_args r;
  r.xp = a->xp + t * cpg * s->Hp * s->Wp * GB;
  r.w = a->w + blk * cpg * s->KH * s->KW * vl;
  r.y = a->y + yoff;
  r.bias = a->bias ? a->bias + ch : NULL;
  r.bl = bl;
  r.res = a->res ? a->res + yoff : NULL;
  r.oh = oh;
  r.nvalid = nvalid;
  r.res_before_act = a->res_before_act;
  r.act = a->act;
  s->row(s, &r);
}

/* Lane-ordered block tile[b][l] -> NCHW rows of the block's channels, with the epilogue unless
 * epi_done (bias/activation already applied to the tile in registers). */
EC_INLINE void f32_gspc_mg_store(const f32_gspc_mg_shape *s, const f32_gspc_mg_row_args *a,
                                 const float *tile, size_t vl, size_t ow0, size_t nb, int epi_done) {
  const size_t HoWo = s->Ho * s->Wo, GB = s->GB, Kpg = s->K / s->G;
  for (size_t gb = 0; gb < a->nvalid; gb++)
    for (size_t k = 0; k < Kpg; k++) {
      const size_t l = k * GB + gb, o = gb * Kpg + k;
      float *y = a->y + o * HoWo + ow0;
      if (epi_done) {
        for (size_t b = 0; b < nb; b++) y[b] = tile[b * vl + l];
        continue;
      }
      const float bias = a->bias ? a->bias[o] : 0.0f;
      const float *res = a->res ? a->res + o * HoWo + ow0 : NULL;
      for (size_t b = 0; b < nb; b++)
        y[b] = ec_epi_value(tile[b * vl + l] + bias, res ? res + b : NULL, a->res_before_act, a->act);
    }
}

typedef struct {
  const f32_gspc_mg_shape *s;
  const f32_gspc_args *a;
} f32_gspc_mg_job;

static inline void f32_gspc_mg_pack_task(void *ctx, size_t begin, size_t end) {
  const f32_gspc_mg_job *j = (const f32_gspc_mg_job *)ctx;
  for (size_t i = begin; i < end; i++) f32_gspc_mg_pack_item(j->s, j->a, i);
}

static inline void f32_gspc_mg_task(void *ctx, size_t begin, size_t end) {
  const f32_gspc_mg_job *j = (const f32_gspc_mg_job *)ctx;
  for (size_t i = begin; i < end; i++) f32_gspc_mg_item(j->s, j->a, i);
}

/* Pack then compute; serial runs block by block, each packed just before use. */
EC_INLINE void f32_gspc_mg_run(const f32_gspc_mg_shape *s, const f32_gspc_args *a, ec_pool *pool) {
  const size_t np = f32_gspc_mg_pack_items(s), n = f32_gspc_mg_items(s);
  if (ec_pool_threads(pool) <= 1) {
    for (size_t q = 0; q < np; q++) {
      f32_gspc_mg_pack_item(s, a, q);
      for (size_t i = q * s->Ho; i < (q + 1) * s->Ho; i++) f32_gspc_mg_item(s, a, i);
    }
    return;
  }
  f32_gspc_mg_job j = {s, a};
  ec_parallel_for(pool, np, 1, f32_gspc_mg_pack_task, &j);
  ec_parallel_for(pool, n, EC_MAX(s->Ho / 2, n / (8 * (size_t)ec_pool_threads(pool))), f32_gspc_mg_task, &j);
}

#endif
