/* Int8 depthwise conv for AVX2-class x86, the body shared by two kernels that differ only in their 4-tap
 * multiply-add Q8_DW_DOT(acc, u, w) (int32 lanes += the dot product of 4 u8 bytes of u and 4 s8 bytes of w):
 *   q8-dwconv-avx2-maddubs.c  vpmaddubsw + vpmaddwd with ones, for weights whose tap pairs fit its int16 pair sum
 *                             (the bound of q8-gemm-4x16-avx2-maddubs.c; every 7-bit weight set);
 *   q8-dwconv-avxvnni.c       VEX vpdpbusd (AVX-VNNI), exact on any int8 weights.
 * 4 taps of 32 pixels are byte-interleaved per pixel, so one multiply covers 32 products (q8_dwconv__avx2's
 * vpmaddwd: 16). Any stride via the phase split.
 *
 * Kernel rows that fall wholly in the top or bottom padding are skipped: their taps all read zx, so
 * they add zx * (row's weight sum) to the accumulator, folded into the row's bias. Text models run
 * 5x5 windows over 2-3 row maps, where 40-60% of the taps are such rows. Only the image rows are
 * copied to scratch (left/right padded); weights, bias and tap offsets are set up once per run of
 * rows with the same valid kernel rows, not per row. Windows of more than 32 taps and rows short of
 * the vector (the flattened-plane path) take the generic row step.
 * The including file defines Q8_DW_DOT and then calls q8_dw_avx2_entry. */
#ifndef Q8_DWCONV_AVX2_TMPL_H
#define Q8_DWCONV_AVX2_TMPL_H

#include <immintrin.h>

#include "q8-dwconv.h"
#include "../q8-requant/q8-rq-avx2.h"

/* Four taps of 32 pixels into the accumulators: bytes interleaved per pixel, vpmaddubsw adds the tap pairs,
 * vpmaddwd with ones the two pairs. Lanes: a[0] pixels 0-3|16-19, a[1] 4-7|20-23, a[2] 8-11|24-27,
 * a[3] 12-15|28-31. */
static inline void mac4(__m256i a[4], __m256i x0, __m256i x1, __m256i x2, __m256i x3, __m256i wv)
{
    const __m256i l01 = _mm256_unpacklo_epi8(x0, x1), h01 = _mm256_unpackhi_epi8(x0, x1);
    const __m256i l23 = _mm256_unpacklo_epi8(x2, x3), h23 = _mm256_unpackhi_epi8(x2, x3);
    a[0] = Q8_DW_DOT(a[0], _mm256_unpacklo_epi16(l01, l23), wv);
    a[1] = Q8_DW_DOT(a[1], _mm256_unpackhi_epi16(l01, l23), wv);
    a[2] = Q8_DW_DOT(a[2], _mm256_unpacklo_epi16(h01, h23), wv);
    a[3] = Q8_DW_DOT(a[3], _mm256_unpackhi_epi16(h01, h23), wv);
}

/* Requantizes the accumulators of mac4 and stores the first n (<= 32) pixels: the packs keep each 128-bit
 * half ([0-3 4-7 | 16-19 20-23], [8-11 12-15 | 24-27 28-31]), which puts the bytes in order. For shifts
 * 33-54 (q8_rq32_avx2's short form) the zero point rides in the rounding constant: zp * 2^(s-32) is a
 * multiple of the divisor and |hi32| + 2^(s-33) + 255 * 2^22 < 2^31, so the int32 sum is exact; the
 * int16 and u8 packs then saturate as pack, + zp (saturating), pack did. The u8 clamp runs only when
 * it is narrower than [0, 255] (a fused activation). */
