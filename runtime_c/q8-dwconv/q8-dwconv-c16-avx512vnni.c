/* Int8 depthwise conv for AVX-512 VNNI + VBMI with 16 channels in the lanes (NCHW in and out).
 *
 * The pixel-lane kernels (q8-dwconv-avx512vnni.c) pay their setup per channel and fill 16-pixel
 * vectors badly on short rows: ppocr's 5x5 layers over 2-3 rows of 96 pixels ran at ~25 GMAC/s. Here a
 * group of 16 channels is transposed, 16 pixels of an input row at a time, into vectors of [4 pixels][16
 * channels]; one vpermt2b over two neighbouring vectors gives the window at a column, each channel's 4
 * taps ([channel][tap] bytes), kept in a ring of the input rows one output row reads. One vpdpbusd then
 * multiplies a window by 4 taps of a kernel row (taps 4q..4q+3, zero past kw): 16 channels x 4 taps per
 * instruction, any horizontal stride. Kernel rows wholly in the top / bottom padding are skipped, their
 * zx * sum(w) added to the accumulator's start. Requantization is fp32 with per-lane scales (p->scale;
 * without it, with a horizontal dilation or buffers past Q8_DW_C16_MAX_BYTES, the pixel-lane kernel
 * runs), 16 pixels at a time through the packs, whose order the transpose back to channel rows reads
 * directly. */
#include <immintrin.h>
#include <stddef.h>

#include "q8-dwconv.h"
#include "../ec_vnni.h"
#include "../q8-requant/q8-rq-avx512.h"

static inline __mmask16 lanes(int n) { return (__mmask16)((1u << n) - 1u); }

/* 16x16 byte transpose of 4 vectors of 4 rows x 16 bytes (row 4k + j at bytes 16j.. of v[k]) in two
 * vpermt2b stages: rows 0-7 x bytes 0-7 / 8-15 first, then whole rows. */
static const uint8_t T1A[64] = {0, 16, 32, 48, 64, 80, 96, 112, 1, 17, 33, 49, 65, 81, 97, 113, 2, 18, 34, 50, 66,
    82, 98, 114, 3, 19, 35, 51, 67, 83, 99, 115, 4, 20, 36, 52, 68, 84, 100, 116, 5, 21, 37, 53, 69, 85, 101, 117, 6,
    22, 38, 54, 70, 86, 102, 118, 7, 23, 39, 55, 71, 87, 103, 119};
static const uint8_t T1B[64] = {8, 24, 40, 56, 72, 88, 104, 120, 9, 25, 41, 57, 73, 89, 105, 121, 10, 26, 42, 58, 74,
    90, 106, 122, 11, 27, 43, 59, 75, 91, 107, 123, 12, 28, 44, 60, 76, 92, 108, 124, 13, 29, 45, 61, 77, 93, 109,
    125, 14, 30, 46, 62, 78, 94, 110, 126, 15, 31, 47, 63, 79, 95, 111, 127};
static const uint8_t T2A[64] = {0, 1, 2, 3, 4, 5, 6, 7, 64, 65, 66, 67, 68, 69, 70, 71, 8, 9, 10, 11, 12, 13, 14, 15,
    72, 73, 74, 75, 76, 77, 78, 79, 16, 17, 18, 19, 20, 21, 22, 23, 80, 81, 82, 83, 84, 85, 86, 87, 24, 25, 26, 27,
    28, 29, 30, 31, 88, 89, 90, 91, 92, 93, 94, 95};
static const uint8_t T2B[64] = {32, 33, 34, 35, 36, 37, 38, 39, 96, 97, 98, 99, 100, 101, 102, 103, 40, 41, 42, 43,
    44, 45, 46, 47, 104, 105, 106, 107, 108, 109, 110, 111, 48, 49, 50, 51, 52, 53, 54, 55, 112, 113, 114, 115, 116,
    117, 118, 119, 56, 57, 58, 59, 60, 61, 62, 63, 120, 121, 122, 123, 124, 125, 126, 127};
