/* Int8 MaxPool with AVX2. 2x2 stride 2 (windows inside the image): the max of a row pair, then of adjacent
 * bytes as u16 halves, 16 outputs per step; a short tail goes through a copy. 3x3 stride 2 (row_k3s2): border rows
 * too (over their in-image rows), an overlapping last step, border columns from their in-image taps. Any other
 * window with horizontal stride 1 or 2 and no horizontal dilation: as q8-maxpool-avx512.c (rows max-ed first, stride
 * 2 in u16 lanes), whole vectors only while their loads stay inside the row, the rest one output at a time. Other
 * shapes: the portable q8_maxpool. */
#include <immintrin.h>
#include <string.h>

#include "q8-eltwise.h"

static inline __m128i pool16(__m256i a, __m256i b)
{
    const __m256i v = _mm256_max_epu8(a, b);
    const __m256i h = _mm256_max_epu16(_mm256_and_si256(v, _mm256_set1_epi16(0xFF)), _mm256_srli_epi16(v, 8));
    return _mm_packus_epi16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

#define Q8_POOL_MAX_KH 16

/* outputs [0, n) of a row whose windows lie inside the image, rows r[], `room` bytes readable from r[i]:
 * returns how many were done (whole vectors) */
static size_t row_s1(const uint8_t *const *r, int kh, int kw, size_t n, size_t room, uint8_t *yr)
{
    size_t o = 0;
    for (; o + 32 <= n && o + 32 + (size_t)kw - 1 <= room; o += 32) {
        __m256i acc = _mm256_setzero_si256();
        for (int j = 0; j < kw; j++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(r[0] + o + j));
            for (int i = 1; i < kh; i++)
                v = _mm256_max_epu8(v, _mm256_loadu_si256((const __m256i *)(r[i] + o + j)));
            acc = _mm256_max_epu8(acc, v);
        }
        _mm256_storeu_si256((__m256i *)(yr + o), acc);
    }
    return o;
}

static size_t row_s2(const uint8_t *const *r, int kh, int kw, size_t n, size_t room, uint8_t *yr)
{
    const __m256i lo = _mm256_set1_epi16(0xFF);
    const size_t last = 2 * (size_t)((kw - 1) / 2) + 32; /* bytes a step reads past 2 o */
    size_t o = 0;
    for (; o + 16 <= n && 2 * o + last <= room; o += 16) {
        __m256i acc = _mm256_setzero_si256();
        for (int t = 0; 2 * t < kw; t++) { /* word q: taps 2t, 2t + 1 of output o + q */
            __m256i v = _mm256_loadu_si256((const __m256i *)(r[0] + 2 * o + 2 * t));
            for (int i = 1; i < kh; i++)
                v = _mm256_max_epu8(v, _mm256_loadu_si256((const __m256i *)(r[i] + 2 * o + 2 * t)));
            acc = _mm256_max_epu16(acc, _mm256_and_si256(v, lo));
            if (2 * t + 1 < kw)
                acc = _mm256_max_epu16(acc, _mm256_srli_epi16(v, 8));
        }
        _mm_storeu_si128((__m128i *)(yr + o), _mm_packus_epi16(_mm256_castsi256_si128(acc),
                                                               _mm256_extracti128_si256(acc, 1)));
    }
    return o;
}

/* 3-wide windows at stride 2 over the k (1..3) window rows inside the image (SqueezeNet's and ResNet's 3x3/2 pools),
 * n >= 8 outputs whose window columns lie inside the rows, 2 n + 1 bytes readable from each: 16 (or 8) outputs a
 * step from loads at 2 o (taps 0, 1 of each output in a word) and 2 o + 1 (tap 2 in the words' high bytes: no byte
 * past the last window's), the last step moved back to end at n (outputs computed twice, alike), instead of
 * copying the rows' tails and computing border rows one output at a time (3.5-8x the time) */
static inline __m256i rows_max256(const uint8_t *const *r, int k, size_t off)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)(r[0] + off));
    for (int i = 1; i < k; i++)
        v = _mm256_max_epu8(v, _mm256_loadu_si256((const __m256i *)(r[i] + off)));
    return v;
}

