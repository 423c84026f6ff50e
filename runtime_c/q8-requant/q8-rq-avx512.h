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

/* fp32 requantization of 4 accumulator vectors to 64 bytes: rne(float(acc) * scale) through the saturating
 * int16 / u8 packs with zp (int16) added in between, then the clamp on bytes (lo, hi: qmin, qmax). The bytes of
 * q8_requant1_fp32: its clamp bounds are integers, so clamping before or after the rounding agrees, and
 * |acc * scale| < 2^31 cannot overflow the conversion. 19 instructions for 64 outputs, 32 one vector at a time.
 * The packs work per 128-bit lane: dword 4L + t of the result holds lanes 4L..4L+3 of (a0, a1, a2, a3)[t]; a0, a1
 * are scaled by s01, a2, a3 by s23 (per-lane scales, or one channel's). */
static inline __m512i q8_rq64_packs_fp32_avx512(__m512i a0, __m512i a1, __m512i a2, __m512i a3, __m512 s01, __m512 s23,
                                               __m512i zp16, __m512i lo, __m512i hi)
{
#define Q8_RQ_CVT(v, s) _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(v), s), \
                                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
    const __m512i a = _mm512_adds_epi16(_mm512_packs_epi32(Q8_RQ_CVT(a0, s01), Q8_RQ_CVT(a1, s01)), zp16);
    const __m512i b = _mm512_adds_epi16(_mm512_packs_epi32(Q8_RQ_CVT(a2, s23), Q8_RQ_CVT(a3, s23)), zp16);
#undef Q8_RQ_CVT
    return _mm512_min_epu8(_mm512_max_epu8(_mm512_packus_epi16(a, b), lo), hi);
}

static inline __m128i q8_rq16_avx512(__m512i acc, const q8_rq *rq, size_t m)
{
    const q8_rq16_row c = q8_rq16_row_avx512(rq, m);
    return q8_rq16_apply_avx512(acc, &c);
}

#endif