/* stage 1 for rows packed as the requantization leaves them (packs work per 128-bit lane: row j, column c at
 * byte 16 * (c / 4) + 4 * j + c % 4) */
static const uint8_t P1A[64] = {0, 4, 8, 12, 64, 68, 72, 76, 1, 5, 9, 13, 65, 69, 73, 77, 2, 6, 10, 14, 66, 70, 74,
    78, 3, 7, 11, 15, 67, 71, 75, 79, 16, 20, 24, 28, 80, 84, 88, 92, 17, 21, 25, 29, 81, 85, 89, 93, 18, 22, 26, 30,
    82, 86, 90, 94, 19, 23, 27, 31, 83, 87, 91, 95};
static const uint8_t P1B[64] = {32, 36, 40, 44, 96, 100, 104, 108, 33, 37, 41, 45, 97, 101, 105, 109, 34, 38, 42, 46,
    98, 102, 106, 110, 35, 39, 43, 47, 99, 103, 107, 111, 48, 52, 56, 60, 112, 116, 120, 124, 49, 53, 57, 61, 113,
    117, 121, 125, 50, 54, 58, 62, 114, 118, 122, 126, 51, 55, 59, 63, 115, 119, 123, 127};
/* a window: byte 4c + j = tap j of channel c = byte 16j + c of 4 neighbouring pixels' 16-channel bytes */
static const uint8_t WIN[64] = {0, 16, 32, 48, 1, 17, 33, 49, 2, 18, 34, 50, 3, 19, 35, 51, 4, 20, 36, 52, 5, 21, 37,
    53, 6, 22, 38, 54, 7, 23, 39, 55, 8, 24, 40, 56, 9, 25, 41, 57, 10, 26, 42, 58, 11, 27, 43, 59, 12, 28, 44, 60,
    13, 29, 45, 61, 14, 30, 46, 62, 15, 31, 47, 63};

static inline void transpose16(const __m512i v[4], __m512i t[4], const uint8_t *s1a, const uint8_t *s1b)
{
    const __m512i a = _mm512_loadu_si512(s1a), b = _mm512_loadu_si512(s1b);
    const __m512i c = _mm512_loadu_si512(T2A), d = _mm512_loadu_si512(T2B);
    const __m512i p0 = _mm512_permutex2var_epi8(v[0], a, v[1]), p1 = _mm512_permutex2var_epi8(v[0], b, v[1]);
    const __m512i q0 = _mm512_permutex2var_epi8(v[2], a, v[3]), q1 = _mm512_permutex2var_epi8(v[2], b, v[3]);
    t[0] = _mm512_permutex2var_epi8(p0, c, q0);
    t[1] = _mm512_permutex2var_epi8(p0, d, q0);
    t[2] = _mm512_permutex2var_epi8(p1, c, q1);
    t[3] = _mm512_permutex2var_epi8(p1, d, q1);
}

/* 16 channel rows of 16 bytes (channel c at x + c * cs) -> [4 pixels][16 channels] for pixels 4k.. in t[k];
 * the plain loads fold into the inserts (whose shuffle then needs no port 5) */
static inline void to_lanes(const uint8_t *x, size_t cs, __m512i t[4])
{
    __m512i a[4];
    for (int g = 0; g < 4; g++) {
        const uint8_t *r = x + (size_t)(4 * g) * cs;
        a[g] = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(
                                      _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)r)),
                                      _mm_loadu_si128((const __m128i *)(r + cs)), 1),
                                      _mm_loadu_si128((const __m128i *)(r + 2 * cs)), 2),
                                  _mm_loadu_si128((const __m128i *)(r + 3 * cs)), 3);
    }
    transpose16(a, t, T1A, T1B);
}

