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

/* R == NULL: plain GEMM; else Y = q8_add(GEMM, R) with R laid out like Y (always inlined, so each
 * entry point below is compiled for its own case) */
static inline __attribute__((always_inline)) void
gemm_body(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp, size_t np, uint8_t *Y,
          size_t y_stride, const q8_rq *rq, const uint8_t *R, const q8_add_avx2 *ak)
{
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i lo = _mm256_set1_epi8((char)rq->qmin);
    const __m256i hi = _mm256_set1_epi8((char)rq->qmax);
    const int clamp = rq->qmin > 0 || rq->qmax < 255;
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        const int8_t *w = Wp + (m0 / 4) * K4 * 16;
        q8_rowrq rr[4];
        int fast = 1;
        for (int r = 0; r < 4; r++) {
            const int32_t s = rq->shift[m0 + r];
            const int ok = s >= 33 && s <= 54;
            fast &= ok || m0 + r >= M; /* rows past M are computed but not stored */
            rr[r].mult = _mm256_set1_epi32(rq->mult[m0 + r]);
            rr[r].rnd = _mm256_set1_epi32(ok ? (1 << (s - 33)) + (rq->zp << (s - 32)) : 0);
            rr[r].cnt = _mm_cvtsi32_si128(ok ? s - 32 : 0);
        }
        /* below 8 steps the K loop is short beside the requantization and the paired loop measured slower
         * (K = 8-16: 0.91-0.95x in ppocr cls), so those stay one step at a time */
        const size_t K4p = K4 >= 8 ? (K4 < 128 ? K4 : 128) : 0;
        const uint64_t pm = K4p ? q8_pair_mask(w, K4p) : 0;
        const __m256i b0 = _mm256_set1_epi32(rq->bias[m0]), b1 = _mm256_set1_epi32(rq->bias[m0 + 1]);
        const __m256i b2 = _mm256_set1_epi32(rq->bias[m0 + 2]), b3 = _mm256_set1_epi32(rq->bias[m0 + 3]);
        for (size_t n0 = 0; n0 < N; n0 += 16) { /* np is a multiple of 16: padding lanes are zero */
            /* accumulators start at the rows' biases */
            __m256i a00 = b0, a01 = b0, a10 = b1, a11 = b1, a20 = b2, a21 = b2, a30 = b3, a31 = b3;
            const uint8_t *x = Xp + n0 * 4;
            size_t k4 = 0;
            for (; k4 + 1 < K4p; k4 += 2, x += np * 8) {
                const int8_t *wk = w + k4 * 16;
                const __m256i x0 = _mm256_loadu_si256((const __m256i *)x);
                const __m256i x1 = _mm256_loadu_si256((const __m256i *)(x + 32));
                const __m256i y0 = _mm256_loadu_si256((const __m256i *)(x + np * 4));
                const __m256i y1 = _mm256_loadu_si256((const __m256i *)(x + np * 4 + 32));
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
            for (; k4 < K4; k4++, x += np * 4) {
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
            uint8_t *y = Y + n0;
            const uint8_t *r = R ? R + n0 : NULL;
            if (fast) {
                const size_t rows = M - m0;
                q8_maddubs_out2_rows(a00, a01, a10, a11, &rr[0], &rr[1], clamp, lo, hi, rows, N - n0, y + m0 * y_stride,
                                     y_stride, r ? r + m0 * y_stride : NULL, ak);
                if (rows > 2)
                    q8_maddubs_out2_rows(a20, a21, a30, a31, &rr[2], &rr[3], clamp, lo, hi, rows - 2, N - n0,
                                         y + (m0 + 2) * y_stride, y_stride, r ? r + (m0 + 2) * y_stride : NULL, ak);
                continue;
            }
            q8_maddubs_out2(a00, a01, a10, a11, m0, M, N - n0, y, y_stride, rq, r, ak);
            if (m0 + 2 < M)
                q8_maddubs_out2(a20, a21, a30, a31, m0 + 2, M, N - n0, y, y_stride, rq, r, ak);
        }
    }
}

void q8_gemm_4x16__avx2_maddubs(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                                size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    gemm_body(M, N, K4, Wp, Xp, np, Y, y_stride, rq, NULL, NULL);
}

void q8_gemm_4x16__avx2_maddubs_add(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                                    size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq, const uint8_t *R,
                                    const q8_add_params *ap)
{
    const q8_add_avx2 ak = q8_add_avx2_init(ap);
    gemm_body(M, N, K4, Wp, Xp, np, Y, y_stride, rq, R, &ak);
}
