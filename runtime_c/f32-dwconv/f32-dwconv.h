/* Depthwise convolution (groups == C == K), NCHW fp32.
 * A plane kernel (f32-dwconv-<KHxKW|kxk>-<isa>.c) runs one (n, c) plane with the fused epilogue.
 * It packs the plane, padded, into SW column phases: phase p holds padded columns p, p+SW,
 * p+2*SW, ... so every tap of every stride reads unit-stride vectors:
 *   out[oh][ow] += w[kh][kw] * P[(kw*DW) % SW][oh*SH + kh*DH][ow + (kw*DW) / SW]
 * Packed plane: [SW][Hp][Wq], Hp = (Ho-1)*SH + (KH-1)*DH + 1, Wq >= Wo + WOFF where
 * WOFF = ((KW-1)*DW)/SW; a Wq rounded up lets row tails use full-width loads.
 * The SIMD kernels split stride-2 rows into the phases in registers instead (ec_vuzp). */
#ifndef F32_DWCONV_H
#define F32_DWCONV_H

#include "../ec_common.h"
#include "../ec_threadpool.h"
#include <string.h>

typedef struct f32_dwconv_shape f32_dwconv_shape;

typedef struct {
  const float *x;   /* raw input plane */
  float *xp;        /* scratch for the packed phases of the plane */
  float *rows;      /* the calling thread's L1 row buffer, F32_DWCONV_ROWS floats (SIMD kernels) */
  int *rows_zeroed; /* set once a kernel has zeroed the padding columns of rows for this layer */
  const float *w;   /* KH*KW taps */
  float bias;
  float *y;         /* output plane */
  const float *res; /* residual plane or NULL */
  int res_before_act;
  ec_act act;
} f32_dwconv_plane_args;

typedef void (*f32_dwconv_plane_fn)(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a);

struct f32_dwconv_shape {
  size_t N, C, H, W, Ho, Wo;
  size_t KH, KW, SH, SW, DH, DW, PT, PL;
  size_t Hp, Wq, WOFF;
  f32_dwconv_plane_fn plane;
};

#define F32_DWCONV_DECL(name) void name(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a)
F32_DWCONV_DECL(f32_dwconv_kxk__scalar);
F32_DWCONV_DECL(f32_dwconv_3x3__avx2);
F32_DWCONV_DECL(f32_dwconv_5x5__avx2);
F32_DWCONV_DECL(f32_dwconv_kxk__avx2);
F32_DWCONV_DECL(f32_dwconv_3x3__avx512);
F32_DWCONV_DECL(f32_dwconv_5x5__avx512);
F32_DWCONV_DECL(f32_dwconv_kxk__avx512);
F32_DWCONV_DECL(f32_dwconv_3x3__neon);
F32_DWCONV_DECL(f32_dwconv_5x5__neon);
F32_DWCONV_DECL(f32_dwconv_kxk__neon);

typedef struct {
  const float *x;
  float *y;
  const float *w; /* [C][KH][KW], the ONNX layout */
  const float *bias;
  const float *res;
  int res_before_act;
  ec_act act;
  float *xp; /* scratch: f32_dwconv_scratch_bytes */
} f32_dwconv_args;

/* Per-thread row buffer: the SIMD kernels split stride-2 input rows into it (f32-dwconv-tmpl.h).
 * It lives across the planes of one layer so its padding columns are zeroed once, not per row. */
#define F32_DWCONV_ROWS 4096 /* = costmodel.DW_ROWS */

/* floats after each packed plane that row-spanning vector loads may touch (zeroed, unused) */
#define F32_DWCONV_SLACK 64

static inline size_t f32_dwconv_plane_floats(const f32_dwconv_shape *s) {
  return s->SW * s->Hp * s->Wq + F32_DWCONV_SLACK;
}

/* One packed plane per thread (a plane per item where there are at most EC_MAX_THREADS items): each thread packs
 * its planes one after another into its own slice, so the copy is still in cache when it is read. */
static inline size_t f32_dwconv_scratch_bytes(const f32_dwconv_shape *s) {
  return EC_MIN(s->N * s->C, (size_t)EC_MAX_THREADS) * f32_dwconv_plane_floats(s) * sizeof(float);
}

EC_INLINE size_t f32_dwconv_items(const f32_dwconv_shape *s) { return s->N * s->C; }

/* The raw plane x, padded, into its SW column phases at xp (the layout above). */
static inline void f32_dwconv_pack_phases(const f32_dwconv_shape *s, const float *x, float *xp) {
  const size_t SW = s->SW, Hp = s->Hp, Wq = s->Wq, H = s->H, W = s->W;
  for (size_t p = 0; p < SW; p++) {
    /* columns q with 0 <= q*SW + p - PL < W, bounds hoisted so the copy loop vectorises */
    const ptrdiff_t off = (ptrdiff_t)p - (ptrdiff_t)s->PL;
    size_t qlo = off >= 0 ? 0 : (size_t)((-off + (ptrdiff_t)SW - 1) / (ptrdiff_t)SW);
    size_t qhi = (ptrdiff_t)W - off <= 0 ? 0 : (size_t)(((ptrdiff_t)W - off + (ptrdiff_t)SW - 1) / (ptrdiff_t)SW);
    qhi = EC_MIN(qhi, Wq);
    qlo = EC_MIN(qlo, qhi);
    for (size_t ih = 0; ih < Hp; ih++) {
      float *d = xp + (p * Hp + ih) * Wq;
      const ptrdiff_t r = (ptrdiff_t)ih - (ptrdiff_t)s->PT;
      if (r < 0 || r >= (ptrdiff_t)H) {
        for (size_t q = 0; q < Wq; q++) d[q] = 0.0f;
        continue;
      }
      const float *sr = x + (size_t)r * W;
      for (size_t q = 0; q < qlo; q++) d[q] = 0.0f;
      for (size_t q = qlo; q < qhi; q++) d[q] = sr[(ptrdiff_t)(q * SW) + off];
      for (size_t q = qhi; q < Wq; q++) d[q] = 0.0f;
    }
  }
}

