/* Int8 MaxPool with AVX-512BW. 2x2 stride 2 (windows inside the image): the max of a row pair, then of
 * adjacent bytes as u16 halves, 32 outputs per step, masked tails (narrow maps: no per-byte loop); rows of at
 * most 32 bytes several row pairs a step. Any other window with horizontal stride 1 or 2 and no horizontal
 * dilation: the outputs whose windows lie inside the image a vector at a time (stride 1: 64 bytes per tap;
 * stride 2: 32 outputs in u16 lanes, a load's word o holding taps 2t and 2t + 1 of output o), border outputs
 * included (padding never wins a max of u8 values: masked off). SqueezeNet's 3x3 stride-2 pools ran the portable
 * loop at ~2 bytes a ns. Other shapes: the portable q8_maxpool. */
#include <immintrin.h>

#include "q8-eltwise.h"

#define Q8_POOL_MAX_KH 16

static inline __mmask64 first_bytes(size_t n) { return n >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << n) - 1; }

/* bytes [a, b) of a 64-byte load, clipped to it */
static inline __mmask64 byte_range(long a, long b)
{
    a = a < 0 ? 0 : a;
    b = b > 64 ? 64 : b;
    return b <= a ? 0 : first_bytes((size_t)b) & ~first_bytes((size_t)a);
}

/* Outputs [0, n) of one row from the window rows r[0..kh) (in-image rows only), r[i] at output 0's first window
 * column, which may lie left of the image: bytes of a load outside the image's columns [c0, c1) (relative to
 * r[i]) are masked off, read as zeros, which never win a max of u8 values. So border outputs take the vector steps
 * too (ResNet-50's 3x3 stride-2 pool spent half its time on the top row and left column one output at a time).
 * The window's rows max-ed first (one max per row and load), then its taps: the masks are per step, not per load
 * (computed per load, the scalar work outran the vector work 3 to 1). */
static inline __attribute__((always_inline)) void row_s1(const uint8_t *const *r, int kh, int kw, size_t n, long c0,
                                                         long c1, uint8_t *yr)
{
    for (size_t o = 0; o < n; o += 64) {
        const __mmask64 mo = first_bytes(n - o);
        __m512i acc = _mm512_setzero_si512();
        for (int j = 0; j < kw; j++) {
            const long off = (long)o + j;
            const __mmask64 m = mo & byte_range(c0 - off, c1 - off);
            __m512i v = _mm512_maskz_loadu_epi8(m, r[0] + off);
            for (int i = 1; i < kh; i++)
                v = _mm512_max_epu8(v, _mm512_maskz_loadu_epi8(m, r[i] + off));
            acc = _mm512_max_epu8(acc, v);
        }
        _mm512_mask_storeu_epi8(yr + o, mo, acc);
    }
}

static inline __attribute__((always_inline)) void row_s2(const uint8_t *const *r, int kh, int kw, size_t n, long c0,
                                                         long c1, uint8_t *yr)
{
    const __m512i lo = _mm512_set1_epi16(0xFF);
    for (size_t o = 0; o < n; o += 32) {
        const size_t k = n - o < 32 ? n - o : 32;
        /* taps 2t, 2t + 1 of output o + q: word q at byte 2 (o + q) + 2t; a last tap alone leaves its pair's byte
         * unread */
        const __mmask64 mp = first_bytes(2 * k), ms = first_bytes(2 * k - 1);
        __m512i acc = _mm512_setzero_si512();
        for (int t = 0; 2 * t < kw; t++) {
            const int pair = 2 * t + 1 < kw;
            const long off = 2 * (long)o + 2 * t;
            const __mmask64 m = (pair ? mp : ms) & byte_range(c0 - off, c1 - off);
            __m512i v = _mm512_maskz_loadu_epi8(m, r[0] + off);
            for (int i = 1; i < kh; i++)
                v = _mm512_max_epu8(v, _mm512_maskz_loadu_epi8(m, r[i] + off));
            acc = _mm512_max_epu16(acc, _mm512_and_si512(v, lo));
            if (pair)
                acc = _mm512_max_epu16(acc, _mm512_srli_epi16(v, 8));
        }
        _mm256_mask_storeu_epi8(yr + o, (__mmask32)(((uint64_t)1 << k) - 1), _mm512_cvtepi16_epi8(acc));
    }
}

