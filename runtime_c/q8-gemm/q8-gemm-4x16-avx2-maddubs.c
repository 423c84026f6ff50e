/* q8 GEMM for AVX2 without VNNI on weights whose k-pairs fit the int16 pair sum:
 * vpmaddubsw (u8 X x s8 W, 32 products into 16 saturating int16 pair sums) then vpmaddwd with
 * ones (pairs -> int32). Twice the products per multiply of q8_gemm_4x8__avx2's vpmaddwd.
 *
 * Exact only if no pair sum saturates: for every row m and even k,
 *   255 * (max(w[k], 0) + max(w[k+1], 0)) <= 32767 and 255 * (min(w[k], 0) + min(w[k+1], 0)) >= -32768,
 * i.e. positive parts <= 128 and negative parts >= -128 per pair. 7-bit weights (|w| <= 64, as
 * quantize_static reduce_range makes them) always qualify: |pair| <= 2 * 255 * 64 = 32640.
 * With 8-bit weights 2 * 255 * 127 = 64770 does not: the emitter checks the pairs of each layer's
 * constant weights (qpack.maddubs_exact) and uses q8_gemm_4x8__avx2 otherwise.
 *
 * Tile: 4 rows x 16 pixels (8 accumulators; 2 X loads + 4 weight broadcasts per 4 k). The packed X
 * lanes are [pixel][4 k], so each int32 lane is one pixel. Small-K layers (most 1x1 convs of mobile
 * models) are bound by requantization, so two rows are requantized and packed together, with each
 * 4-row block's biases and multipliers broadcast once (not per tile). */
#include <immintrin.h>
#include <string.h>

#include "q8-gemm-avx2-out.h"

/* Two k4 steps whose int16 pair sums can be added before the one vpmaddwd: for every row of the block and
 * both int16 lanes of a pixel, the four weights (k, k+1 of step a and of step b) keep their positive parts
 * <= 128 and negative parts >= -128, so the int16 sum of the two pair sums is exact for any u8 input
 * (255 * 128 = 32640). One multiply per 32 products fewer there. Returns the bit mask over the block's step
 * pairs (2j, 2j+1), j < 64. */
static inline uint64_t q8_pair_mask(const int8_t *w, size_t K4)
{
    const __m256i ones = _mm256_set1_epi8(1), zero = _mm256_setzero_si256();
    const __m128i lim = _mm_set1_epi16(128), nlim = _mm_set1_epi16(-128);
    uint64_t mask = 0;
    for (size_t j = 0; j < K4 / 2 && j < 64; j++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(w + 32 * j)); /* steps 2j | 2j+1: [4 rows][4 k] */
        const __m256i pos = _mm256_maddubs_epi16(ones, _mm256_max_epi8(v, zero)); /* per row: k0+k1, k2+k3 */
        const __m256i neg = _mm256_maddubs_epi16(ones, _mm256_min_epi8(v, zero));
        const __m128i p = _mm_add_epi16(_mm256_castsi256_si128(pos), _mm256_extracti128_si256(pos, 1));
        const __m128i n = _mm_add_epi16(_mm256_castsi256_si128(neg), _mm256_extracti128_si256(neg, 1));
        const __m128i bad = _mm_or_si128(_mm_cmpgt_epi16(p, lim), _mm_cmplt_epi16(n, nlim));
        if (_mm_testz_si128(bad, bad))
            mask |= (uint64_t)1 << j;
    }
    return mask;
}

/* rows r: steps a (x0, x1) and b (y0, y1) summed in int16, then one vpmaddwd each */
#define Q8_MADDUBS_ROW2(r)                                                                        \
    do {                                                                                          \
        const __m256i wa = _mm256_broadcastd_epi32(_mm_loadu_si32(wk + 4 * (r)));                \
        const __m256i wb = _mm256_broadcastd_epi32(_mm_loadu_si32(wk + 16 + 4 * (r)));           \
        a##r##0 = _mm256_add_epi32(a##r##0, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(x0, wa), \
                                                                                _mm256_maddubs_epi16(y0, wb)), ones)); \
        a##r##1 = _mm256_add_epi32(a##r##1, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(x1, wa), \
                                                                                _mm256_maddubs_epi16(y1, wb)), ones)); \
    } while (0)

#define Q8_MADDUBS_ROW(r)                                                                         \
    do {                                                                                          \
        const __m256i wr = _mm256_broadcastd_epi32(_mm_loadu_si32(wk + 4 * (r)));                \
        a##r##0 = _mm256_add_epi32(a##r##0, _mm256_madd_epi16(_mm256_maddubs_epi16(x0, wr), ones)); \
        a##r##1 = _mm256_add_epi32(a##r##1, _mm256_madd_epi16(_mm256_maddubs_epi16(x1, wr), ones)); \
    } while (0)

/* R == NULL: plain GEMM; else Y = q8_add(GEMM, R) with R laid out like Y (always inlined, so each
 * entry point below is compiled for its own case) */
