/* Int8 depthwise conv for AVX2 without VNNI on weights whose tap pairs fit vpmaddubsw's int16 pair
 * sum (the bound of q8-gemm-4x16-avx2-maddubs.c; every 7-bit weight set): 4 taps of 32 pixels are
 * byte-interleaved per pixel, vpmaddubsw adds tap pairs, vpmaddwd with ones the two pairs, so one
 * multiply covers 32 products (q8_dwconv__avx2: 16). Any stride via the shared phase split. */
#include <immintrin.h>

#include "q8-dwconv.h"
#include "../q8-requant/q8-rq-avx2.h"

static void dw_row(const q8_dw_params *p, int c, int T, const uint8_t *const *tap, const int32_t *wpair,
                   uint8_t *yr, const q8_rq *rq)
{
    (void)wpair;
    const int8_t *wc = p->w + (size_t)c * T;
    int32_t w4[Q8_DW_MAX_TAPS / 4 + 1]; /* taps 4g..4g+3 as bytes, zero past T */
    const uint8_t *tp[Q8_DW_MAX_TAPS + 4];
    for (int t = 0; t < (T + 3) / 4 * 4; t++) {
        tp[t] = t < T ? tap[t] : tap[0];
        ((int8_t *)w4)[t] = t < T ? wc[t] : 0;
    }
    const __m256i ones = _mm256_set1_epi16(1), zp = _mm256_set1_epi16((int16_t)rq->zp);
    const int32_t mult = rq->mult[c], shift = rq->shift[c];
    for (int ow0 = 0; ow0 < p->Wo; ow0 += 32) {
        /* lanes: a0 pixels 0-3|16-19, a1 4-7|20-23, a2 8-11|24-27, a3 12-15|28-31 */
        __m256i a0 = _mm256_set1_epi32(p->bias[c]), a1 = a0, a2 = a0, a3 = a0;
        for (int t = 0; t < T; t += 4) {
            const __m256i x0 = _mm256_loadu_si256((const __m256i *)(tp[t] + ow0));
            const __m256i x1 = _mm256_loadu_si256((const __m256i *)(tp[t + 1] + ow0));
            const __m256i x2 = _mm256_loadu_si256((const __m256i *)(tp[t + 2] + ow0));
            const __m256i x3 = _mm256_loadu_si256((const __m256i *)(tp[t + 3] + ow0));
            const __m256i l01 = _mm256_unpacklo_epi8(x0, x1), h01 = _mm256_unpackhi_epi8(x0, x1);
            const __m256i l23 = _mm256_unpacklo_epi8(x2, x3), h23 = _mm256_unpackhi_epi8(x2, x3);
            const __m256i wv = _mm256_set1_epi32(w4[t / 4]);
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_unpacklo_epi16(l01, l23), wv), ones));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_unpackhi_epi16(l01, l23), wv), ones));
            a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_unpacklo_epi16(h01, h23), wv), ones));
            a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_unpackhi_epi16(h01, h23), wv), ones));
        }
        /* packs keep each 128-bit half: [0-3 4-7 | 16-19 20-23], [8-11 12-15 | 24-27 28-31] -> bytes in order */
        const __m256i lo = _mm256_packs_epi32(q8_rq32_avx2(a0, mult, shift), q8_rq32_avx2(a1, mult, shift));
        const __m256i hi = _mm256_packs_epi32(q8_rq32_avx2(a2, mult, shift), q8_rq32_avx2(a3, mult, shift));
        __m256i v = _mm256_packus_epi16(_mm256_adds_epi16(lo, zp), _mm256_adds_epi16(hi, zp));
        v = _mm256_min_epu8(_mm256_max_epu8(v, _mm256_set1_epi8((char)rq->qmin)), _mm256_set1_epi8((char)rq->qmax));
        const int n = p->Wo - ow0 < 32 ? p->Wo - ow0 : 32;
        if (n == 32) {
            _mm256_storeu_si256((__m256i *)(yr + ow0), v);
        } else {
            uint8_t t32[32];
            _mm256_storeu_si256((__m256i *)t32, v);
            memcpy(yr + ow0, t32, (size_t)n);
        }
    }
}

void q8_dwconv__avx2_maddubs(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch)
{
    q8_dwconv_rows(p, x, y, scratch, 32, dw_row);
}
