/* Packing for the q8 GEMM (layouts in q8-gemm.h). Weights are packed once at compile time
 * by the Python emitter with the same layout; this C version serves tests and tools. */
#include <string.h>

#include "q8-gemm.h"

/* W [M][K] -> panels of `rows` rows: [ceil(M/rows)][K4][rows][4 k], zero past M and K */
static void pack_panels(size_t M, size_t K, const int8_t *W, int8_t *Wp, size_t rows)
{
    const size_t K4 = (K + 3) / 4;
    for (size_t mb = 0; mb < (M + rows - 1) / rows; mb++)
        for (size_t k4 = 0; k4 < K4; k4++)
            for (size_t r = 0; r < rows; r++)
                for (size_t j = 0; j < 4; j++) {
                    const size_t m = mb * rows + r, k = k4 * 4 + j;
                    *Wp++ = (m < M && k < K) ? W[m * K + k] : 0;
                }
}

void q8_pack_w(size_t M, size_t K, const int8_t *W, int8_t *Wp) { pack_panels(M, K, W, Wp, 4); }

void q8_pack_w_c32(size_t M, size_t K, const int8_t *W, int8_t *Wp) { pack_panels(M, K, W, Wp, 32); }

void q8_pack_w_amx(size_t M, size_t K, const int8_t *W, int8_t *Wp)
{
    const size_t K4 = (K + 3) / 4, kb = q8_amx_kb(K4), nb = (K4 + kb - 1) / kb;
    memset(Wp, 0, q8_pack_w_amx_bytes(M, K));
    for (size_t m = 0; m < M; m++)
        for (size_t b = 0; b < nb; b++) {
            const size_t s = b * kb < K4 - kb ? b * kb : K4 - kb;
            int8_t *dst = Wp + (((m / 16) * nb + b) * 16 + m % 16) * kb * 4;
            for (size_t j = 0; j < kb * 4; j++) {
                const size_t k = s * 4 + j;
                if (k >= b * kb * 4 && k < K) /* k4 below b kb: the block before covered them */
                    dst[j] = W[m * K + k];
            }
        }
}

#if defined(__AVX512BW__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#endif

#if defined(__AVX512BW__)
/* the low n of 64 lanes (n <= 64) */
static inline __mmask64 mask64(size_t n) { return n >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << n) - 1; }

/* 4 rows of 64 pixels -> [pixel][4] bytes, the first n pixels (n <= 64) stored: the byte / word unpacks work per
 * 128-bit lane (u[t] lane L = pixels 16L + 4t ..), then a 4x4 transpose of lanes; a third of the SSE2 steps'
 * instructions (K = 200 inputs: packing took as long as the VNNI GEMM) */
static inline void interleave4_64(__m512i a, __m512i b, __m512i c, __m512i d, uint8_t *dst, size_t n)
{
    const __m512i ab0 = _mm512_unpacklo_epi8(a, b), ab1 = _mm512_unpackhi_epi8(a, b);
    const __m512i cd0 = _mm512_unpacklo_epi8(c, d), cd1 = _mm512_unpackhi_epi8(c, d);
    const __m512i u0 = _mm512_unpacklo_epi16(ab0, cd0), u1 = _mm512_unpackhi_epi16(ab0, cd0);
    const __m512i u2 = _mm512_unpacklo_epi16(ab1, cd1), u3 = _mm512_unpackhi_epi16(ab1, cd1);
    /* out block m = lanes m of u0..u3 */
    const __m512i t0 = _mm512_shuffle_i32x4(u0, u1, 0x44), t1 = _mm512_shuffle_i32x4(u0, u1, 0xEE);
    const __m512i t2 = _mm512_shuffle_i32x4(u2, u3, 0x44), t3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
    const __m512i o[4] = {_mm512_shuffle_i32x4(t0, t2, 0x88), _mm512_shuffle_i32x4(t0, t2, 0xDD),
                          _mm512_shuffle_i32x4(t1, t3, 0x88), _mm512_shuffle_i32x4(t1, t3, 0xDD)};
    if (n >= 64) {
        for (int m = 0; m < 4; m++)
            _mm512_storeu_si512(dst + 64 * m, o[m]);
        return;
    }
    for (size_t m = 0; 16 * m < n; m++)
        _mm512_mask_storeu_epi8(dst + 64 * m, mask64(4 * (n - 16 * m)), o[m]);
}
#endif

/* 4 rows of N pixels -> [pixel][4] bytes (the packed layout is a 4-row byte interleave); returns how many pixels it
 * did (the rest is the caller's). Reads no byte past a row's pixels: AVX-512 ends a row with a masked step (the
 * 7- and 14-pixel rows of small maps took a byte loop). */