static inline __attribute__((always_inline)) void
gemm_body(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp, size_t np, uint8_t *Y,
          size_t y_stride, const q8_rq *rq, const uint8_t *R, const q8_add_avx2 *ak, const int32_t *koff)
{
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i lo = _mm256_set1_epi8((char)rq->qmin);
    const __m256i hi = _mm256_set1_epi8((char)rq->qmax);
    const int clamp = rq->qmin > 0 || rq->qmax < 255;
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        const int8_t *w = Wp + (m0 / 4) * K4 * 16;
        q8_rowrq rr[4];
        const int fast = q8_rowrq_init(rq, m0, M, rr);
        /* below 8 steps the K loop is short beside the requantization and the paired loop measured slower
         * (K = 8-16: 0.91-0.95x in ppocr cls), so those stay one step at a time */
        const size_t K4p = K4 >= 8 ? (K4 < 128 ? K4 : 128) : 0;
        const uint64_t pm = K4p ? q8_pair_mask(w, K4p) : 0;
        const __m256i b0 = _mm256_set1_epi32(rq->bias[m0]), b1 = _mm256_set1_epi32(rq->bias[m0 + 1]);
        const __m256i b2 = _mm256_set1_epi32(rq->bias[m0 + 2]), b3 = _mm256_set1_epi32(rq->bias[m0 + 3]);
        for (size_t n0 = 0; n0 < N; n0 += 16) { /* np is a multiple of 16: padding lanes are zero */
            /* accumulators start at the rows' biases */
            __m256i a00 = b0, a01 = b0, a10 = b1, a11 = b1, a20 = b2, a21 = b2, a30 = b3, a31 = b3;
            const uint8_t *xs = Xp + n0 * 4; /* k4 step k at xs + koff[k] (implicit GEMM), else xs + k np 4 */
            size_t k4 = 0;
            for (; k4 + 1 < K4p; k4 += 2) {
                const int8_t *wk = w + k4 * 16;
                const uint8_t *x = koff ? xs + koff[k4] : xs + k4 * np * 4;
                const uint8_t *xy = koff ? xs + koff[k4 + 1] : x + np * 4;
                const __m256i x0 = _mm256_loadu_si256((const __m256i *)x);
                const __m256i x1 = _mm256_loadu_si256((const __m256i *)(x + 32));
                const __m256i y0 = _mm256_loadu_si256((const __m256i *)xy);
                const __m256i y1 = _mm256_loadu_si256((const __m256i *)(xy + 32));
                if (pm >> (k4 / 2) & 1) {
                    Q8_MADDUBS_ROW2(0);
                    Q8_MADDUBS_ROW2(1);
                    Q8_MADDUBS_ROW2(2);
                    Q8_MADDUBS_ROW2(3);
                } else {
                    Q8_MADDUBS_ROW(0);
                    Q8_MADDUBS_ROW(1);
                    Q8_MADDUBS_ROW(2);
                    Q8_MADDUBS_ROW(3);
                    {
                        const __m256i x0 = y0, x1 = y1;
                        const int8_t *wk = w + k4 * 16 + 16;
                        Q8_MADDUBS_ROW(0);
                        Q8_MADDUBS_ROW(1);
                        Q8_MADDUBS_ROW(2);
                        Q8_MADDUBS_ROW(3);
                    }
                }
            }
            for (; k4 < K4; k4++) {
                const uint8_t *x = koff ? xs + koff[k4] : xs + k4 * np * 4;
                const __m256i x0 = _mm256_loadu_si256((const __m256i *)x);
                const __m256i x1 = _mm256_loadu_si256((const __m256i *)(x + 32));
                /* 4 rows x 4 weights; each row's broadcast straight from memory (a load, where an int32
                 * copy went through a general register and a vector shuffle per row) */
                const int8_t *wk = w + k4 * 16;
                Q8_MADDUBS_ROW(0);
                Q8_MADDUBS_ROW(1);
                Q8_MADDUBS_ROW(2);
                Q8_MADDUBS_ROW(3);
            }
            q8_out4x16_avx2(a00, a01, a10, a11, a20, a21, a30, a31, fast, rr, clamp, lo, hi, m0, M, n0, N, Y, y_stride,
                            rq, R, ak);
        }
    }
}

void q8_gemm_4x16__avx2_maddubs(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                                size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    gemm_body(M, N, K4, Wp, Xp, np, Y, y_stride, rq, NULL, NULL, NULL);
}

void q8_igemm_4x16__avx2_maddubs(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *x,
                                 const int32_t *koff, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    gemm_body(M, N, K4, Wp, x, q8_pack_np(N), Y, y_stride, rq, NULL, NULL, koff);
}

void q8_gemm_4x16__avx2_maddubs_add(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                                    size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq, const uint8_t *R,
                                    const q8_add_params *ap)
{
    const q8_add_avx2 ak = q8_add_avx2_init(ap);
    gemm_body(M, N, K4, Wp, Xp, np, Y, y_stride, rq, R, &ak, NULL);
}