/* the inverse, from the requantization's packed order: 4 pixels x 16 channels (pixels 4k.. in v[k], see P1A)
 * -> channel c's m bytes at y + c * cs, c < n */
static inline void from_lanes(const __m512i v[4], uint8_t *y, size_t cs, int n, int m)
{
    __m512i o[4];
    transpose16(v, o, P1A, P1B);
    const __mmask16 mm = lanes(m);
    for (int c = 0; c < n; c++) {
        const __m512i w = o[c / 4];
        __m128i q;
        switch (c & 3) {
        case 0: q = _mm512_castsi512_si128(w); break;
        case 1: q = _mm512_extracti32x4_epi32(w, 1); break;
        case 2: q = _mm512_extracti32x4_epi32(w, 2); break;
        default: q = _mm512_extracti32x4_epi32(w, 3); break;
        }
        if (m == 16)
            _mm_storeu_si128((__m128i *)(y + (size_t)c * cs), q);
        else
            _mm_mask_storeu_epi8(y + (size_t)c * cs, mm, q);
    }
}

/* the requantization's constants: per-lane scales, zp as int16, the clamp as bytes */
typedef struct {
    __m512 scale;
    __m512i zp16, qmin, qmax;
} rq_c16;

/* 4 pixels' accumulators (16 channels each) to 64 bytes in the packs' order (see P1A) */
static inline __m512i rq4(__m512i a0, __m512i a1, __m512i a2, __m512i a3, const rq_c16 *k)
{
    return q8_rq64_packs_fp32_avx512(a0, a1, a2, a3, k->scale, k->scale, k->zp16, k->qmin, k->qmax);
}

#define DW_TAP(a, b) a = ec_dpbusd512(a, _mm512_loadu_si512(src + (b) * step), w)

/* 16 output pixels from ow: nr kernel rows (their rows of windows row[], weight vectors wv[r * nq + q]),
 * requantized and transposed straight to channel rows at yr (m pixels of n channels, channel stride cs).
 * Sixteen named accumulators: 16 independent vpdpbusd chains (a block alone: 1.1x the speed of 8), and the
 * result needs no staging (an array of accumulators was partly kept on the stack). */
static inline __attribute__((always_inline)) void px_block(int nr, const uint8_t *const *row, const __m512i *wv,
                                                           int nq, int ow, int sw, __m512i acc0, const rq_c16 *k,
                                                           uint8_t *yr, size_t cs, int n, int m)
{
    const size_t step = (size_t)sw * 64;
    __m512i a0 = acc0, a1 = acc0, a2 = acc0, a3 = acc0, a4 = acc0, a5 = acc0, a6 = acc0, a7 = acc0;
    __m512i a8 = acc0, a9 = acc0, a10 = acc0, a11 = acc0, a12 = acc0, a13 = acc0, a14 = acc0, a15 = acc0;
    for (int r = 0; r < nr; r++)
        for (int q = 0; q < nq; q++) {
            const __m512i w = wv[r * nq + q];
            const uint8_t *src = row[r] + ((size_t)ow * sw + 4 * (size_t)q) * 64;
            DW_TAP(a0, 0); DW_TAP(a1, 1); DW_TAP(a2, 2); DW_TAP(a3, 3);
            DW_TAP(a4, 4); DW_TAP(a5, 5); DW_TAP(a6, 6); DW_TAP(a7, 7);
            DW_TAP(a8, 8); DW_TAP(a9, 9); DW_TAP(a10, 10); DW_TAP(a11, 11);
            DW_TAP(a12, 12); DW_TAP(a13, 13); DW_TAP(a14, 14); DW_TAP(a15, 15);
        }
    const __m512i t[4] = {rq4(a0, a1, a2, a3, k), rq4(a4, a5, a6, a7, k), rq4(a8, a9, a10, a11, k),
                          rq4(a12, a13, a14, a15, k)};
    from_lanes(t, yr + ow, cs, n, m);
}
#undef DW_TAP