static inline void rq_store32(const __m256i a[4], int32_t mult, int32_t shift, const q8_rq *rq, uint8_t *y, int n)
{
    __m256i v;
    if (shift >= 33 && shift <= 54) {
        const __m256i mv = _mm256_set1_epi32(mult);
        const __m256i rc = _mm256_set1_epi32((1 << (shift - 33)) + rq->zp * (1 << (shift - 32)));
        const __m128i cnt = _mm_cvtsi32_si128(shift - 32);
        __m256i q[4];
        for (int k = 0; k < 4; k++) {
            const __m256i ev = _mm256_mul_epi32(a[k], mv), od = _mm256_mul_epi32(_mm256_srli_epi64(a[k], 32), mv);
            q[k] = _mm256_sra_epi32(_mm256_add_epi32(_mm256_blend_epi32(_mm256_srli_epi64(ev, 32), od, 0xAA), rc), cnt);
        }
        v = _mm256_packus_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    } else {
        const __m256i zp = _mm256_set1_epi16((int16_t)rq->zp);
        const __m256i lo = _mm256_packs_epi32(q8_rq32_avx2(a[0], mult, shift), q8_rq32_avx2(a[1], mult, shift));
        const __m256i hi = _mm256_packs_epi32(q8_rq32_avx2(a[2], mult, shift), q8_rq32_avx2(a[3], mult, shift));
        v = _mm256_packus_epi16(_mm256_adds_epi16(lo, zp), _mm256_adds_epi16(hi, zp));
    }
    if (rq->qmin > 0 || rq->qmax < 255)
        v = _mm256_min_epu8(_mm256_max_epu8(v, _mm256_set1_epi8((char)rq->qmin)), _mm256_set1_epi8((char)rq->qmax));
    if (n >= 32) {
        _mm256_storeu_si256((__m256i *)y, v);
    } else {
        uint8_t t32[32];
        _mm256_storeu_si256((__m256i *)t32, v);
        memcpy(y, t32, (size_t)n);
    }
}

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
    const int32_t mult = rq->mult[c], shift = rq->shift[c];
    for (int ow0 = 0; ow0 < p->Wo; ow0 += 32) {
        const __m256i b0 = _mm256_set1_epi32(p->bias[c]);
        __m256i a[4] = {b0, b0, b0, b0};
        for (int t = 0; t < T; t += 4)
            mac4(a, _mm256_loadu_si256((const __m256i *)(tp[t] + ow0)),
                 _mm256_loadu_si256((const __m256i *)(tp[t + 1] + ow0)),
                 _mm256_loadu_si256((const __m256i *)(tp[t + 2] + ow0)),
                 _mm256_loadu_si256((const __m256i *)(tp[t + 3] + ow0)), _mm256_set1_epi32(w4[t / 4]));
        rq_store32(a, mult, shift, rq, yr + ow0, p->Wo - ow0);
    }
}

/* One output row of 32-pixel steps from taps grouped by 4: tap k reads row + off[k], its weight is byte k
 * of w4; acc starts at bias. */
static inline void dw_row_groups(int Wo, int G, const uint8_t *buf, ptrdiff_t row, const int32_t *off,
                                 const int32_t *w4, int32_t bias, int32_t mult, int32_t shift, const q8_rq *rq,
                                 uint8_t *yr)
{
    for (int ow0 = 0; ow0 < Wo; ow0 += 32) {
        const uint8_t *b = buf + (row + ow0);
        const __m256i b0 = _mm256_set1_epi32(bias);
        __m256i a[4] = {b0, b0, b0, b0};
        for (int g = 0; g < G; g++) {
            const int32_t *o = off + 4 * g;
            mac4(a, _mm256_loadu_si256((const __m256i *)(b + o[0])), _mm256_loadu_si256((const __m256i *)(b + o[1])),
                 _mm256_loadu_si256((const __m256i *)(b + o[2])), _mm256_loadu_si256((const __m256i *)(b + o[3])),
                 _mm256_set1_epi32(w4[g]));
        }
        rq_store32(a, mult, shift, rq, yr + ow0, Wo - ow0);
    }
}

#define MAX_SHARED 3 /* output rows per shared step (dw_rows_shared) */

/* One 16-pixel half (hi: pixels 8-15|24-31 of the 32, else 0-7|16-23) of R output rows (2-3) that read the same
 * image rows: the taps' byte interleaving (4 loads and 4 shuffles per group of 4 taps and half) is done once for
 * all R rows; each row has its own weights (w4r[r], the same image taps at another kernel row offset). */
static inline __attribute__((always_inline)) void shared_half(const int R, const int hi, int G, const uint8_t *b,
                                                              const int32_t *off, const int32_t *const *w4r,
                                                              __m256i *s0, __m256i *s1)
{
    for (int g = 0; g < G; g++) {
        const int32_t *o = off + 4 * g;
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)(b + o[0]));
        const __m256i x1 = _mm256_loadu_si256((const __m256i *)(b + o[1]));
        const __m256i x2 = _mm256_loadu_si256((const __m256i *)(b + o[2]));
        const __m256i x3 = _mm256_loadu_si256((const __m256i *)(b + o[3]));
        const __m256i p01 = hi ? _mm256_unpackhi_epi8(x0, x1) : _mm256_unpacklo_epi8(x0, x1);
        const __m256i p23 = hi ? _mm256_unpackhi_epi8(x2, x3) : _mm256_unpacklo_epi8(x2, x3);
        const __m256i u0 = _mm256_unpacklo_epi16(p01, p23), u1 = _mm256_unpackhi_epi16(p01, p23);
        for (int r = 0; r < R; r++) {
            const __m256i wv = _mm256_set1_epi32(w4r[r][g]);
            s0[r] = Q8_DW_DOT(s0[r], u0, wv);
            s1[r] = Q8_DW_DOT(s1[r], u1, wv);
        }
    }
}

