/* Int8 depthwise conv for AVX2: taps taken in pairs so one vpmaddwd adds two taps of 16 pixels
 * (u8 zero-extended x s8 sign-extended into int16: no saturation). Any stride via phase split. */
#include <immintrin.h>

#include "q8-dwconv.h"
#include "../q8-requant/q8-rq-avx2.h"


static void dw_row(const q8_dw_params *p, int c, int T, const uint8_t *const *tap, const int32_t *wpair,
                   uint8_t *yr, const q8_rq *rq)
{
    for (int ow0 = 0; ow0 < p->Wo; ow0 += 16) {
        __m256i a0 = _mm256_set1_epi32(p->bias[c]), a1 = a0;
        for (int t = 0; t < T; t += 2) {
            __m256i x0 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(tap[t] + ow0)));
            __m256i x1 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(tap[t + 1] + ow0)));
            __m256i wv = _mm256_set1_epi32(wpair[t / 2]);
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi16(x0, x1), wv));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi16(x0, x1), wv));
        }
        /* unpack lo/hi interleave 128-bit halves: restore pixel order */
        __m256i p0 = _mm256_permute2x128_si256(a0, a1, 0x20), p1 = _mm256_permute2x128_si256(a0, a1, 0x31);
        __m128i r = _mm_unpacklo_epi64(q8_rq8_avx2(p0, rq, (size_t)c), q8_rq8_avx2(p1, rq, (size_t)c));
        int n = p->Wo - ow0 < 16 ? p->Wo - ow0 : 16;
        if (n == 16) {
            _mm_storeu_si128((__m128i *)(yr + ow0), r);
        } else {
            uint8_t t16[16];
            _mm_storeu_si128((__m128i *)t16, r);
            memcpy(yr + ow0, t16, (size_t)n);
        }
    }
}

void q8_dwconv__avx2(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch)
{
    const int T = p->kh * p->kw;
    if (T > Q8_DW_MAX_TAPS) {
        q8_dwconv__scalar(p, x, y, scratch);
        return;
    }
    const size_t wq = q8_dw_wq(p);
    const q8_rq rq = {p->bias, p->mult, p->shift, p->zp, p->qmin, p->qmax};
    size_t off[Q8_DW_MAX_TAPS];
    if (q8_dw_use_flat(p, 16)) {
        q8_dwconv_flat(p, x, y, scratch, &rq, dw_row);
        return;
    }
    q8_dw_tap_offsets(p, off);
    for (int b = 0; b < p->batch; b++)
        for (int c = 0; c < p->C; c++) {
            const size_t plane = (size_t)b * p->C + c;
            q8_dw_pad_channel(p, x + plane * p->H * p->W, scratch);
            const int8_t *wc = p->w + (size_t)c * T;
            int32_t wpair[Q8_DW_MAX_TAPS / 2 + 1];
            q8_dw_pair_weights(wc, T, wpair);
            for (int oh = 0; oh < p->Ho; oh++) {
                const uint8_t *tap[Q8_DW_MAX_TAPS + 1];
                for (int t = 0; t < T; t++)
                    tap[t] = scratch + off[t] + (size_t)oh * p->sh * wq;
                tap[T] = tap[0]; /* odd tap count: paired with a zero weight */
                dw_row(p, c, T, tap, wpair, y + plane * p->Ho * p->Wo + (size_t)oh * p->Wo, &rq);
            }
        }
}