/* The windows of input row ih (window col = input pixels col - pl .. col - pl + 3, zx outside the row) into
 * slot (Q8_DW_C16_LEAD windows of slack before, Q8_DW_C16_TAIL after), straight from the transposed
 * registers: 4-pixel vectors A, B (pixels 4k - 4 .. 4k + 3) give the windows starting at 4k - 4 .. 4k - 1
 * with one vpermt2b each, all 16 of a 16-pixel block stored; no stored copy of the row is read back. */
static void window_row(const q8_dw_params *p, const uint8_t *xg, int n, int ih, const __m512i idx[4], uint8_t *slot)
{
    const int nw = (int)q8_dw_c16_wins(p), pl = p->pl;
    const __m512i zxv = _mm512_set1_epi8((char)p->zx);
    const __m128i zx = _mm512_castsi512_si128(zxv);
    for (int col = 0; col < pl - 4 && col < nw; col++) /* windows wholly in a wide left padding */
        _mm512_storeu_si512(slot + (size_t)col * 64, zxv);
    const uint8_t *xr = xg + (size_t)ih * p->W;
    const size_t HW = (size_t)p->H * p->W;
    __m512i prev = zxv; /* pixels -4 .. -1 */
    for (int px = 0; px - 4 + pl < nw; px += 16) {
        __m512i t[4];
        const int m = p->W - px < 0 ? 0 : p->W - px < 16 ? p->W - px : 16;
        if (m == 16 && n == 16) {
            to_lanes(xr + px, HW, t);
        } else { /* zx past the row's end and in missing channels */
            const __mmask16 mm = lanes(m);
            __m512i a[4];
            for (int g = 0; g < 4; g++) {
                __m128i r[4];
                for (int j = 0; j < 4; j++)
                    r[j] = 4 * g + j < n ? _mm_mask_loadu_epi8(zx, mm, xr + px + (size_t)(4 * g + j) * HW) : zx;
                a[g] = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(r[0]), r[1], 1),
                                                             r[2], 2), r[3], 3);
            }
            transpose16(a, t, T1A, T1B);
        }
        uint8_t *o = slot + (ptrdiff_t)(px - 4 + pl) * 64; /* the window starting at pixel px - 4 */
        for (int k = 0; k < 4; k++) {
            const __m512i A = k ? t[k - 1] : prev, B = t[k];
            for (int j = 0; j < 4; j++)
                _mm512_storeu_si512(o + (4 * k + j) * 64, _mm512_permutex2var_epi8(A, idx[j], B));
        }
        prev = t[3];
    }
}