static size_t pack4_simd(const uint8_t *r0, const uint8_t *r1, const uint8_t *r2, const uint8_t *r3,
                         size_t N, uint8_t flip, uint8_t *dst)
{
    size_t n = 0;
#if defined(__AVX512BW__)
    const __m512i fz = _mm512_set1_epi8((char)flip);
#define Q8_ROW64(r, m) _mm512_xor_si512(_mm512_maskz_loadu_epi8((m), (r) + n), fz)
    for (; n + 64 <= N; n += 64)
        interleave4_64(Q8_ROW64(r0, ~(__mmask64)0), Q8_ROW64(r1, ~(__mmask64)0), Q8_ROW64(r2, ~(__mmask64)0),
                       Q8_ROW64(r3, ~(__mmask64)0), dst + n * 4, 64);
    if (n < N) {
        const __mmask64 m = mask64(N - n);
        interleave4_64(Q8_ROW64(r0, m), Q8_ROW64(r1, m), Q8_ROW64(r2, m), Q8_ROW64(r3, m), dst + n * 4, N - n);
        n = N;
    }
#undef Q8_ROW64
#elif defined(__SSE2__)
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
    for (; n + 8 <= N; n += 8) { /* small feature maps: 8 pixels from 64-bit loads */
        __m128i a = _mm_xor_si128(_mm_loadl_epi64((const __m128i *)(r0 + n)), f);
        __m128i b = _mm_xor_si128(_mm_loadl_epi64((const __m128i *)(r1 + n)), f);
        __m128i c = _mm_xor_si128(_mm_loadl_epi64((const __m128i *)(r2 + n)), f);
        __m128i d = _mm_xor_si128(_mm_loadl_epi64((const __m128i *)(r3 + n)), f);
        __m128i ab = _mm_unpacklo_epi8(a, b), cd = _mm_unpacklo_epi8(c, d);
        _mm_storeu_si128((__m128i *)(dst + n * 4), _mm_unpacklo_epi16(ab, cd));
        _mm_storeu_si128((__m128i *)(dst + n * 4 + 16), _mm_unpackhi_epi16(ab, cd));
    }
#elif defined(__ARM_NEON) && defined(__aarch64__)
    const uint8x16_t f = vdupq_n_u8(flip);
    for (; n + 16 <= N; n += 16) {
        uint8x16x4_t v = {{veorq_u8(vld1q_u8(r0 + n), f), veorq_u8(vld1q_u8(r1 + n), f),
                           veorq_u8(vld1q_u8(r2 + n), f), veorq_u8(vld1q_u8(r3 + n), f)}};
        vst4q_u8(dst + n * 4, v);
    }
    for (; n + 8 <= N; n += 8) {
        uint8x8x4_t v = {{veor_u8(vld1_u8(r0 + n), vget_low_u8(f)), veor_u8(vld1_u8(r1 + n), vget_low_u8(f)),
                          veor_u8(vld1_u8(r2 + n), vget_low_u8(f)), veor_u8(vld1_u8(r3 + n), vget_low_u8(f))}};
        vst4_u8(dst + n * 4, v);
    }
#else
    (void)r0; (void)r1; (void)r2; (void)r3; (void)N; (void)flip; (void)dst;
#endif
    return n;
}

/* Stride 2: the even bytes of each of 4 rows (pixel i at byte 2 i), interleaved as in pack4_simd; reads no byte past
 * the last pixel's. AVX-512: 64 pixels a step from 127 bytes (vpermt2b with VBMI, else two vpmovwb: the stem's
 * im2col took 6 of its 10 us in 16-pixel SSE2 steps) and a masked last step (ResNet-50's stride-2 3x3s on 28- and
 * 14-pixel rows spent 60 us each in the byte loop); SSE2: 16 from 31 bytes (mask + pack), the rest the caller's. */
static size_t pack4_s2_simd(const uint8_t *r0, const uint8_t *r1, const uint8_t *r2, const uint8_t *r3,
                            size_t N, uint8_t flip, uint8_t *dst)
{
    size_t n = 0;
#if defined(__AVX512BW__)
    const __m512i fz = _mm512_set1_epi8((char)flip);
#if defined(__AVX512VBMI__)
    uint8_t ev[64];
    for (int i = 0; i < 64; i++)
        ev[i] = (uint8_t)(2 * i);
    const __m512i even64 = _mm512_loadu_si512(ev);
#define Q8_EVEN64(r, ml, mh) _mm512_xor_si512(_mm512_permutex2var_epi8(_mm512_maskz_loadu_epi8((ml), (r) + 2 * n), \
                                              even64, _mm512_maskz_loadu_epi8((mh), (r) + 2 * n + 64)), fz)
