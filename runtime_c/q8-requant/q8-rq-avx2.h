/* AVX2 requantization of 8 int32 accumulators of one output channel (exactly q8_requant1). */
#ifndef Q8_RQ_AVX2_H
#define Q8_RQ_AVX2_H

#include <immintrin.h>
#include <string.h>

#include "q8-requant.h"

/* exactly q8_requant1 on 8 lanes; logical 64-bit shifts made exact by a +2^62 offset */
static inline __m128i q8_rq8_avx2(__m256i acc, const q8_rq *rq, size_t m)
{
    const int s = rq->shift[m];
    const __m256i mult = _mm256_set1_epi32(rq->mult[m]);
    const __m256i rnd = _mm256_set1_epi64x(((int64_t)1 << (s - 1)) + ((int64_t)1 << 62));
    const __m128i cnt = _mm_cvtsi32_si128(s);
    __m256i ev = _mm256_srl_epi64(_mm256_add_epi64(_mm256_mul_epi32(acc, mult), rnd), cnt);
    __m256i od = _mm256_mul_epi32(_mm256_srli_epi64(acc, 32), mult);
    od = _mm256_srl_epi64(_mm256_add_epi64(od, rnd), cnt);
    __m256i q = _mm256_blend_epi32(ev, _mm256_slli_epi64(od, 32), 0xAA);
    q = _mm256_sub_epi32(q, _mm256_set1_epi32((int32_t)(uint32_t)(1ull << (62 - s))));
    q = _mm256_add_epi32(q, _mm256_set1_epi32(rq->zp));
    __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(q, q), _mm256_setzero_si256());
    __m128i r = _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    r = _mm_max_epu8(r, _mm_set1_epi8((char)rq->qmin));
    return _mm_min_epu8(r, _mm_set1_epi8((char)rq->qmax));
}

/* (acc * mult + 2^(s-1)) >> s on 8 lanes of one channel, int32 (no zero point, no clamp): exactly the
 * first step of q8_requant1. For s >= 33 the rounding moves after taking the high 32 bits of the
 * product, floor((p + 2^(s-1)) / 2^s) = (hi32(p) + 2^(s-33)) >> (s-32) (2^(s-1) is a multiple of 2^32;
 * |hi32(p)| < 2^30, so no overflow): 7 operations instead of 10. */
static inline __m256i q8_rq32_avx2(__m256i acc, int32_t mult, int32_t s)
{
    const __m256i mv = _mm256_set1_epi32(mult);
    const __m256i ev = _mm256_mul_epi32(acc, mv), od = _mm256_mul_epi32(_mm256_srli_epi64(acc, 32), mv);
    if (s >= 33) {
        const __m256i hi = _mm256_blend_epi32(_mm256_srli_epi64(ev, 32), od, 0xAA);
        return _mm256_sra_epi32(_mm256_add_epi32(hi, _mm256_set1_epi32(1 << (s - 33))), _mm_cvtsi32_si128(s - 32));
    }
    const __m256i rnd = _mm256_set1_epi64x(((int64_t)1 << (s - 1)) + ((int64_t)1 << 62));
    const __m128i cnt = _mm_cvtsi32_si128(s);
    const __m256i e = _mm256_srl_epi64(_mm256_add_epi64(ev, rnd), cnt);
    const __m256i o = _mm256_srl_epi64(_mm256_add_epi64(od, rnd), cnt);
    const __m256i q = _mm256_blend_epi32(e, _mm256_slli_epi64(o, 32), 0xAA);
    return _mm256_sub_epi32(q, _mm256_set1_epi32((int32_t)(uint32_t)(1ull << (62 - s))));
}

static inline void q8_store8(uint8_t *y, __m128i v, size_t n)
{
    if (n >= 8) {
        _mm_storel_epi64((__m128i *)y, v);
    } else {
        uint8_t t[16];
        _mm_storeu_si128((__m128i *)t, v);
        memcpy(y, t, n);
    }
}

#endif
