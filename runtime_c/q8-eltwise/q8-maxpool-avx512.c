/* Int8 2x2 stride-2 MaxPool (windows inside the image) with AVX-512BW: the max of a row pair, then of
 * adjacent bytes as u16 halves, 32 outputs per step, masked tails (narrow maps: no per-byte loop); rows of at
 * most 32 bytes several row pairs a step. Other shapes: the portable q8_maxpool. */
#include <immintrin.h>

#include "q8-eltwise.h"

void q8_maxpool__avx512(const q8_pool_shape *s, const uint8_t *x, uint8_t *y)
{
    if (!q8_maxpool_is_2x2s2(s)) {
        q8_maxpool(s, x, y);
        return;
    }
    const size_t H = (size_t)s->H, W = (size_t)s->W, Ho = (size_t)s->Ho, Wo = (size_t)s->Wo;
    const size_t planes = (size_t)s->batch * s->C;
    const __m512i lo = _mm512_set1_epi16(0xFF);
    if (H == 2 * Ho && W == 2 * Wo && W <= 32) {
        /* short rows (4x4 -> 2x2 .. 32x32 maps): the tensor is one run of row pairs, as many as fit a 64-byte
         * load taken at once; vpermw gathers each output's word of the upper and of the lower row (one row pair
         * a step gave 4 outputs on 8-pixel rows, 256 steps for 64 channels) */
        const size_t pairs = planes * Ho, k = 64 / (2 * W), step = k * Wo;
        uint16_t ia[32], ib[32];
        for (size_t o = 0; o < 32; o++) {
            const size_t pr = o < step ? o / Wo : 0, j = o < step ? o % Wo : 0;
            ia[o] = (uint16_t)(pr * W + j);
            ib[o] = (uint16_t)(pr * W + W / 2 + j);
        }
        const __m512i A = _mm512_loadu_si512(ia), B = _mm512_loadu_si512(ib);
        for (size_t p0 = 0; p0 < pairs; p0 += k) {
            const size_t np = pairs - p0 < k ? pairs - p0 : k, nb = np * 2 * W;
            const __m512i v = _mm512_maskz_loadu_epi8(nb == 64 ? ~(__mmask64)0 : ((__mmask64)1 << nb) - 1, x + p0 * 2 * W);
            const __m512i m = _mm512_max_epu8(_mm512_permutexvar_epi16(A, v), _mm512_permutexvar_epi16(B, v));
            const __m512i h = _mm512_max_epu16(_mm512_and_si512(m, lo), _mm512_srli_epi16(m, 8));
            _mm256_mask_storeu_epi8(y + p0 * Wo, (__mmask32)(((uint64_t)1 << (np * Wo)) - 1), _mm512_cvtepi16_epi8(h));
        }
        return;
    }
    for (size_t p = 0; p < planes; p++)
        for (size_t oh = 0; oh < Ho; oh++) {
            const uint8_t *a = x + (p * H + 2 * oh) * W, *b = a + W;
            uint8_t *yr = y + (p * Ho + oh) * Wo;
            for (size_t o0 = 0; o0 < Wo; o0 += 32) {
                const size_t n = Wo - o0 < 32 ? Wo - o0 : 32;
                const __mmask64 m = n == 32 ? ~(__mmask64)0 : ((__mmask64)1 << (2 * n)) - 1;
                const __m512i v = _mm512_max_epu8(_mm512_maskz_loadu_epi8(m, a + 2 * o0),
                                                  _mm512_maskz_loadu_epi8(m, b + 2 * o0));
                const __m512i h = _mm512_max_epu16(_mm512_and_si512(v, lo), _mm512_srli_epi16(v, 8));
                _mm256_mask_storeu_epi8(yr + o0, (__mmask32)(((uint64_t)1 << n) - 1), _mm512_cvtepi16_epi8(h));
            }
        }
}