#if defined(__AVX512VBMI__)
#define Q8_POOL_K3S2_STEPS 64 /* 63-output steps a row: widths up to 4032 outputs */
/* 3-wide windows at horizontal stride 2 (SqueezeNet's and ResNet's 3x3/2 pools, any window height, row stride,
 * padding): the window's rows max-ed over 128 input bytes, then vpermt2b picks each output's three taps (bytes 2j,
 * 2j + 1, 2j + 2) as three vectors: 63 outputs from 2 loads a row and 5 vector operations, the load masks (image
 * columns only) computed once per step for every plane and row. The 32-output u16 steps took ~4x as long. */
/* output j of a step: the max of bytes 2j, 2j + 1, 2j + 2 of the 128 bytes v0 | v1 (index vectors E, O, E2) */
static inline __m512i taps3(__m512i v0, __m512i v1, __m512i E, __m512i O, __m512i E2)
{
    const __m512i a = _mm512_max_epu8(_mm512_permutex2var_epi8(v0, E, v1), _mm512_permutex2var_epi8(v0, O, v1));
    return _mm512_max_epu8(a, _mm512_permutex2var_epi8(v0, E2, v1));
}

static void pool_k3s2(const q8_pool_shape *s, const uint8_t *x, uint8_t *y)
{
    const int H = s->H, W = s->W, Ho = s->Ho, Wo = s->Wo;
    uint8_t ie[64], io[64], i2[64];
    for (int i = 0; i < 64; i++)
        ie[i] = (uint8_t)(2 * i), io[i] = (uint8_t)(2 * i + 1), i2[i] = (uint8_t)(i < 63 ? 2 * i + 2 : 127);
    const __m512i E = _mm512_loadu_si512(ie), O = _mm512_loadu_si512(io), E2 = _mm512_loadu_si512(i2);
    __mmask64 m0[Q8_POOL_K3S2_STEPS], m1[Q8_POOL_K3S2_STEPS], mo[Q8_POOL_K3S2_STEPS];
    const int steps = (Wo + 62) / 63;
    for (int t = 0; t < steps; t++) {
        const int n = Wo - 63 * t < 63 ? Wo - 63 * t : 63;
        const long base = 126L * t - s->pl, end = 2L * n + 1 < W - base ? 2L * n + 1 : W - base; /* bytes used */
        m0[t] = byte_range(-base, end), m1[t] = byte_range(-base - 64, end - 64), mo[t] = first_bytes((size_t)n);
    }
    /* output rows whose 3 window rows are all in the image, when a row is one step: the loop below spent ~100
     * instructions a row on finding its rows and steps (23 cycles a row with the input in L1) */
    int in0 = 0, in1 = 0;
    if (s->kh == 3 && steps == 1) {
        while (in0 < Ho && in0 * s->sh - s->pt < 0)
            in0++;
        in1 = in0;
        while (in1 < Ho && in1 * s->sh - s->pt + 2 * s->dh < H)
            in1++;
    }
    for (int p = 0; p < s->batch * s->C; p++) {
        const uint8_t *xc = x + (size_t)p * H * W;
        if (in1 > in0) {
            const size_t rs = (size_t)s->sh * W, d = (size_t)s->dh * W;
            const uint8_t *r0 = xc + (size_t)(in0 * s->sh - s->pt) * W - s->pl;
            uint8_t *yr = y + ((size_t)p * Ho + in0) * Wo;
            for (int oh = in0; oh < in1; oh++, r0 += rs, yr += Wo) {
                const __m512i v0 = _mm512_max_epu8(_mm512_max_epu8(_mm512_maskz_loadu_epi8(m0[0], r0),
                                                                   _mm512_maskz_loadu_epi8(m0[0], r0 + d)),
                                                   _mm512_maskz_loadu_epi8(m0[0], r0 + 2 * d));
                const __m512i v1 = _mm512_max_epu8(_mm512_max_epu8(_mm512_maskz_loadu_epi8(m1[0], r0 + 64),
                                                                   _mm512_maskz_loadu_epi8(m1[0], r0 + d + 64)),
                                                   _mm512_maskz_loadu_epi8(m1[0], r0 + 2 * d + 64));
                _mm512_mask_storeu_epi8(yr, mo[0], taps3(v0, v1, E, O, E2));
            }
        }
        for (int oh = 0; oh < Ho; oh++) {
            if (oh == in0 && in1 > in0) /* done above */
                oh = in1;
            if (oh >= Ho)
                break;
            uint8_t *yr = y + ((size_t)p * Ho + oh) * Wo;
            const uint8_t *r[Q8_POOL_MAX_KH];
            int rows = 0;
            for (int i = 0; i < s->kh; i++) {
                const int ih = oh * s->sh - s->pt + i * s->dh;
                if (ih >= 0 && ih < H)
                    r[rows++] = xc + (size_t)ih * W - s->pl;
            }
            for (int t = 0; t < steps; t++) {
                __m512i v0 = _mm512_setzero_si512(), v1 = _mm512_setzero_si512(); /* no rows: all padding, 0 */
                for (int i = 0; i < rows; i++) {
                    v0 = _mm512_max_epu8(v0, _mm512_maskz_loadu_epi8(m0[t], r[i] + 126 * t));
                    v1 = _mm512_max_epu8(v1, _mm512_maskz_loadu_epi8(m1[t], r[i] + 126 * t + 64));
                }
                _mm512_mask_storeu_epi8(yr + 63 * t, mo[t], taps3(v0, v1, E, O, E2));
            }
        }
    }
}
#endif

