/* Direct convolution for layers with few input channels (stems: 3x3 s2 3->64, 7x7 s2 3->64), fp32.
 * An im2col GEMM has K = C*KH*KW of only 27-147 there, so its packing and its tile stores weigh as much as
 * the FMAs; here the output channels are the vector lanes (a block of OB = 1 or 2 vectors), a row of TW
 * output pixels is held in registers, and every tap is TW broadcast input values times the tap's weight
 * vectors. Nothing is packed at run time.
 *
 * Weights (packed offline, codegen/ops/conv.py): [ceil(Kout/OB)][C][KH][KW][OB], pad lanes zero (Kout = K, or
 * K rounded up to whole blocks of a blocked output: f32_conv_smallc_kout); bias [ceil(Kout/OB)*OB], never NULL
 * (zeros when the model has none). Input NCHW, dilation 1, one group.
 * Output NCHW (CB = 0) or channel-blocked [N][ceil(K/CB)][Ho][Wo][CB] (CB > 0, a multiple of the kernel's
 * vector, f32-nchwc.h); blocked pad channels are written act(0) (+ the residual's pad lanes).
 * Work item = (n, chunk of RC output rows, output-channel block), the block innermost so that the items a
 * thread takes in a row reuse one chunk of input rows from its caches. The *__scalar function is the
 * reference the SIMD variants are tested against (same shapes, any OB and CB). */
#ifndef F32_CONV_SMALLC_H
#define F32_CONV_SMALLC_H

#include "../ec_common.h"
#include "../ec_threadpool.h"

typedef struct f32_conv_smallc_shape f32_conv_smallc_shape;
typedef struct {
  const float *x;
  float *y;
  const float *w;
  const float *bias; /* [ceil(Kout/OB)*OB] */
  const float *res;  /* laid out like y, or NULL */
  int res_before_act;
  ec_act act;
} f32_conv_smallc_args;
typedef void (*f32_conv_smallc_fn)(const f32_conv_smallc_shape *s, const f32_conv_smallc_args *a, size_t item);

struct f32_conv_smallc_shape {
  size_t N, C, H, W, K, Ho, Wo;
  size_t KH, KW, SH, SW, PT, PL;
  size_t OB; /* output channels per weight block: the SIMD kernels take EC_VL or 2*EC_VL */
  size_t RC; /* output rows per work item */
  size_t CB; /* 0: NCHW output; else channels per block of a blocked output */
  f32_conv_smallc_fn fn;
};

#define F32_CONV_SMALLC_MAX_C 4

void f32_conv_smallc__scalar(const f32_conv_smallc_shape *s, const f32_conv_smallc_args *a, size_t item);
void f32_conv_smallc__avx2(const f32_conv_smallc_shape *s, const f32_conv_smallc_args *a, size_t item);
void f32_conv_smallc__avx512(const f32_conv_smallc_shape *s, const f32_conv_smallc_args *a, size_t item);
void f32_conv_smallc__neon(const f32_conv_smallc_shape *s, const f32_conv_smallc_args *a, size_t item);

/* output channels written: K, or whole blocks of CB when blocked (pad channels included) */
EC_INLINE size_t f32_conv_smallc_kout(const f32_conv_smallc_shape *s) {
  return s->CB ? EC_ROUND_UP(s->K, s->CB) : s->K;
}

EC_INLINE size_t f32_conv_smallc_items(const f32_conv_smallc_shape *s) {
  return s->N * EC_DIV_UP(s->Ho, s->RC) * EC_DIV_UP(f32_conv_smallc_kout(s), s->OB);
}

/* item -> (n, first output row, output-channel block) */
EC_INLINE void f32_conv_smallc_item(const f32_conv_smallc_shape *s, size_t item, size_t *n, size_t *oh0,
                                    size_t *ob) {
  const size_t nob = EC_DIV_UP(f32_conv_smallc_kout(s), s->OB), nrc = EC_DIV_UP(s->Ho, s->RC);
  *ob = item % nob;
  *oh0 = item / nob % nrc * s->RC;
  *n = item / (nob * nrc);
}

/* Output pixels [lo, hi) of a row whose whole window lies inside the input columns (no padding read). */
EC_INLINE void f32_conv_smallc_interior(const f32_conv_smallc_shape *s, size_t *lo, size_t *hi) {
  const size_t l = EC_DIV_UP(s->PL, s->SW);
  const size_t reach = (s->KW - 1) > s->W - 1 + s->PL ? 0 : (s->W - 1 + s->PL - (s->KW - 1)) / s->SW + 1;
  *lo = EC_MIN(l, s->Wo);
  *hi = EC_MAX(*lo, EC_MIN(reach, s->Wo));
}

typedef struct {
  const f32_conv_smallc_shape *s;
  const f32_conv_smallc_args *a;
} f32_conv_smallc_job;

static inline void f32_conv_smallc_task(void *ctx, size_t begin, size_t end) {
  const f32_conv_smallc_job *j = (const f32_conv_smallc_job *)ctx;
  for (size_t i = begin; i < end; i++) j->s->fn(j->s, j->a, i);
}

EC_INLINE void f32_conv_smallc_run(const f32_conv_smallc_shape *s, const f32_conv_smallc_args *a, ec_pool *pool) {
  const size_t n = f32_conv_smallc_items(s);
  f32_conv_smallc_job j = {s, a};
  if (ec_pool_threads(pool) <= 1) {
    f32_conv_smallc_task(&j, 0, n);
    return;
  }
  ec_parallel_for(pool, n, 1, f32_conv_smallc_task, &j);
}

#endif
