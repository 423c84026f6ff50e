/* AVX-512 requantization of 16 int32 accumulators of one output channel (exactly q8_requant1). */
#ifndef Q8_RQ_AVX512_H
#define Q8_RQ_AVX512_H

#include <immintrin.h>

#include "q8-requant.h"

/* exactly q8_requant1 on 16 lanes (AVX-512 has the arithmetic 64-bit shift) */
static inline __m128i q8_rq16_avx512(__m512i acc, const q8_rq *rq, size_t m)
{
    const int s = rq->shift[m];
    const __m512i mult = _mm512_set1_epi32(rq->mult[m]);
    const __m512i rnd = _mm512_set1_epi64((int64_t)1 << (s - 1));
    const __m128i cnt = _mm_cvtsi32_si128(s);
    __m512i ev = _mm512_sra_epi64(_mm512_add_epi64(_mm512_mul_epi32(acc, mult), rnd), cnt);
    __m512i od = _mm512_mul_epi32(_mm512_srli_epi64(acc, 32), mult);
    od = _mm512_sra_epi64(_mm512_add_epi64(od, rnd), cnt);
    __m512i q = _mm512_mask_blend_epi32(0xAAAA, ev, _mm512_slli_epi64(od, 32));
    q = _mm512_add_epi32(q, _mm512_set1_epi32(rq->zp));
    q = _mm512_max_epi32(q, _mm512_setzero_si512());
    __m128i r = _mm512_cvtusepi32_epi8(q); /* saturates > 255 */
    r = _mm_max_epu8(r, _mm_set1_epi8((char)rq->qmin));
    return _mm_min_epu8(r, _mm_set1_epi8((char)rq->qmax));
}

#endif
