/* Packing for the q8 GEMM (layouts in q8-gemm.h). Weights are packed once at compile time
 * by the Python emitter with the same layout; this C version serves tests and tools. */
#include <string.h>

#include "q8-gemm.h"

void q8_pack_w(size_t M, size_t K, const int8_t *W, int8_t *Wp)
{
    const size_t K4 = (K + 3) / 4;
    for (size_t mb = 0; mb < (M + 3) / 4; mb++)
        for (size_t k4 = 0; k4 < K4; k4++)
            for (size_t r = 0; r < 4; r++)
                for (size_t j = 0; j < 4; j++) {
                    size_t m = mb * 4 + r, k = k4 * 4 + j;
                    *Wp++ = (m < M && k < K) ? W[m * K + k] : 0;
                }
}

#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#endif

/* 4 rows of 16 pixels -> 64 bytes [pixel][4]: the packed layout is a 4-row byte interleave */
static size_t pack4_simd(const uint8_t *r0, const uint8_t *r1, const uint8_t *r2, const uint8_t *r3,
                         size_t N, uint8_t flip, uint8_t *dst)
{
    size_t n = 0;
#if defined(__SSE2__)
    const __m128i f = _mm_set1_epi8((char)flip);
    for (; n + 16 <= N; n += 16) {
        __m128i a = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(r0 + n)), f);
        __m128i b = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(r1 + n)), f);
        __m128i c = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(r2 + n)), f);
        __m128i d = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(r3 + n)), f);
        __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
        __m128i cd0 = _mm_unpacklo_epi8(c, d), cd1 = _mm_unpackhi_epi8(c, d);
        _mm_storeu_si128((__m128i *)(dst + n * 4), _mm_unpacklo_epi16(ab0, cd0));
        _mm_storeu_si128((__m128i *)(dst + n * 4 + 16), _mm_unpackhi_epi16(ab0, cd0));
        _mm_storeu_si128((__m128i *)(dst + n * 4 + 32), _mm_unpacklo_epi16(ab1, cd1));
        _mm_storeu_si128((__m128i *)(dst + n * 4 + 48), _mm_unpackhi_epi16(ab1, cd1));
    }
#elif defined(__ARM_NEON) && defined(__aarch64__)
    const uint8x16_t f = vdupq_n_u8(flip);
    for (; n + 16 <= N; n += 16) {
        uint8x16x4_t v = {{veorq_u8(vld1q_u8(r0 + n), f), veorq_u8(vld1q_u8(r1 + n), f),
                           veorq_u8(vld1q_u8(r2 + n), f), veorq_u8(vld1q_u8(r3 + n), f)}};
        vst4q_u8(dst + n * 4, v);
    }
#else
    (void)r0; (void)r1; (void)r2; (void)r3; (void)N; (void)flip; (void)dst;
#endif
    return n;
}

void q8_pack_x(size_t K, size_t N, const uint8_t *X, size_t x_stride, uint8_t flip, uint8_t *Xp)
{
    const size_t np = q8_pack_np(N), K4 = (K + 3) / 4;
    for (size_t k4 = 0; k4 < K4; k4++) {
        uint8_t *dst = Xp + k4 * np * 4;
        const uint8_t *r[4];
        for (size_t j = 0; j < 4; j++)  /* rows past K read row 0: their weights are zero */
            r[j] = X + (k4 * 4 + j < K ? k4 * 4 + j : 0) * x_stride;
        size_t n = pack4_simd(r[0], r[1], r[2], r[3], N, flip, dst);
        for (; n < N; n++)
            for (size_t j = 0; j < 4; j++)
                dst[n * 4 + j] = r[j][n] ^ flip;
        memset(dst + N * 4, 0, (np - N) * 4); /* padding pixels: defined, discarded */
    }
}

/* One k row of the im2col matrix for a fixed (c, i, j): taps inside the image in one run. */
static void im2col_row(const q8_conv_shape *s, const uint8_t *xc, int i, int j, uint8_t pad,
                       uint8_t flip, uint8_t *dst)
{
    const int off = j * s->dw - s->pl; /* iw = ow * sw + off */
    int lo = off >= 0 ? 0 : (-off + s->sw - 1) / s->sw;
    int hi = s->W - 1 - off < 0 ? 0 : (s->W - 1 - off) / s->sw + 1;
    lo = lo > s->Wo ? s->Wo : lo;
    hi = hi > s->Wo ? s->Wo : hi < lo ? lo : hi;
    const uint8_t pv = pad ^ flip;
    for (int oh = 0; oh < s->Ho; oh++) {
        const int ih = oh * s->sh + i * s->dh - s->pt;
        uint8_t *d = dst + (size_t)oh * s->Wo * 4;
        if (ih < 0 || ih >= s->H) {
            for (int ow = 0; ow < s->Wo; ow++)
                d[ow * 4] = pv;
            continue;
        }
        const uint8_t *row = xc + (size_t)ih * s->W + off;
        int ow = 0;
        for (; ow < lo; ow++)
            d[ow * 4] = pv;
        for (; ow < hi; ow++)
            d[ow * 4] = row[ow * s->sw] ^ flip;
        for (; ow < s->Wo; ow++)
            d[ow * 4] = pv;
    }
}

void q8_pack_im2col(const q8_conv_shape *s, const uint8_t *x, uint8_t pad, uint8_t flip,
                    uint8_t *Xp)
{
    const size_t N = (size_t)s->Ho * s->Wo, np = q8_pack_np(N);
    const size_t K = (size_t)s->C * s->kh * s->kw, K4 = (K + 3) / 4;
    size_t k = 0;
    for (int c = 0; c < s->C; c++)
        for (int i = 0; i < s->kh; i++)
            for (int j = 0; j < s->kw; j++, k++)
                im2col_row(s, x + (size_t)c * s->H * s->W, i, j, pad, flip,
                           Xp + (k / 4) * np * 4 + (k % 4));
    for (; k < K4 * 4; k++) /* k padding: weights are zero there, keep the bytes defined */
        for (size_t n = 0; n < N; n++)
            Xp[((k / 4) * np + n) * 4 + k % 4] = 0;
    for (size_t k4 = 0; k4 < K4; k4++)
        memset(Xp + (k4 * np + N) * 4, 0, (np - N) * 4);
}