#else
#define Q8_EVEN64(r, ml, mh) _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8( \
                                              _mm512_maskz_loadu_epi8((ml), (r) + 2 * n))), \
                                              _mm512_cvtepi16_epi8(_mm512_maskz_loadu_epi8((mh), (r) + 2 * n + 64)), 1), fz)
#endif
    const __mmask64 all = ~(__mmask64)0, m63 = mask64(63);
    for (; n + 64 <= N; n += 64) /* bytes 2n .. 2n + 126: pixel n + 63's is the last */
        interleave4_64(Q8_EVEN64(r0, all, m63), Q8_EVEN64(r1, all, m63), Q8_EVEN64(r2, all, m63),
                       Q8_EVEN64(r3, all, m63), dst + n * 4, 64);
    if (n < N) {
        const size_t bytes = 2 * (N - n) - 1;
        const __mmask64 ml = mask64(bytes), mh = mask64(bytes > 64 ? bytes - 64 : 0);
        interleave4_64(Q8_EVEN64(r0, ml, mh), Q8_EVEN64(r1, ml, mh), Q8_EVEN64(r2, ml, mh), Q8_EVEN64(r3, ml, mh),
                       dst + n * 4, N - n);
        n = N;
    }
#undef Q8_EVEN64
#elif defined(__SSE2__)
    const __m128i f = _mm_set1_epi8((char)flip), even = _mm_set1_epi16(0x00FF);
#define Q8_EVEN16(r) _mm_xor_si128(_mm_packus_epi16(_mm_and_si128(_mm_loadu_si128((const __m128i *)((r) + 2 * n)), even), \
                                                    _mm_and_si128(_mm_loadu_si128((const __m128i *)((r) + 2 * n + 16)), even)), f)
    for (; n + 16 < N; n += 16) { /* bytes 2n .. 2n + 31: pixel n + 16 exists */
        __m128i a = Q8_EVEN16(r0), b = Q8_EVEN16(r1), c = Q8_EVEN16(r2), d = Q8_EVEN16(r3);
        __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
        __m128i cd0 = _mm_unpacklo_epi8(c, d), cd1 = _mm_unpackhi_epi8(c, d);
        _mm_storeu_si128((__m128i *)(dst + n * 4), _mm_unpacklo_epi16(ab0, cd0));
        _mm_storeu_si128((__m128i *)(dst + n * 4 + 16), _mm_unpackhi_epi16(ab0, cd0));
        _mm_storeu_si128((__m128i *)(dst + n * 4 + 32), _mm_unpacklo_epi16(ab1, cd1));
        _mm_storeu_si128((__m128i *)(dst + n * 4 + 48), _mm_unpackhi_epi16(ab1, cd1));
    }
#undef Q8_EVEN16
#else
    (void)r0; (void)r1; (void)r2; (void)r3; (void)N; (void)flip; (void)dst;
#endif
    return n;
}

void q8_pack_x(size_t K, size_t N, const uint8_t *X, size_t x_stride, uint8_t flip, uint8_t *Xp)
{
    q8_pack_x_k4(K, N, X, x_stride, flip, Xp, 0, (K + 3) / 4);
}

