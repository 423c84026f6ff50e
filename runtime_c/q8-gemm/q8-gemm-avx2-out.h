/* The AVX2 4x16 int8 GEMM tiles' requantize-and-store (q8-gemm-4x16-avx2-maddubs.c, q8-gemm-4x16-avxvnni.c):
 * 4 rows x 16 pixels of int32 accumulators (two ymm a row) -> bytes, two rows at a time, with the optional
 * residual Add of the maddubs kernel's fused form. Shared so the kernels differ only in their K loop. */
#ifndef Q8_GEMM_AVX2_OUT_H
#define Q8_GEMM_AVX2_OUT_H

#include <immintrin.h>
#include <string.h>

#include "q8-gemm.h"
#include "../q8-eltwise/q8-eltwise.h"
#include "../q8-requant/q8-rq-avx2.h"

/* rows r, r+1 of the residual (n valid pixels, like Y) as one vector in q8_maddubs_out2*'s byte order */
static inline __m256i q8_load_res2(const uint8_t *r, size_t r_stride, size_t rows, size_t n)
{
    if (n >= 16 && rows > 1)
        return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)r)),
                                       _mm_loadu_si128((const __m128i *)(r + r_stride)), 1);
    uint8_t t[32] = {0};
    memcpy(t, r, n < 16 ? n : 16);
    if (rows > 1)
        memcpy(t + 16, r + r_stride, n < 16 ? n : 16);
    return _mm256_loadu_si256((const __m256i *)t);
}

/* rows r, r+1 x 16 pixels -> bytes: int32 requant per row, both rows packed together (saturating, so
 * out-of-range values stay out of range), zero point, clamp; one permute restores pixel order */
static inline void q8_maddubs_out2(__m256i a0, __m256i a1, __m256i b0, __m256i b1, size_t m, size_t M,
                                   size_t n, uint8_t *Y, size_t y_stride, const q8_rq *rq, const uint8_t *R,
                                   const q8_add_avx2 *ak)
{
    const __m256i zp = _mm256_set1_epi16((int16_t)rq->zp);
    const int32_t ma = rq->mult[m], sa = rq->shift[m], mb = rq->mult[m + 1], sb = rq->shift[m + 1];
    __m256i ta = _mm256_packs_epi32(q8_rq32_avx2(a0, ma, sa), q8_rq32_avx2(a1, ma, sa));
    __m256i tb = _mm256_packs_epi32(q8_rq32_avx2(b0, mb, sb), q8_rq32_avx2(b1, mb, sb));
    __m256i v = _mm256_packus_epi16(_mm256_adds_epi16(ta, zp), _mm256_adds_epi16(tb, zp));
    v = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    v = _mm256_min_epu8(_mm256_max_epu8(v, _mm256_set1_epi8((char)rq->qmin)), _mm256_set1_epi8((char)rq->qmax));
    if (R)
        v = q8_add32_avx2(v, q8_load_res2(R + m * y_stride, y_stride, M - m, n), ak);
    for (int r = 0; r < 2 && m + r < M; r++) {
        const __m128i row = r ? _mm256_extracti128_si256(v, 1) : _mm256_castsi256_si128(v);
        uint8_t *y = Y + (m + r) * y_stride;
        if (n >= 16) {
            _mm_storeu_si128((__m128i *)y, row);
        } else {
            uint8_t t[16];
            _mm_storeu_si128((__m128i *)t, row);
            memcpy(y, t, n);
        }
    }
}

/* Per-row requantization constants for shifts in [33, 54] (the short form of q8_rq32_avx2), set once
 * per 4-row block: stores through Y (bytes) may alias rq, so they would otherwise be reloaded and
 * re-broadcast for every tile, which costs as much as the K loop at K = 16. rnd also carries the zero
 * point: (hi + 2^(c-1) + zp * 2^c) >> c = ((hi + 2^(c-1)) >> c) + zp, c = s - 32, and with |hi| <= 2^30,
 * zp <= 255, c <= 22 the sum stays below 2^31. */
typedef struct {
    __m256i mult, rnd;
    __m128i cnt;
} q8_rowrq;

static inline __m256i q8_rq32_row(__m256i acc, const q8_rowrq *r)
{
    const __m256i ev = _mm256_mul_epi32(acc, r->mult), od = _mm256_mul_epi32(_mm256_srli_epi64(acc, 32), r->mult);
    const __m256i hi = _mm256_blend_epi32(_mm256_srli_epi64(ev, 32), od, 0xAA);
    return _mm256_sra_epi32(_mm256_add_epi32(hi, r->rnd), r->cnt);
}