/* Computes plane `item` (= n*C + c) on thread tid (f32_dwconv_scratch_bytes' slices). */
EC_INLINE void f32_dwconv_item(const f32_dwconv_shape *s, const f32_dwconv_args *a, size_t tid, size_t item,
                                float *rows, int *rows_zeroed) {
  const size_t c = item % s->C, HoWo = s->Ho * s->Wo;
  f32_dwconv_plane_args pa;
  pa.x = a->x + item * s->H * s->W;
  pa.xp = a->xp + (s->N * s->C <= EC_MAX_THREADS ? item : tid) * f32_dwconv_plane_floats(s);
  pa.rows = rows;
  pa.rows_zeroed = rows_zeroed;
  pa.w = a->w + c * s->KH * s->KW;
  pa.bias = a->bias ? a->bias[c] : 0.0f;
  pa.y = a->y + item * HoWo;
  pa.res = a->res ? a->res + item * HoWo : NULL;
  pa.res_before_act = a->res_before_act;
  pa.act = a->act;
  s->plane(s, &pa);
}

typedef struct {
  const f32_dwconv_shape *s;
  const f32_dwconv_args *a;
} f32_dwconv_job;

static inline void f32_dwconv_task(void *ctx, size_t tid, size_t begin, size_t end) {
  const f32_dwconv_job *j = (const f32_dwconv_job *)ctx;
  EC_ALIGNED(64) float rows[F32_DWCONV_ROWS];
  int zeroed = 0;
  for (size_t i = begin; i < end; i++) f32_dwconv_item(j->s, j->a, tid, i, rows, &zeroed);
}

/* Each plane is packed right before it is used (still in L1/L2); serial runs inline with the
 * caller's constant shape. */
EC_INLINE void f32_dwconv_run(const f32_dwconv_shape *s, const f32_dwconv_args *a, ec_pool *pool) {
  const size_t n = f32_dwconv_items(s);
  if (ec_pool_threads(pool) <= 1) {
    EC_ALIGNED(64) float rows[F32_DWCONV_ROWS];
    int zeroed = 0;
    for (size_t i = 0; i < n; i++) f32_dwconv_item(s, a, 0, i, rows, &zeroed);
    return;
  }
  f32_dwconv_job j = {s, a};
  /* planes are small: ~8 chunks per thread, not one claim (a contended cache line) per plane */
  ec_parallel_for_tid(pool, n, EC_MAX(1, n / (8 * (size_t)ec_pool_threads(pool))), f32_dwconv_task, &j);
}

/* ---- channel-blocked variant for small maps ------------------------------------------------
 * VL channels are packed interleaved, [Hp][Wp][VL], so every tap of every output position is one
 * full-width FMA (no row tails, any stride/dilation); rows are transposed back to NCHW with the
 * epilogue. Pays two small transposes per plane, wins where rows are short (per-row overheads
 * dominate the plane kernels). Work item = (n, block of VL channels). */
typedef struct f32_dwconv_cb_shape f32_dwconv_cb_shape;
typedef void (*f32_dwconv_cb_fn)(const f32_dwconv_cb_shape *s, const f32_dwconv_args *a, size_t item);

struct f32_dwconv_cb_shape {
  size_t N, C, H, W, Ho, Wo;
  size_t KH, KW, SH, SW, DH, DW, PT, PL;
  size_t Hp, Wp, CB; /* Hp = (Ho-1)*SH + (KH-1)*DH + 1, Wp likewise; CB = the kernel's lanes */
  f32_dwconv_cb_fn fn;
};

void f32_dwconv_cb__avx2(const f32_dwconv_cb_shape *s, const f32_dwconv_args *a, size_t item);
void f32_dwconv_cb__avx512(const f32_dwconv_cb_shape *s, const f32_dwconv_args *a, size_t item);
void f32_dwconv_cb__neon(const f32_dwconv_cb_shape *s, const f32_dwconv_args *a, size_t item);

static inline size_t f32_dwconv_cb_scratch_bytes(const f32_dwconv_cb_shape *s) {
  return s->N * EC_DIV_UP(s->C, s->CB) * s->Hp * s->Wp * s->CB * sizeof(float);
}

EC_INLINE size_t f32_dwconv_cb_items(const f32_dwconv_cb_shape *s) { return s->N * EC_DIV_UP(s->C, s->CB); }

typedef struct {
  const f32_dwconv_cb_shape *s;
  const f32_dwconv_args *a;
} f32_dwconv_cb_job;

static inline void f32_dwconv_cb_task(void *ctx, size_t begin, size_t end) {
  const f32_dwconv_cb_job *j = (const f32_dwconv_cb_job *)ctx;
  for (size_t i = begin; i < end; i++) j->s->fn(j->s, j->a, i);
}

EC_INLINE void f32_dwconv_cb_run(const f32_dwconv_cb_shape *s, const f32_dwconv_args *a, ec_pool *pool) {
  const size_t n = f32_dwconv_cb_items(s);
  if (ec_pool_threads(pool) <= 1) {
    for (size_t i = 0; i < n; i++) s->fn(s, a, i);
    return;
  }
  f32_dwconv_cb_job j = {s, a};
  ec_parallel_for(pool, n, EC_MAX(1, n / (8 * (size_t)ec_pool_threads(pool))), f32_dwconv_cb_task, &j);
}

#endif