static inline __m128i rows_max128(const uint8_t *const *r, int k, size_t off)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(r[0] + off));
    for (int i = 1; i < k; i++)
        v = _mm_max_epu8(v, _mm_loadu_si128((const __m128i *)(r[i] + off)));
    return v;
}

static void row_k3s2(const uint8_t *const *r, int k, size_t n, uint8_t *yr)
{
    if (n >= 16) {
        const __m256i lo = _mm256_set1_epi16(0xFF);
        for (size_t o = 0;; o += 16) {
            if (o + 16 > n)
                o = n - 16;
            const __m256i a = rows_max256(r, k, 2 * o), b = rows_max256(r, k, 2 * o + 1);
            const __m256i h = _mm256_max_epu16(_mm256_max_epu16(_mm256_and_si256(a, lo), _mm256_srli_epi16(a, 8)),
                                               _mm256_srli_epi16(b, 8));
            _mm_storeu_si128((__m128i *)(yr + o),
                             _mm_packus_epi16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
            if (o + 16 >= n)
                return;
        }
    }
    const __m128i lo = _mm_set1_epi16(0xFF);
    for (size_t o = 0;; o += 8) {
        if (o + 8 > n)
            o = n - 8;
        const __m128i a = rows_max128(r, k, 2 * o), b = rows_max128(r, k, 2 * o + 1);
        const __m128i h = _mm_max_epi16(_mm_max_epi16(_mm_and_si128(a, lo), _mm_srli_epi16(a, 8)), _mm_srli_epi16(b, 8));
        _mm_storel_epi64((__m128i *)(yr + o), _mm_packus_epi16(h, h));
        if (o + 8 >= n)
            return;
    }
}

/* a border output of row_k3s2's rows: its window's taps at columns c0 .. c0 + 2 inside [0, W) (r[] point at column
 * base) */
static uint8_t border_k3s2(const uint8_t *const *r, int k, int c0, int base, int W)
{
    uint8_t m = 0;
    for (int c = c0 < 0 ? 0 : c0; c <= c0 + 2 && c < W; c++)
        for (int i = 0; i < k; i++)
            m = r[i][c - base] > m ? r[i][c - base] : m;
    return m;
}

static void pool_strided(const q8_pool_shape *s, const uint8_t *x, uint8_t *y)
{
    const int H = s->H, W = s->W, Ho = s->Ho, Wo = s->Wo;
    int lo, hi; /* the outputs whose window columns lie inside the image */
    q8_maxpool_cols(s, &lo, &hi);
    for (int p = 0; p < s->batch * s->C; p++) {
        const uint8_t *xc = x + (size_t)p * H * W;
        for (int oh = 0; oh < Ho; oh++) {
            uint8_t *yr = y + ((size_t)p * Ho + oh) * Wo;
            const int ih0 = oh * s->sh - s->pt, inside = ih0 >= 0 && ih0 + (s->kh - 1) * s->dh < H;
            int ow = 0;
            if (s->kh == 3 && s->kw == 3 && s->sw == 2 && hi - lo >= 8 &&
                (size_t)(W - (lo * 2 - s->pl)) >= 2 * (size_t)(hi - lo) + 1) {
                const uint8_t *r[3];
                int k = 0;
                for (int i = 0; i < 3; i++)
                    if (ih0 + i * s->dh >= 0 && ih0 + i * s->dh < H)
                        r[k++] = xc + (size_t)(ih0 + i * s->dh) * W + (size_t)(lo * 2 - s->pl);
                if (k) {
                    row_k3s2(r, k, (size_t)(hi - lo), yr + lo);
                    for (ow = 0; ow < lo; ow++)
                        yr[ow] = border_k3s2(r, k, 2 * ow - s->pl, 2 * lo - s->pl, W);
                    for (ow = hi; ow < Wo; ow++)
                        yr[ow] = border_k3s2(r, k, 2 * ow - s->pl, 2 * lo - s->pl, W);
                    continue;
                }
            }
            if (inside && hi > lo) {
                const uint8_t *r[Q8_POOL_MAX_KH];
                const int c0 = lo * s->sw - s->pl; /* the first vector output's first column */
                for (int i = 0; i < s->kh; i++)
                    r[i] = xc + (size_t)(ih0 + i * s->dh) * W + (size_t)c0;
                for (; ow < lo; ow++)
                    yr[ow] = q8_maxpool1(s, xc, oh, ow);
                const size_t room = (size_t)(W - c0), n = (size_t)(hi - lo);
                ow += (int)(s->sw == 1 ? row_s1(r, s->kh, s->kw, n, room, yr + lo)
                                       : row_s2(r, s->kh, s->kw, n, room, yr + lo));
                if (ow < hi) { /* inside the image, short of a whole vector: one step over copies of the rows */
                    uint8_t buf[Q8_POOL_MAX_KH][96], out[32]; /* 32 + kw bytes a row: kw <= 64 */
                    const uint8_t *t[Q8_POOL_MAX_KH];
                    const size_t c = (size_t)(ow - lo) * (size_t)s->sw, m = (size_t)(hi - ow);
                    const size_t len = (m - 1) * (size_t)s->sw + (size_t)s->kw; /* the window's bytes */
                    for (int i = 0; i < s->kh; i++) {
                        memcpy(buf[i], r[i] + c, len);
                        memset(buf[i] + len, 0, sizeof buf[i] - len); /* read only by discarded lanes */
                        t[i] = buf[i];
                    }
                    if (s->sw == 1)
                        row_s1(t, s->kh, s->kw, 32, sizeof buf[0], out);
                    else
                        row_s2(t, s->kh, s->kw, 16, sizeof buf[0], out);
                    memcpy(yr + ow, out, m);
                    ow = hi;
                }
            }
            for (; ow < Wo; ow++)
                yr[ow] = q8_maxpool1(s, xc, oh, ow);
        }
    }
}

void q8_maxpool__avx2(const q8_pool_shape *s, const uint8_t *x, uint8_t *y)
{
    if (!q8_maxpool_is_2x2s2(s)) {
        if ((s->sw == 1 || s->sw == 2) && s->dw == 1 && s->kh <= Q8_POOL_MAX_KH && s->kw <= 64)
            pool_strided(s, x, y);
        else
            q8_maxpool(s, x, y);
        return;
    }
    const size_t H = (size_t)s->H, W = (size_t)s->W, Ho = (size_t)s->Ho, Wo = (size_t)s->Wo;
    const size_t planes = (size_t)s->batch * s->C;
    for (size_t p = 0; p < planes; p++)
        for (size_t oh = 0; oh < Ho; oh++) {
            const uint8_t *a = x + (p * H + 2 * oh) * W, *b = a + W;
            uint8_t *yr = y + (p * Ho + oh) * Wo;
            size_t o0 = 0;
            for (; o0 + 16 <= Wo; o0 += 16)
                _mm_storeu_si128((__m128i *)(yr + o0), pool16(_mm256_loadu_si256((const __m256i *)(a + 2 * o0)),
                                                              _mm256_loadu_si256((const __m256i *)(b + 2 * o0))));
            if (Wo - o0 >= 8) { /* a long tail: one vector step through a copy */
                uint8_t ta[32] = {0}, tb[32] = {0}, t[16];
                memcpy(ta, a + 2 * o0, 2 * (Wo - o0));
                memcpy(tb, b + 2 * o0, 2 * (Wo - o0));
                _mm_storeu_si128((__m128i *)t, pool16(_mm256_loadu_si256((const __m256i *)ta),
                                                      _mm256_loadu_si256((const __m256i *)tb)));
                memcpy(yr + o0, t, Wo - o0);
                o0 = Wo;
            }
            /* a short one byte by byte: on small maps (8x8 -> 4x4) the copies cost 4x the arithmetic */
            for (; o0 < Wo; o0++) {
                const uint8_t m0 = a[2 * o0] > a[2 * o0 + 1] ? a[2 * o0] : a[2 * o0 + 1];
                const uint8_t m1 = b[2 * o0] > b[2 * o0 + 1] ? b[2 * o0] : b[2 * o0 + 1];
                yr[o0] = m0 > m1 ? m0 : m1;
            }
        }
}