/* R output rows that read the same image rows, 32-pixel steps: the halves one after the other (R x 2
 * accumulators live during the tap loop, not R x 4), then each row's requantize-and-store. */
static inline __attribute__((always_inline)) void dw_rows_shared(const int R, int Wo, int G, const uint8_t *buf,
                                                                const int32_t *off, const int32_t *const *w4r,
                                                                const int32_t *bias, int32_t mult, int32_t shift,
                                                                const q8_rq *rq, uint8_t *const *yr)
{
    for (int ow0 = 0; ow0 < Wo; ow0 += 32) {
        __m256i a0[MAX_SHARED], a1[MAX_SHARED], a2[MAX_SHARED], a3[MAX_SHARED];
        for (int r = 0; r < R; r++)
            a0[r] = a1[r] = a2[r] = a3[r] = _mm256_set1_epi32(bias[r]);
        shared_half(R, 0, G, buf + ow0, off, w4r, a0, a1);
        shared_half(R, 1, G, buf + ow0, off, w4r, a2, a3);
        for (int r = 0; r < R; r++) {
            const __m256i a[4] = {a0[r], a1[r], a2[r], a3[r]};
            rq_store32(a, mult, shift, rq, yr[r] + ow0, Wo - ow0);
        }
    }
}

/* With horizontal stride 1 the columns left and right of the image are zx for every channel: pad_image_rows
 * then copies only the image bytes, over rows this fills with zx once per call. */
static void pad_borders(const q8_dw_params *p, int hu, size_t wq, uint8_t *buf)
{
    if (p->sw == 1)
        memset(buf, p->zx, (size_t)hu * wq);
}

/* The image rows of one channel, phase-split and left/right padded with zx: [sw][hu][wq]. */
static void pad_image_rows(const q8_dw_params *p, int hu, size_t wq, const uint8_t *xc, uint8_t *buf)
{
    if (p->sw == 1) { /* the image bytes only (pad_borders); wq >= pl + W + 32 (q8_dw_wq's slack) */
        const int pl = p->pl, n = p->W < (int)wq - pl ? p->W : (int)wq - pl;
        for (int r = 0; r < hu; r++) {
            uint8_t *dst = buf + (size_t)r * wq + pl;
            const uint8_t *src = xc + (size_t)r * p->W;
            int i = 0;
            for (; i + 32 <= n; i += 32)
                _mm256_storeu_si256((__m256i *)(dst + i), _mm256_loadu_si256((const __m256i *)(src + i)));
            if (i < n)
                memcpy(dst + i, src + i, (size_t)(n - i));
        }
        return;
    }
    for (int ph = 0; ph < p->sw; ph++)
        for (int r = 0; r < hu; r++) {
            uint8_t *dst = buf + ((size_t)ph * hu + r) * wq;
            const uint8_t *src = xc + (size_t)r * p->W;
            int i = 0, iw = ph - p->pl;
            for (; i < (int)wq && iw < 0; i++, iw += p->sw)
                dst[i] = p->zx;
            for (; i < (int)wq && iw < p->W; i++, iw += p->sw)
                dst[i] = src[iw];
            if (i < (int)wq)
                memset(dst + i, p->zx, wq - (size_t)i);
        }
}

/* Valid kernel rows [*i0, *i1) of output row oh (input row oh*sh - pt + i*dh inside [0, hu)). */
static inline void valid_rows(const q8_dw_params *p, int hu, int oh, int *i0, int *i1)
{
    const int base = oh * p->sh - p->pt;
    int a, b;
    if (p->dh == 1) { /* no division on the common path */
        a = base >= 0 ? 0 : -base;
        b = base > hu - 1 ? 0 : hu - base;
    } else {
        a = base >= 0 ? 0 : (-base + p->dh - 1) / p->dh;
        b = base > hu - 1 ? 0 : (hu - 1 - base) / p->dh + 1;
    }
    b = b < p->kh ? b : p->kh;
    *i0 = a < b ? a : b;
    *i1 = b;
}

/* Sum of 32 int8 lanes. */
static inline int32_t hsum_s8(__m256i v)
{
    const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v), _mm256_set1_epi16(1));
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    return _mm_cvtsi128_si32(h);
}