void q8_pack_x_k4(size_t K, size_t N, const uint8_t *X, size_t x_stride, uint8_t flip, uint8_t *Xp, size_t k4b,
                  size_t k4e)
{
    const size_t np = q8_pack_np(N);
    for (size_t k4 = k4b; k4 < k4e; k4++) {
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

/* The group's input padded with the zero point (channels [c0, c1)): every tap of the kernel window is then in
 * bounds. */
void q8_im2col_pad(const q8_conv_shape *s, const uint8_t *x, uint8_t pad, uint8_t *dst, int c0, int c1)
{
    const size_t hp = q8_im2col_hp(s), wp = q8_im2col_wp(s);
    for (int c = c0; c < c1; c++)
        for (size_t r = 0; r < hp; r++) {
            uint8_t *d = dst + ((size_t)c * hp + r) * wp;
            const int ih = (int)r - s->pt;
            if (ih < 0 || ih >= s->H) {
                memset(d, pad, wp);
                continue;
            }
            const int lo = s->pl < (int)wp ? s->pl : (int)wp;
            const int n = s->W < (int)wp - lo ? s->W : (int)wp - lo;
            const uint8_t *src = x + ((size_t)c * s->H + ih) * s->W;
            /* rows of small maps are a few bytes: plain loops beat libc calls there */
            for (int i = 0; i < lo; i++)
                d[i] = pad;
            if (n >= 64)
                memcpy(d + lo, src, (size_t)n);
            else
                for (int i = 0; i < n; i++)
                    d[lo + i] = src[i];
            for (size_t i = (size_t)(lo + n); i < wp; i++)
                d[i] = pad;
        }
}

void q8_pack_im2col(const q8_conv_shape *s, const uint8_t *x, uint8_t pad, uint8_t flip,
                    uint8_t *Xp, uint8_t *tmp)
{
    q8_im2col_pad(s, x, pad, tmp, 0, s->C);
    q8_im2col_k4(s, flip, Xp, tmp, 0, ((size_t)s->C * s->kh * s->kw + 3) / 4);
}

/* im2col's k4 groups [k4b, k4e) from src, channel planes hp x wp: the padded copy, or the input itself where the
 * window never leaves it (the vector steps read no byte past a row's last pixel) */
static void im2col_k4_from(const q8_conv_shape *s, uint8_t flip, uint8_t *Xp, const uint8_t *src, size_t hp, size_t wp,
                           size_t k4b, size_t k4e)
{
    const size_t N = (size_t)s->Ho * s->Wo, np = q8_pack_np(N), K = (size_t)s->C * s->kh * s->kw;
    const size_t taps = (size_t)s->kh * s->kw;
    for (size_t k4 = k4b; k4 < k4e; k4++) {
        const uint8_t *b[4];
        for (size_t j = 0; j < 4; j++) { /* k = (c, i, jj); rows past K reuse k = 0 (zero weights) */
            const size_t k = k4 * 4 + j < K ? k4 * 4 + j : 0, c = k / taps, t = k % taps;
            b[j] = src + (c * hp + (t / s->kw) * s->dh) * wp + (t % s->kw) * s->dw;
        }
        uint8_t *dst = Xp + k4 * np * 4;
        for (int oh = 0; oh < s->Ho; oh++) {
            const size_t ro = (size_t)oh * s->sh * wp;
            uint8_t *d = dst + (size_t)oh * s->Wo * 4;
            size_t ow = s->sw == 1 ? pack4_simd(b[0] + ro, b[1] + ro, b[2] + ro, b[3] + ro, (size_t)s->Wo, flip, d)
                      : s->sw == 2 ? pack4_s2_simd(b[0] + ro, b[1] + ro, b[2] + ro, b[3] + ro, (size_t)s->Wo, flip, d)
                                   : 0;
            for (; ow < (size_t)s->Wo; ow++)
                for (size_t j = 0; j < 4; j++)
                    d[ow * 4 + j] = b[j][ro + ow * s->sw] ^ flip;
        }
        memset(dst + N * 4, 0, (np - N) * 4);
    }
}

void q8_im2col_k4(const q8_conv_shape *s, uint8_t flip, uint8_t *Xp, const uint8_t *tmp, size_t k4b, size_t k4e)
{
    im2col_k4_from(s, flip, Xp, tmp, q8_im2col_hp(s), q8_im2col_wp(s), k4b, k4e);
}

void q8_im2col_direct_k4(const q8_conv_shape *s, const uint8_t *x, uint8_t flip, uint8_t *Xp, size_t k4b, size_t k4e)
{
    im2col_k4_from(s, flip, Xp, x, (size_t)s->H, (size_t)s->W, k4b, k4e);
}

void q8_pack_pad4(const q8_conv_shape *s, const uint8_t *x, uint8_t pad, uint8_t flip, uint8_t *dst, size_t c4b,
                  size_t c4e)
{
    const size_t sh = (size_t)s->sh, sw = (size_t)s->sw, hq = q8_pad4_hq(s), wq = q8_pad4_wq(s);
    const size_t W = (size_t)s->W, HW = (size_t)s->H * W, pl = (size_t)s->pl;
    const uint8_t pv = (uint8_t)(pad ^ flip);
    for (size_t c4 = c4b; c4 < c4e; c4++) {
        const uint8_t *src[4];
        int whole = 1; /* all 4 channels exist: rows interleaved by the SIMD steps */
        for (size_t j = 0; j < 4; j++) {
            const size_t c = c4 * 4 + j;
            src[j] = c < (size_t)s->C ? x + c * HW : NULL;
            whole &= src[j] != NULL;
        }
        for (size_t py = 0; py < sh; py++)
            for (size_t px = 0; px < sw; px++) {
                uint8_t *d0 = dst + ((c4 * sh + py) * sw + px) * hq * wq * 4;
                /* columns [c0, c1) of this phase fall inside the image, from image column c0 sw + px - pl on */
                size_t c0 = pl > px ? (pl - px + sw - 1) / sw : 0, c1 = W + pl > px ? (W + pl - px + sw - 1) / sw : 0;
                c1 = c1 < wq ? c1 : wq;
                c0 = c0 < c1 ? c0 : c1;
                for (size_t r = 0; r < hq; r++) {
                    uint8_t *d = d0 + r * wq * 4;
                    const long ih = (long)(r * sh + py) - s->pt;
                    if (ih < 0 || ih >= s->H || c0 == c1) {
                        memset(d, pv, wq * 4);
                        continue;
                    }
                    memset(d, pv, c0 * 4);
                    memset(d + c1 * 4, pv, (wq - c1) * 4);
                    const size_t col = c0 * sw + px - pl, ro = (size_t)ih * W + col, n = c1 - c0;
                    uint8_t *di = d + c0 * 4;
                    size_t i = 0;
                    if (whole && sw == 1)
                        i = pack4_simd(src[0] + ro, src[1] + ro, src[2] + ro, src[3] + ro, n, flip, di);
                    else if (whole && sw == 2)
                        i = pack4_s2_simd(src[0] + ro, src[1] + ro, src[2] + ro, src[3] + ro, n, flip, di);
                    for (; i < n; i++)
                        for (size_t j = 0; j < 4; j++)
                            di[i * 4 + j] = src[j] ? (uint8_t)(src[j][ro + i * sw] ^ flip) : pv;
                }
            }
    }
}

void q8_pack_pad4_c4(const q8_conv_shape *s, const uint8_t *x, uint8_t pad, uint8_t *dst, size_t c4b, size_t c4e)
{
    const size_t hq = q8_pad4_hq(s), wq = q8_pad4_wq(s), W = (size_t)s->W, np = q8_pack_np((size_t)s->H * W);
    const size_t c0 = (size_t)s->pl < wq ? (size_t)s->pl : wq, c1 = W + (size_t)s->pl < wq ? W + (size_t)s->pl : wq;
    for (size_t c4 = c4b; c4 < c4e; c4++) {
        const uint8_t *src = x + c4 * np * 4;
        uint8_t *d = dst + c4 * hq * wq * 4;
        for (size_t r = 0; r < hq; r++, d += wq * 4) {
            const long ih = (long)r - s->pt;
            if (ih < 0 || ih >= s->H) {
                memset(d, pad, wq * 4);
                continue;
            }
            memset(d, pad, c0 * 4);
            memcpy(d + c0 * 4, src + (size_t)ih * W * 4, (c1 - c0) * 4); /* the row's pixels are 4 bytes each */
            memset(d + c1 * 4, pad, (wq - c1) * 4);
        }
    }
}

void q8_im2col_direct_c4(const q8_conv_shape *s, const uint8_t *x, uint8_t *Xp, size_t c4b, size_t c4e)
{
    const size_t W = (size_t)s->W, npi = q8_pack_np((size_t)s->H * W), Ho = (size_t)s->Ho, Wo = (size_t)s->Wo;
    const size_t N = Ho * Wo, np = q8_pack_np(N), sh = (size_t)s->sh, sw = (size_t)s->sw;
    for (size_t c4 = c4b; c4 < c4e; c4++) {
        const uint8_t *src = x + c4 * npi * 4;
        uint8_t *d = Xp + c4 * np * 4;
        for (size_t oh = 0; oh < Ho; oh++)
            for (size_t ow = 0; ow < Wo; ow++)
                memcpy(d + (oh * Wo + ow) * 4, src + (oh * sh * W + ow * sw) * 4, 4);
        memset(d + N * 4, 0, (np - N) * 4);
    }
}

void q8_unpack_c4(size_t C, size_t HW, const uint8_t *x, uint8_t *y, size_t c4b, size_t c4e)
{
    const size_t np = q8_pack_np(HW);
    for (size_t c4 = c4b; c4 < c4e; c4++) {
        const uint8_t *src = x + c4 * np * 4;
        const size_t nc = C - 4 * c4 < 4 ? C - 4 * c4 : 4;
        for (size_t j = 0; j < nc; j++) {
            uint8_t *d = y + (4 * c4 + j) * HW;
            for (size_t p = 0; p < HW; p++)
                d[p] = src[p * 4 + j];
        }
    }
}