void q8_dwconv_c16__avx512vnni(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch)
{
    const int T = p->kh * p->kw, nq = (p->kw + 3) / 4;
    if (!q8_dw_c16_ok(p)) {
        q8_dwconv__avx512vnni(p, x, y, scratch);
        return;
    }
    const size_t nw = q8_dw_c16_wins(p), R = q8_dw_c16_ring(p), HW = (size_t)p->H * p->W, HWo = (size_t)p->Ho * p->Wo;
    const size_t slot = (nw + Q8_DW_C16_LEAD + Q8_DW_C16_TAIL) * 64; /* a ring slot's bytes */
    uint8_t *ring = scratch + Q8_DW_C16_LEAD * 64;
    __m512i idx[4]; /* WIN for the windows starting j pixels into a pair of 4-pixel vectors */
    for (int j = 0; j < 4; j++)
        idx[j] = _mm512_add_epi8(_mm512_loadu_si512(WIN), _mm512_set1_epi8((char)(16 * j)));
    rq_c16 k;
    k.zp16 = _mm512_set1_epi16((short)p->zp);
    k.qmin = _mm512_set1_epi8((char)p->qmin);
    k.qmax = _mm512_set1_epi8((char)p->qmax);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int b = 0; b < p->batch; b++)
        for (int c0 = 0; c0 < p->C; c0 += 16) {
            const int n = p->C - c0 < 16 ? p->C - c0 : 16;
            const __mmask16 lm = lanes(n);
            const uint8_t *xg = x + ((size_t)b * p->C + c0) * HW;
            uint8_t *yg = y + ((size_t)b * p->C + c0) * HWo;
            /* the group's weights as [kernel row][quad] vectors of [channel][4 taps], row sums times zx */
            __m512i wv[Q8_DW_MAX_TAPS], zr[Q8_DW_MAX_TAPS];
            for (int i = 0; i < p->kh; i++) {
                for (int q = 0; q < nq; q++) {
                    if (p->quad) { /* packed at compile time: [C][kh][nq] */
                        const __m512i idx = _mm512_add_epi32(_mm512_mullo_epi32(lane, _mm512_set1_epi32(p->kh * nq)),
                                                             _mm512_set1_epi32(i * nq + q));
                        wv[i * nq + q] = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), lm, idx,
                                                                     p->quad + (size_t)c0 * p->kh * nq, 4);
                        continue;
                    }
                    int32_t t[16] = {0};
                    for (int c = 0; c < n; c++)
                        for (int j = 0; j < 4 && 4 * q + j < p->kw; j++)
                            t[c] |= (int32_t)((uint32_t)(uint8_t)p->w[(size_t)(c0 + c) * T + i * p->kw + 4 * q + j] << (8 * j));
                    wv[i * nq + q] = _mm512_loadu_si512(t);
                }
                int32_t s[16] = {0};
                for (int c = 0; c < n; c++) {
                    if (p->zrow) {
                        s[c] = p->zrow[(size_t)(c0 + c) * p->kh + i];
                        continue;
                    }
                    for (int j = 0; j < p->kw; j++)
                        s[c] += p->w[(size_t)(c0 + c) * T + i * p->kw + j];
                    s[c] *= (int32_t)p->zx;
                }
                zr[i] = _mm512_loadu_si512(s);
            }
            const __m512i bias = _mm512_maskz_loadu_epi32(lm, p->bias + c0);
            k.scale = _mm512_maskz_loadu_ps(lm, p->scale + c0);
            int next = 0; /* the next input row to build: rows are built once, in order, into slot ih % R */
            for (int oh = 0; oh < p->Ho; oh++) {
                const int top = oh * p->sh - p->pt + (p->kh - 1) * p->dh; /* the band's last row */
                for (; next <= top && next < p->H; next++)
                    window_row(p, xg, n, next, idx, ring + (size_t)(next % (int)R) * slot);
                const uint8_t *row[Q8_DW_MAX_TAPS];
                __m512i w[Q8_DW_MAX_TAPS];
                __m512i acc0 = bias;
                int nr = 0;
                for (int i = 0; i < p->kh; i++) {
                    const int ih = oh * p->sh + i * p->dh - p->pt;
                    if (ih < 0 || ih >= p->H) { /* a row of padding: zx times the kernel row's weights */
                        acc0 = _mm512_add_epi32(acc0, zr[i]);
                        continue;
                    }
                    row[nr] = ring + (size_t)(ih % (int)R) * slot;
                    for (int q = 0; q < nq; q++)
                        w[nr * nq + q] = wv[i * nq + q];
                    nr++;
                }
                uint8_t *yr = yg + (size_t)oh * p->Wo;
                for (int ow = 0; ow < p->Wo; ow += 16) { /* a last partial block reads the windows' slack */
                    const int m = p->Wo - ow < 16 ? p->Wo - ow : 16;
                    if (p->sw == 1) /* a constant stride folds the 16 window offsets into displacements */
                        px_block(nr, row, w, nq, ow, 1, acc0, &k, yr, HWo, n, m);
                    else
                        px_block(nr, row, w, nq, ow, p->sw, acc0, &k, yr, HWo, n, m);
                }
            }
        }
}