#define FAST_TAPS 32 /* the row-skipping path: one 32-byte vector of weights per set of valid rows */
#define FAST_KH 8
#define MAX_PAT ((FAST_KH + 1) * (FAST_KH + 1))

#define MAX_RUNS 16

typedef struct {
    int i0, i1, t0, G;
    int32_t off[FAST_TAPS + 4]; /* tap k of the groups, relative to the row's first input row */
} dw_pattern;

/* Output rows [oh, oh + R) that read the same image rows [r0, r0 + n / kw): their taps in image order (row-major
 * over those rows), grouped by 4 (G groups; filler taps read tap 0 with weight 0). */
typedef struct {
    int oh, R, G;
    int32_t off[FAST_TAPS + 4]; /* absolute offsets into the padded image rows */
} dw_run;

static void dw_skip_rows(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch, const q8_rq *rq,
                         int shared)
{
    const int kh = p->kh, kw = p->kw, T = kh * kw;
    const size_t wq = q8_dw_wq(p);
    const int rows = (int)q8_dw_rows(p);
    int hu = rows - p->pt < p->H ? rows - p->pt : p->H; /* image rows any tap reads */
    hu = hu > 0 ? hu : 0;
    int32_t off[FAST_TAPS]; /* tap (i, j) relative to input row oh*sh - pt */
    for (int i = 0; i < kh; i++)
        for (int j = 0; j < kw; j++) {
            const int col = j * p->dw;
            off[i * kw + j] = (int32_t)(((size_t)(col % p->sw) * hu + (size_t)i * p->dh) * wq + (size_t)(col / p->sw));
        }
    /* the distinct sets of valid kernel rows over the output rows (a few at the edges, one inside) */
    dw_pattern pat[MAX_PAT];
    uint8_t pidx[MAX_PAT], rowpat[256]; /* rowpat: output row -> pattern, for the first 256 rows */
    memset(pidx, 0xFF, sizeof pidx);
    int npat = 0;
    for (int oh = 0; oh < p->Ho; oh++) {
        int i0, i1;
        valid_rows(p, hu, oh, &i0, &i1);
        const int key = i0 * (kh + 1) + i1;
        if (pidx[key] != 0xFF) {
            if (oh < 256)
                rowpat[oh] = pidx[key];
            continue;
        }
        if (oh < 256)
            rowpat[oh] = (uint8_t)npat;
        dw_pattern *q = &pat[npat];
        pidx[key] = (uint8_t)npat++;
        /* start on an even tap: the pairs stay those maddubs_exact checked (a skipped tap's weight is 0) */
        q->i0 = i0;
        q->i1 = i1;
        q->t0 = (i0 * kw) & ~1;
        q->G = i1 > i0 ? (i1 * kw - q->t0 + 3) / 4 : 0;
        for (int k = 0; k < 4 * q->G; k++) { /* filler taps read a valid tap's bytes */
            const int t = q->t0 + k;
            q->off[k] = off[t >= i0 * kw && t < i1 * kw ? t : i0 * kw];
        }
    }
    /* With shared set (every consecutive tap pair exact, not only the even ones): consecutive output rows whose
     * valid kernel rows cover the same image rows run together, the taps interleaved once for all of them. Each
     * row's weights then start at its first valid tap, odd or even. */
    dw_run run[MAX_RUNS];
    int nrun = 0;
    uint8_t inrun[256]; /* output row -> 1 when a run computes it (first 256 rows) */
    memset(inrun, 0, sizeof inrun);
    for (int oh = 0; shared && p->dh == 1 && oh + 1 < p->Ho && oh + 1 < 256 && nrun < MAX_RUNS;) {
        int i0, i1, R = 1;
        valid_rows(p, hu, oh, &i0, &i1);
        const int r0 = oh * p->sh - p->pt + i0, nr = i1 - i0;
        for (; nr > 0 && R < MAX_SHARED && oh + R < p->Ho && oh + R < 256; R++) {
            int j0, j1;
            valid_rows(p, hu, oh + R, &j0, &j1);
            if ((oh + R) * p->sh - p->pt + j0 != r0 || j1 - j0 != nr)
                break;
        }
        if (R < 2) {
            oh++;
            continue;
        }
        dw_run *q = &run[nrun++];
        q->oh = oh;
        q->R = R;
        q->G = (nr * kw + 3) / 4;
        for (int k = 0; k < 4 * q->G; k++) {
            const int t = k < nr * kw ? k : 0, col = (t % kw) * p->dw;
            q->off[k] = (int32_t)(((size_t)(col % p->sw) * hu + (size_t)(r0 + t / kw)) * wq + (size_t)(col / p->sw));
        }
        for (int r = 0; r < R; r++)
            inrun[oh + r] = 1;
        oh += R;
    }
    pad_borders(p, hu, wq, scratch);
    const __m256i iota = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                                          21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
    for (int b = 0; b < p->batch; b++)
        for (int c = 0; c < p->C; c++) {
            const size_t plane = (size_t)b * p->C + c;
            pad_image_rows(p, hu, wq, x + plane * p->H * p->W, scratch);
            /* weights read in place when 64 bytes follow them (a vector from any t0 < 32), else from a copy */
            const int8_t *ws = p->w + (size_t)c * T;
            int8_t wz[2 * FAST_TAPS];
            if ((size_t)(p->C - c) * T < sizeof wz) {
                memset(wz, 0, sizeof wz);
                memcpy(wz, ws, (size_t)T);
                ws = wz;
            }
            const int32_t sum_all = hsum_s8(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)ws),
                                                             _mm256_cmpgt_epi8(_mm256_set1_epi8((char)T), iota)));
            int32_t bias[MAX_PAT], w4[MAX_PAT][FAST_TAPS / 4], wsh[MAX_PAT][FAST_TAPS / 4];
            for (int k = 0; k < npat; k++) { /* weights of the valid taps (others 0) and the folded bias */
                const dw_pattern *q = &pat[k];
                const __m256i t = _mm256_add_epi8(iota, _mm256_set1_epi8((char)q->t0));
                const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi8(_mm256_set1_epi8((char)(q->i0 * kw)), t),
                                                       _mm256_cmpgt_epi8(_mm256_set1_epi8((char)(q->i1 * kw)), t));
                const __m256i wv = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(ws + q->t0)), in);
                _mm256_storeu_si256((__m256i *)w4[k], wv);
                bias[k] = p->bias[c] + (int32_t)p->zx * (sum_all - hsum_s8(wv)); /* skipped taps read zx */
                if (nrun) /* the same taps from the first valid one: the shared runs' image order */
                    _mm256_storeu_si256((__m256i *)wsh[k],
                                        _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(ws + q->i0 * kw)),
                                                         _mm256_cmpgt_epi8(_mm256_set1_epi8((char)((q->i1 - q->i0) * kw)),
                                                                           iota)));
            }
            uint8_t *yc = y + plane * p->Ho * p->Wo;
            for (int n = 0; n < nrun; n++) {
                const dw_run *q = &run[n];
                const int32_t *wr[MAX_SHARED];
                int32_t br[MAX_SHARED];
                uint8_t *yr[MAX_SHARED];
                for (int r = 0; r < q->R; r++) {
                    wr[r] = wsh[rowpat[q->oh + r]];
                    br[r] = bias[rowpat[q->oh + r]];
                    yr[r] = yc + (size_t)(q->oh + r) * p->Wo;
                }
                if (q->R == 2)
                    dw_rows_shared(2, p->Wo, q->G, scratch, q->off, wr, br, p->mult[c], p->shift[c], rq, yr);
                else
                    dw_rows_shared(3, p->Wo, q->G, scratch, q->off, wr, br, p->mult[c], p->shift[c], rq, yr);
            }
            for (int oh = 0; oh < p->Ho; oh++) {
                if (oh < 256 && inrun[oh])
                    continue;
                int k = oh < 256 ? rowpat[oh] : 0;
                if (oh >= 256) {
                    int i0, i1;
                    valid_rows(p, hu, oh, &i0, &i1);
                    k = pidx[i0 * (kh + 1) + i1];
                }
                dw_row_groups(p->Wo, pat[k].G, scratch, (ptrdiff_t)(oh * p->sh - p->pt) * (ptrdiff_t)wq, pat[k].off,
                              w4[k], bias[k], p->mult[c], p->shift[c], rq, yc + (size_t)oh * p->Wo);
            }
        }
}

/* shared: consecutive output rows reading the same image rows run together (needs every tap pair exact) */
static inline void q8_dw_avx2_entry(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch, int shared)
{
    const q8_rq rq = {p->bias, p->mult, p->shift, p->zp, p->qmin, p->qmax, NULL};
    if (p->kh * p->kw > FAST_TAPS || p->kh > FAST_KH || q8_dw_use_flat(p, 32)) {
        q8_dwconv_rows(p, x, y, scratch, 32, dw_row); /* short rows: the flattened plane; big windows */
        return;
    }
    dw_skip_rows(p, x, y, scratch, &rq, shared);
}

#endif