/* bytes of two rows (low half: row 0, high half: row 1; rows of them) to y and y + y_stride, the first n <= 16 */
static inline void q8_store2x16_avx2(__m256i v, size_t rows, size_t n, uint8_t *y, size_t y_stride)
{
    if (n >= 16) {
        _mm_storeu_si128((__m128i *)y, _mm256_castsi256_si128(v));
        if (rows > 1)
            _mm_storeu_si128((__m128i *)(y + y_stride), _mm256_extracti128_si256(v, 1));
        return;
    }
    uint8_t t[32];
    _mm256_storeu_si256((__m256i *)t, v);
    memcpy(y, t, n);
    if (rows > 1)
        memcpy(y + y_stride, t + 16, n);
}

/* q8_maddubs_out2 with the row constants given (zero point already added: saturating to int16 and
 * then to u8 clamps v + zp as adding it after the int16 step did); the clamp only for fused activations */
static inline void q8_maddubs_out2_rows(__m256i a0, __m256i a1, __m256i b0, __m256i b1, const q8_rowrq *ra,
                                        const q8_rowrq *rb, int clamp, __m256i lo, __m256i hi, size_t rows,
                                        size_t n, uint8_t *y, size_t y_stride, const uint8_t *r,
                                        const q8_add_avx2 *ak)
{
    __m256i ta = _mm256_packs_epi32(q8_rq32_row(a0, ra), q8_rq32_row(a1, ra));
    __m256i tb = _mm256_packs_epi32(q8_rq32_row(b0, rb), q8_rq32_row(b1, rb));
    __m256i v = _mm256_packus_epi16(ta, tb);
    v = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    if (clamp)
        v = _mm256_min_epu8(_mm256_max_epu8(v, lo), hi);
    if (r) /* the residual Add on the conv's bytes while they are in a register */
        v = q8_add32_avx2(v, q8_load_res2(r, y_stride, rows, n), ak);
    q8_store2x16_avx2(v, rows, n, y, y_stride);
}

/* The 4-row block's constants from row m0 on: 1 when every stored row takes the short form */
static inline int q8_rowrq_init(const q8_rq *rq, size_t m0, size_t M, q8_rowrq rr[4])
{
    int fast = 1;
    for (int r = 0; r < 4; r++) {
        const int32_t s = rq->shift[m0 + r];
        const int ok = s >= 33 && s <= 54;
        fast &= ok || m0 + r >= M; /* rows past M are computed but not stored */
        rr[r].mult = _mm256_set1_epi32(rq->mult[m0 + r]);
        rr[r].rnd = _mm256_set1_epi32(ok ? (1 << (s - 33)) + (rq->zp << (s - 32)) : 0);
        rr[r].cnt = _mm_cvtsi32_si128(ok ? s - 32 : 0);
    }
    return fast;
}

/* The tile at (m0, n0): rows a*, b* = accumulators of rows m0..m0+3 (pixel halves 0, 1) */
static inline void q8_out4x16_avx2(__m256i a00, __m256i a01, __m256i a10, __m256i a11, __m256i a20, __m256i a21,
                                   __m256i a30, __m256i a31, int fast, const q8_rowrq rr[4], int clamp, __m256i lo,
                                   __m256i hi, size_t m0, size_t M, size_t n0, size_t N, uint8_t *Y, size_t y_stride,
                                   const q8_rq *rq, const uint8_t *R, const q8_add_avx2 *ak)
{
    uint8_t *y = Y + n0;
    const uint8_t *r = R ? R + n0 : NULL;
    if (fast) {
        const size_t rows = M - m0;
        q8_maddubs_out2_rows(a00, a01, a10, a11, &rr[0], &rr[1], clamp, lo, hi, rows, N - n0, y + m0 * y_stride,
                             y_stride, r ? r + m0 * y_stride : NULL, ak);
        if (rows > 2)
            q8_maddubs_out2_rows(a20, a21, a30, a31, &rr[2], &rr[3], clamp, lo, hi, rows - 2, N - n0,
                                 y + (m0 + 2) * y_stride, y_stride, r ? r + (m0 + 2) * y_stride : NULL, ak);
        return;
    }
    q8_maddubs_out2(a00, a01, a10, a11, m0, M, N - n0, y, y_stride, rq, r, ak);
    if (m0 + 2 < M)
        q8_maddubs_out2(a20, a21, a30, a31, m0 + 2, M, N - n0, y, y_stride, rq, r, ak);
}

#endif