static void pool_strided(const q8_pool_shape *s, const uint8_t *x, uint8_t *y)
{
    const int H = s->H, W = s->W, Ho = s->Ho, Wo = s->Wo;
    for (int p = 0; p < s->batch * s->C; p++) {
        const uint8_t *xc = x + (size_t)p * H * W;
        for (int oh = 0; oh < Ho; oh++) {
            uint8_t *yr = y + ((size_t)p * Ho + oh) * Wo;
            const uint8_t *r[Q8_POOL_MAX_KH];
            int rows = 0; /* the window's rows inside the image */
            for (int i = 0; i < s->kh; i++) {
                const int ih = oh * s->sh - s->pt + i * s->dh;
                if (ih >= 0 && ih < H)
                    r[rows++] = xc + (size_t)ih * W - s->pl; /* output 0's first window column */
            }
            if (!rows) { /* a window all padding */
                for (int ow = 0; ow < Wo; ow++)
                    yr[ow] = 0;
                continue;
            }
            /* 3x3 windows (SqueezeNet's and ResNet's pools) compiled with their sizes: 1.3x the generic loops */
            const int k3 = rows == 3 && s->kw == 3;
            if (s->sw == 1 && k3)
                row_s1(r, 3, 3, (size_t)Wo, s->pl, (long)s->pl + W, yr);
            else if (s->sw == 1)
                row_s1(r, rows, s->kw, (size_t)Wo, s->pl, (long)s->pl + W, yr);
            else if (k3)
                row_s2(r, 3, 3, (size_t)Wo, s->pl, (long)s->pl + W, yr);
            else
                row_s2(r, rows, s->kw, (size_t)Wo, s->pl, (long)s->pl + W, yr);
        }
    }
}

void q8_maxpool__avx512(const q8_pool_shape *s, const uint8_t *x, uint8_t *y)
{
    if (!q8_maxpool_is_2x2s2(s)) {
#if defined(__AVX512VBMI__)
        if (s->kw == 3 && s->sw == 2 && s->dw == 1 && s->kh <= Q8_POOL_MAX_KH && s->Wo <= 63 * Q8_POOL_K3S2_STEPS)
            pool_k3s2(s, x, y);
        else
#endif
        if ((s->sw == 1 || s->sw == 2) && s->dw == 1 && s->kh <= Q8_POOL_MAX_KH)
            pool_strided(s, x, y);
        else
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
