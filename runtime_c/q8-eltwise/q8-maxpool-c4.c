/* Int8 MaxPool in the blocked layout (q8-gemm.h: planes of 4-channel pixels, 4 bytes each, a 16-pixel pitch): the
 * window over pixels, the max per byte. q8_maxpool_c4 is the portable form (and the reference); the AVX-512 one
 * takes horizontal strides 1 and 2 without horizontal dilation, 16 outputs a step from registers (a row buffer
 * written and read back at other offsets stalled on store forwarding: 3x the NCHW VBMI kernel's time). Pixels
 * outside the image load as zeros, which never win a max of u8 values. */
#include <string.h>

#include "q8-eltwise.h"
#include "../q8-gemm/q8-gemm.h"

void q8_maxpool_c4(const q8_pool_shape *s, const uint8_t *x, uint8_t *y)
{
    const size_t npi = q8_pack_np((size_t)s->H * s->W), npo = q8_pack_np((size_t)s->Ho * s->Wo);
    for (size_t p = 0; p < (size_t)s->batch * s->C; p++) {
        const uint8_t *xp = x + p * npi * 4;
        uint8_t *yp = y + p * npo * 4;
        for (int oh = 0; oh < s->Ho; oh++)
            for (int ow = 0; ow < s->Wo; ow++)
                for (int j = 0; j < 4; j++) {
                    int m = 0;
                    for (int i = 0; i < s->kh; i++) {
                        const int ih = oh * s->sh + i * s->dh - s->pt;
                        for (int t = 0; t < s->kw && ih >= 0 && ih < s->H; t++) {
                            const int iw = ow * s->sw + t * s->dw - s->pl;
                            if (iw >= 0 && iw < s->W && xp[((size_t)ih * s->W + iw) * 4 + j] > m)
                                m = xp[((size_t)ih * s->W + iw) * 4 + j];
                        }
                    }
                    yp[((size_t)oh * s->Wo + ow) * 4 + j] = (uint8_t)m;
                }
    }
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>

/* lanes of the pixels [c, c + 16) that lie in [0, W) */
static inline __mmask16 in_row(long c, long W)
{
    const long a = c < 0 ? (c < -16 ? 16 : -c) : 0, b = W - c < 16 ? (W - c < 0 ? 0 : W - c) : 16;
    return b <= a ? 0 : (__mmask16)(((1u << b) - 1) & ~((1u << a) - 1));
}

/* one output row from its window's in-image rows r[0..nr) (stride sw, kw taps; constants after inlining in the
 * common cases): 16 outputs a step, a row's pixels [o sw - pl, + 16 sw + kw - 1) in 2 (stride 1) or 3 (stride 2)
 * vectors max-ed over the rows in registers (masked loads only where a step reaches past the image), then each
 * tap's lanes picked by vpermt2d. Stride 2: E, O = the even and odd pixels of the first 32; tap 2j + e is
 * (e ? O : E) moved on by j outputs, its last j lanes from the third vector (idx[t]). Stride 1: tap t = pixels
 * t.. of the first 32. */
static inline __attribute__((always_inline)) void row(int nr, int kw, int sw, const uint32_t *const *r, long W,
                                                      long Wo, long pl, const __m512i *idx, uint32_t *yr)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (long o = 0; o < Wo; o += 16) {
        const long c = o * sw - pl;
        __m512i m0 = _mm512_setzero_si512(), m1 = m0, m2 = m0;
        /* stride 2 with at most 5 taps reads 4 pixels of the third vector: a 16-byte load (no cache-line split) */
        const int narrow = sw == 2 && kw <= 5;
        if (c >= 0 && c + 32 + (sw == 2 ? (narrow ? 4 : 16) : 0) <= W) {
            for (int i = 0; i < nr; i++) {
                m0 = _mm512_max_epu8(m0, _mm512_loadu_si512((const void *)(r[i] + c)));
                m1 = _mm512_max_epu8(m1, _mm512_loadu_si512((const void *)(r[i] + c + 16)));
                if (narrow)
                    m2 = _mm512_max_epu8(m2, _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(r[i] + c + 32))));
                else if (sw == 2)
                    m2 = _mm512_max_epu8(m2, _mm512_loadu_si512((const void *)(r[i] + c + 32)));
            }
        } else { /* pixels outside the image load as zeros */
            const __mmask16 k0 = in_row(c, W), k1 = in_row(c + 16, W), k2 = sw == 2 ? in_row(c + 32, W) : 0;
            for (int i = 0; i < nr; i++) {
                m0 = _mm512_max_epu8(m0, _mm512_maskz_loadu_epi32(k0, r[i] + c));
                m1 = _mm512_max_epu8(m1, _mm512_maskz_loadu_epi32(k1, r[i] + c + 16));
                if (sw == 2)
                    m2 = _mm512_max_epu8(m2, _mm512_maskz_loadu_epi32(k2, r[i] + c + 32));
            }
        }
        __m512i acc = _mm512_setzero_si512();
        if (sw == 2) {
            const __m512i e = _mm512_permutex2var_epi32(m0, even, m1), od = _mm512_permutex2var_epi32(m0, odd, m1);
            for (int t = 0; t < kw; t++) {
                const __m512i base = t & 1 ? od : e;
                acc = _mm512_max_epu8(acc, t < 2 ? base : _mm512_permutex2var_epi32(base, idx[t], m2));
            }
        } else {
            for (int t = 0; t < kw; t++)
                acc = _mm512_max_epu8(acc, t ? _mm512_permutex2var_epi32(m0, idx[t], m1) : m0);
        }
        const long n = Wo - o;
        if (n >= 16)
            _mm512_storeu_si512((void *)(yr + o), acc);
        else
            _mm512_mask_storeu_epi32(yr + o, (__mmask16)((1u << n) - 1), acc);
    }
}

