/* q8 GEMM for AVX2: uint8 X zero-extended to int16, int8 W sign-extended, vpmaddwd into int32.
 * vpmaddubsw (u8 x s8 -> saturating s16 pairs) is deliberately not used: 255*-128*2 saturates
 * and would silently differ from onnxruntime; vpmaddwd cannot overflow (|pair| <= 65280). */
#include <immintrin.h>
#include <string.h>

#include "q8-gemm.h"

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

void q8_gemm_4x8__avx2(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                       size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        const int8_t *w = Wp + (m0 / 4) * K4 * 16;
        for (size_t n0 = 0; n0 < N; n0 += 8) {
            __m256i lo[4], hi[4];
            for (int r = 0; r < 4; r++)
                lo[r] = hi[r] = _mm256_setzero_si256();
            const uint8_t *x = Xp + n0 * 4;
            for (size_t k4 = 0; k4 < K4; k4++, x += np * 4) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)x);
                const __m256i x03 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(xv));
                const __m256i x47 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(xv, 1));
                const __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + k4 * 16)));
                __m256i w0 = _mm256_permute4x64_epi64(wv, 0x00);
                __m256i w1 = _mm256_permute4x64_epi64(wv, 0x55);
                __m256i w2 = _mm256_permute4x64_epi64(wv, 0xAA);
                __m256i w3 = _mm256_permute4x64_epi64(wv, 0xFF);
                lo[0] = _mm256_add_epi32(lo[0], _mm256_madd_epi16(x03, w0));
                hi[0] = _mm256_add_epi32(hi[0], _mm256_madd_epi16(x47, w0));
                lo[1] = _mm256_add_epi32(lo[1], _mm256_madd_epi16(x03, w1));
                hi[1] = _mm256_add_epi32(hi[1], _mm256_madd_epi16(x47, w1));
                lo[2] = _mm256_add_epi32(lo[2], _mm256_madd_epi16(x03, w2));
                hi[2] = _mm256_add_epi32(hi[2], _mm256_madd_epi16(x47, w2));
                lo[3] = _mm256_add_epi32(lo[3], _mm256_madd_epi16(x03, w3));
                hi[3] = _mm256_add_epi32(hi[3], _mm256_madd_epi16(x47, w3));
            }
            for (int r = 0; r < 4 && m0 + r < M; r++) {
                /* lanes hold k-pair halves per pixel: hadd, then undo the 128-bit interleave */
                __m256i a = _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo[r], hi[r]), 0xD8);
                a = _mm256_add_epi32(a, _mm256_set1_epi32(rq->bias[m0 + r]));
                q8_store8(Y + (m0 + r) * y_stride + n0, q8_rq8_avx2(a, rq, m0 + r), N - n0);
            }
        }
    }
}
