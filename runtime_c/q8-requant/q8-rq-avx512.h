/* AVX-512 requantization of 16 int32 accumulators of one output channel: q8_rq1 (fixed point, or fp32
 * where rq->scale is set). */
#ifndef Q8_RQ_AVX512_H
#define Q8_RQ_AVX512_H

#include <immintrin.h>

#include "q8-requant.h"

/* One output channel's requantization constants, loaded once for all of its vectors. */
typedef struct {
    __m512i mult, rnd, zp, qmin, qmax;
    __m128i cnt;
    __m512 scale, lo, hi; /* fp32 path: qmin - zp, qmax - zp */
    int fp;
} q8_rq16_row;

static inline q8_rq16_row q8_rq16_row_avx512(const q8_rq *rq, size_t m)
{
    q8_rq16_row c;
    c.zp = _mm512_set1_epi32(rq->zp);
    c.fp = rq->scale != NULL;
    if (c.fp) {
        c.scale = _mm512_set1_ps(rq->scale[m]);
        c.lo = _mm512_set1_ps((float)(rq->qmin - rq->zp));
        c.hi = _mm512_set1_ps((float)(rq->qmax - rq->zp));
        c.mult = c.rnd = c.qmin = c.qmax = _mm512_setzero_si512();
        c.cnt = _mm_setzero_si128();
        return c;
    }
    const int s = rq->shift[m];
    c.scale = c.lo = c.hi = _mm512_setzero_ps();
    c.mult = _mm512_set1_epi32(rq->mult[m]);
    c.rnd = _mm512_set1_epi64((int64_t)1 << (s - 1));
    c.cnt = _mm_cvtsi32_si128(s);
    c.qmin = _mm512_set1_epi32(rq->qmin);
    c.qmax = _mm512_set1_epi32(rq->qmax);
    return c;
}

/* exactly q8_rq1 on 16 lanes. Fixed point: AVX-512 has the arithmetic 64-bit shift; the clamp to
 * [qmin, qmax] within 0..255 happens on int32, so the narrowing truncates. fp32: clamped before the
 * conversion, which then cannot overflow. */
static inline __m128i q8_rq16_apply_avx512(__m512i acc, const q8_rq16_row *c)
{
    if (c->fp) {
        __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), c->scale);
        v = _mm512_min_ps(_mm512_max_ps(v, c->lo), c->hi);
        const __m512i q = _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        return _mm512_cvtepi32_epi8(_mm512_add_epi32(q, c->zp));
    }
    __m512i ev = _mm512_sra_epi64(_mm512_add_epi64(_mm512_mul_epi32(acc, c->mult), c->rnd), c->cnt);
    __m512i od = _mm512_mul_epi32(_mm512_srli_epi64(acc, 32), c->mult);
    od = _mm512_sra_epi64(_mm512_add_epi64(od, c->rnd), c->cnt);
    __m512i q = _mm512_mask_blend_epi32(0xAAAA, ev, _mm512_slli_epi64(od, 32));
    q = _mm512_add_epi32(q, c->zp);
    q = _mm512_min_epi32(_mm512_max_epi32(q, c->qmin), c->qmax);
    return _mm512_cvtepi32_epi8(q);
}

static inline __m128i q8_rq16_avx512(__m512i acc, const q8_rq *rq, size_t m)
{
    const q8_rq16_row c = q8_rq16_row_avx512(rq, m);
    return q8_rq16_apply_avx512(acc, &c);
}

#endif