void q8_maxpool_c4__avx512(const q8_pool_shape *s, const uint8_t *x, uint8_t *y)
{
    if (s->dw != 1 || (s->sw != 1 && s->sw != 2) || s->kh > 16 || s->kw > 16) {
        q8_maxpool_c4(s, x, y);
        return;
    }
    const size_t npi = q8_pack_np((size_t)s->H * s->W), npo = q8_pack_np((size_t)s->Ho * s->Wo);
    __m512i idx[16];
    for (int t = 0; t < s->kw; t++) {
        int32_t v[16];
        for (int k = 0; k < 16; k++)
            v[k] = s->sw == 1 ? t + k : k + t / 2 <= 15 ? k + t / 2 : 16 + (t & 1) + 2 * (k + t / 2 - 16);
        idx[t] = _mm512_loadu_si512((const void *)v);
    }
    for (size_t p = 0; p < (size_t)s->batch * s->C; p++) {
        const uint32_t *xp = (const uint32_t *)(const void *)(x + p * npi * 4);
        uint32_t *yp = (uint32_t *)(void *)(y + p * npo * 4);
        for (int oh = 0; oh < s->Ho; oh++) {
            const uint32_t *r[16];
            int nr = 0;
            for (int i = 0; i < s->kh; i++) {
                const int ih = oh * s->sh + i * s->dh - s->pt;
                if (ih >= 0 && ih < s->H)
                    r[nr++] = xp + (size_t)ih * s->W;
            }
            uint32_t *yr = yp + (size_t)oh * s->Wo;
            const long W = s->W, Wo = s->Wo, pl = s->pl;
            if (nr == 3 && s->kw == 3 && s->sw == 2) /* ResNet's and SqueezeNet's pools, and their border rows */
                row(3, 3, 2, r, W, Wo, pl, idx, yr);
            else if (nr == 2 && s->kw == 3 && s->sw == 2)
                row(2, 3, 2, r, W, Wo, pl, idx, yr);
            else if (nr == 2 && s->kw == 2 && s->sw == 2)
                row(2, 2, 2, r, W, Wo, pl, idx, yr);
            else
                row(nr, s->kw, s->sw, r, W, Wo, pl, idx, yr);
        }
    }
}
#endif
