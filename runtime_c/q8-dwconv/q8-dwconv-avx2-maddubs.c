/* Int8 depthwise conv for AVX2 without VNNI on weights whose tap pairs fit vpmaddubsw's int16 pair
 * sum (the bound of q8-gemm-4x16-avx2-maddubs.c; every 7-bit weight set): 4 taps of 32 pixels are
 * byte-interleaved per pixel, vpmaddubsw adds tap pairs, vpmaddwd with ones the two pairs, so one
 * multiply covers 32 products (q8_dwconv__avx2: 16). Any stride via the phase split.
 *
 * Kernel rows that fall wholly in the top or bottom padding are skipped: their taps all read zx, so
 * they add zx * (row's weight sum) to the accumulator, folded into the row's bias. Text models run
 * 5x5 windows over 2-3 row maps, where 40-60% of the taps are such rows. Only the image rows are
 * copied to scratch (left/right padded); weights, bias and tap offsets are set up once per run of
 * rows with the same valid kernel rows, not per row. */
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

/* One output row of 32-pixel steps from taps grouped by 4 (tp[4g..4g+3], w4[g]); acc starts at bias. */
static inline void dw_row_groups(int Wo, int G, const uint8_t *const *tp, const int32_t *w4, int32_t bias,
                                 int32_t mult, int32_t shift, const q8_rq *rq, uint8_t *yr)
{
    const __m256i ones = _mm256_set1_epi16(1), zp = _mm256_set1_epi16((int16_t)rq->zp);
    const __m256i lo8 = _mm256_set1_epi8((char)rq->qmin), hi8 = _mm256_set1_epi8((char)rq->qmax);
    for (int ow0 = 0; ow0 < Wo; ow0 += 32) {
        __m256i a0 = _mm256_set1_epi32(bias), a1 = a0, a2 = a0, a3 = a0;
        for (int g = 0; g < G; g++) {
            const uint8_t *const *t = tp + 4 * g;
            const __m256i x0 = _mm256_loadu_si256((const __m256i *)(t[0] + ow0));
            const __m256i x1 = _mm256_loadu_si256((const __m256i *)(t[1] + ow0));
            const __m256i x2 = _mm256_loadu_si256((const __m256i *)(t[2] + ow0));
            const __m256i x3 = _mm256_loadu_si256((const __m256i *)(t[3] + ow0));
            const __m256i l01 = _mm256_unpacklo_epi8(x0, x1), h01 = _mm256_unpackhi_epi8(x0, x1);
            const __m256i l23 = _mm256_unpacklo_epi8(x2, x3), h23 = _mm256_unpackhi_epi8(x2, x3);
            const __m256i wv = _mm256_set1_epi32(w4[g]);
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_unpacklo_epi16(l01, l23), wv), ones));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_unpackhi_epi16(l01, l23), wv), ones));
            a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_unpacklo_epi16(h01, h23), wv), ones));
            a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_unpackhi_epi16(h01, h23), wv), ones));
        }
        const __m256i lo = _mm256_packs_epi32(q8_rq32_avx2(a0, mult, shift), q8_rq32_avx2(a1, mult, shift));
        const __m256i hi = _mm256_packs_epi32(q8_rq32_avx2(a2, mult, shift), q8_rq32_avx2(a3, mult, shift));
        __m256i v = _mm256_packus_epi16(_mm256_adds_epi16(lo, zp), _mm256_adds_epi16(hi, zp));
        v = _mm256_min_epu8(_mm256_max_epu8(v, lo8), hi8);
        if (Wo - ow0 >= 32) {
            _mm256_storeu_si256((__m256i *)(yr + ow0), v);
        } else {
            uint8_t t32[32];
            _mm256_storeu_si256((__m256i *)t32, v);
            memcpy(yr + ow0, t32, (size_t)(Wo - ow0));
        }
    }
}

/* The image rows of one channel, phase-split and left/right padded with zx: [sw][hu][wq]. */
static void pad_image_rows(const q8_dw_params *p, int hu, size_t wq, const uint8_t *xc, uint8_t *buf)
{
    for (int ph = 0; ph < p->sw; ph++)
        for (int r = 0; r < hu; r++) {
            uint8_t *dst = buf + ((size_t)ph * hu + r) * wq;
            const uint8_t *src = xc + (size_t)r * p->W;
            int i = 0, iw = ph - p->pl;
            for (; i < (int)wq && iw < 0; i++, iw += p->sw)
                dst[i] = p->zx;
            if (p->sw == 1) {
                const int n = p->W - iw < (int)wq - i ? p->W - iw : (int)wq - i;
                if (n > 0) {
                    memcpy(dst + i, src + iw, (size_t)n);
                    i += n;
                }
            } else {
                for (; i < (int)wq && iw < p->W; i++, iw += p->sw)
                    dst[i] = src[iw];
            }
            if (i < (int)wq)
                memset(dst + i, p->zx, wq - (size_t)i);
        }
}

