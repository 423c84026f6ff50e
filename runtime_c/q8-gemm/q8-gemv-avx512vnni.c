/* q8 GEMV for AVX-512 VNNI: 16 rows at a time, each row's 64-byte chunks of W against the same chunk of x
 * (one vpdpbusd: 16 lanes of 4-deep sums), the 16 accumulators then reduced into one vector of the 16 rows'
 * sums (unpacks and lane shuffles, 45 instructions) and requantized together (fp32 where rq->scale is set).
 * The squeeze-excite 1x1s (50-200 x 12-200) are a few chunks per row: the AVX2 kernel's int16 widening and
 * per-row horizontal sums took 0.7-1.1 us each on ppocr cls. */
#include <immintrin.h>

#include "q8-gemv.h"
#include "../ec_vnni.h"

/* lane r of the result = the sum of v[r]'s 16 lanes */
static inline __m512i reduce16(const __m512i v[16])
{
    __m512i x[8], y[4];
    for (int i = 0; i < 8; i++) /* per 128-bit lane: (a02, b02, a13, b13) of v[2i], v[2i+1] */
        x[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
    for (int j = 0; j < 4; j++) /* per 128-bit lane: that lane's sums of v[4j .. 4j+3] */
        y[j] = _mm512_add_epi32(_mm512_unpacklo_epi64(x[2 * j], x[2 * j + 1]), _mm512_unpackhi_epi64(x[2 * j], x[2 * j + 1]));
    /* across the 4 lanes: element 4j + t = v[4j + t]'s total */
    const __m512i u0 = _mm512_add_epi32(_mm512_shuffle_i32x4(y[0], y[1], 0x88), _mm512_shuffle_i32x4(y[0], y[1], 0xDD));
    const __m512i u1 = _mm512_add_epi32(_mm512_shuffle_i32x4(y[2], y[3], 0x88), _mm512_shuffle_i32x4(y[2], y[3], 0xDD));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(u0, u1, 0x88), _mm512_shuffle_i32x4(u0, u1, 0xDD));
}

void q8_gemv__avx512vnni(size_t M, size_t K, const int8_t *W, const uint8_t *x, uint8_t *y, const q8_rq *rq)
{
    for (size_t m0 = 0; m0 < M; m0 += 16) {
        const size_t mr = M - m0 < 16 ? M - m0 : 16;
        const __mmask16 rm = (__mmask16)((1u << mr) - 1);
        __m512i acc[16];
        for (int r = 0; r < 16; r++)
            acc[r] = _mm512_setzero_si512();
        for (size_t k = 0; k < K; k += 64) {
            const __mmask64 km = K - k >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (K - k)) - 1;
            const __m512i xv = _mm512_maskz_loadu_epi8(km, x + k);
            for (size_t r = 0; r < mr; r++)
                acc[r] = ec_dpbusd512(acc[r], xv, _mm512_maskz_loadu_epi8(km, W + (m0 + r) * K + k));
        }
        const __m512i s = _mm512_add_epi32(reduce16(acc), _mm512_maskz_loadu_epi32(rm, rq->bias + m0));
        if (rq->scale) {
            __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_maskz_loadu_ps(rm, rq->scale + m0));
            v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps((float)(rq->qmin - rq->zp))),
                              _mm512_set1_ps((float)(rq->qmax - rq->zp)));
            const __m512i q = _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            _mm_mask_storeu_epi8(y + m0, rm, _mm512_cvtepi32_epi8(_mm512_add_epi32(q, _mm512_set1_epi32(rq->zp))));
        } else {
            int32_t t[16];
            _mm512_storeu_si512(t, s);
            for (size_t r = 0; r < mr; r++)
                y[m0 + r] = q8_requant1(t[r], rq->mult[m0 + r], rq->shift[m0 + r], rq->zp, rq->qmin, rq->qmax);
        }
    }
}