/* Valid kernel rows [*i0, *i1) of output row oh (input row oh*sh - pt + i*dh inside [0, hu)). */
static inline void valid_rows(const q8_dw_params *p, int hu, int oh, int *i0, int *i1)
{
    const int base = oh * p->sh - p->pt;
    int a = base >= 0 ? 0 : (-base + p->dh - 1) / p->dh;
    int b = base > hu - 1 ? 0 : (hu - 1 - base) / p->dh + 1;
    b = b < p->kh ? b : p->kh;
    *i0 = a < b ? a : b;
    *i1 = b;
}

static void dw_skip_rows(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch, const q8_rq *rq)
{
    const int kh = p->kh, kw = p->kw, T = kh * kw;
    const size_t wq = q8_dw_wq(p);
    const int rows = (int)q8_dw_rows(p);
    int hu = rows - p->pt < p->H ? rows - p->pt : p->H; /* image rows any tap reads */
    hu = hu > 0 ? hu : 0;
    size_t off[Q8_DW_MAX_TAPS]; /* tap (i, j) relative to input row oh*sh - pt */
    for (int i = 0; i < kh; i++)
        for (int j = 0; j < kw; j++) {
            const int col = j * p->dw;
            off[i * kw + j] = ((size_t)(col % p->sw) * hu + (size_t)i * p->dh) * wq + (size_t)(col / p->sw);
        }
    for (int b = 0; b < p->batch; b++)
        for (int c = 0; c < p->C; c++) {
            const size_t plane = (size_t)b * p->C + c;
            pad_image_rows(p, hu, wq, x + plane * p->H * p->W, scratch);
            const int8_t *wc = p->w + (size_t)c * T;
            int32_t rowsum[Q8_DW_MAX_TAPS];
            for (int i = 0; i < kh; i++) {
                rowsum[i] = 0;
                for (int j = 0; j < kw; j++)
                    rowsum[i] += wc[i * kw + j];
            }
            int ci0 = -1, ci1 = -1, G = 0, t0 = 0;
            int32_t bias = 0, w4[Q8_DW_MAX_TAPS / 4 + 1];
            const uint8_t *tp[Q8_DW_MAX_TAPS + 4];
            for (int oh = 0; oh < p->Ho; oh++) {
                int i0, i1;
                valid_rows(p, hu, oh, &i0, &i1);
                if (i0 != ci0 || i1 != ci1) { /* new set of valid rows: its taps, weights and bias */
                    ci0 = i0;
                    ci1 = i1;
                    bias = p->bias[c];
                    for (int i = 0; i < kh; i++)
                        bias += i < i0 || i >= i1 ? (int32_t)p->zx * rowsum[i] : 0;
                    /* start on an even tap: the pairs stay those maddubs_exact checked, a skipped
                     * tap's weight is 0 */
                    t0 = (i0 * kw) & ~1;
                    const int t1 = i1 * kw;
                    G = t1 > t0 ? (t1 - t0 + 3) / 4 : 0;
                    for (int k = 0; k < 4 * G; k++) {
                        const int t = t0 + k;
                        ((int8_t *)w4)[k] = t >= i0 * kw && t < t1 ? wc[t] : 0;
                    }
                }
                /* taps of output row oh; skipped and filler taps read a valid tap's (in-buffer) bytes */
                const ptrdiff_t rb = (ptrdiff_t)(oh * p->sh - p->pt) * (ptrdiff_t)wq;
                for (int k = 0; k < 4 * G; k++) {
                    const int t = t0 + k, v = t >= i0 * kw && t < i1 * kw ? t : i0 * kw;
                    tp[k] = scratch + ((ptrdiff_t)off[v] + rb);
                }
                dw_row_groups(p->Wo, G, tp, w4, bias, p->mult[c], p->shift[c], rq,
                              y + plane * p->Ho * p->Wo + (size_t)oh * p->Wo);
            }
        }
}

void q8_dwconv__avx2_maddubs(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch)
{
    const q8_rq rq = {p->bias, p->mult, p->shift, p->zp, p->qmin, p->qmax};
    if (p->kh * p->kw > Q8_DW_MAX_TAPS || q8_dw_use_flat(p, 32)) {
        q8_dwconv_rows(p, x, y, scratch, 32, dw_row); /* short rows: the flattened plane */
        return;
    }
    dw_skip_rows(p, x, y, scratch, &rq);
}
