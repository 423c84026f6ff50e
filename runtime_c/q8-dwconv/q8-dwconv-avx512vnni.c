/* Int8 depthwise conv for AVX-512 VNNI + VBMI, horizontal stride and dilation 1: one vpermb turns a
 * row of input bytes into 16 overlapping 4-byte windows (pixel q's lane holds x[q + j .. q + j + 3]),
 * one vpdpbusd multiplies them by 4 taps of a kernel row (broadcast; taps past kw have weight 0):
 * 16 pixels x 4 taps per instruction. Any kh, vertical stride and dilation; other horizontal strides
 * or dilations use the AVX-512BW kernel. */
#include <immintrin.h>
#include <string.h>

#include "q8-dwconv.h"
#include "../q8-requant/q8-rq-avx512.h"

#define MAX_QUADS (Q8_DW_MAX_TAPS + 3 * 8) /* kh * ceil(kw / 4) for kh * kw <= Q8_DW_MAX_TAPS */

/* The input rows one step reads: two output rows at a time (A and B) where their windows overlap, so
 * each shifted window (one vpermb) feeds both rows' vpdpbusd and there are twice the independent
 * accumulators (a single row's 16-pixel blocks alone left its chains latency-bound). Rows wholly in
 * the top or bottom padding are left out: they read only zx, a constant folded into acc0. */
typedef struct {
    int n, two;                           /* rows read; whether output row B exists */
    const uint8_t *row[2 * Q8_DW_MAX_TAPS]; /* padded input rows */
    int ia[2 * Q8_DW_MAX_TAPS], ib[2 * Q8_DW_MAX_TAPS]; /* kernel row of A / B reading it, -1: none */
    int32_t acc0[2];
} dw_rows;

/* one input row's taps into A's and/or B's accumulators (ua, ub constant after inlining) */
static inline __attribute__((always_inline)) void dw_taps(int ua, int ub, const uint8_t *src, const int32_t *qa,
                                                          const int32_t *qb, int nq, int nb, __m512i win,
                                                          __m512i *a, __m512i *b2)
{
    for (int k = 0; k < nq; k++, src += 4) {
        const __m512i wa = _mm512_set1_epi32(qa[k]), wb = _mm512_set1_epi32(qb[k]);
        for (int b = 0; b < nb; b++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(src + 16 * b));
            const __m512i x = _mm512_permutexvar_epi8(win, _mm512_castsi256_si512(v));
            if (ua)
                a[b] = _mm512_dpbusd_epi32(a[b], x, wa);
            if (ub)
                b2[b] = _mm512_dpbusd_epi32(b2[b], x, wb);
        }
    }
}

/* nb (1..4, a constant after inlining) 16-pixel blocks at ow0 of A (ya) and B (yb) */
static inline void dw_blocks(const dw_rows *R, int nq, const int32_t *quad, uint8_t *ya, uint8_t *yb, int ow0,
                             int wo, int nb, const q8_rq *rq, int c)
{
    const __m512i win = _mm512_set_epi8(18, 17, 16, 15, 17, 16, 15, 14, 16, 15, 14, 13, 15, 14, 13, 12, 14, 13, 12, 11,
                                        13, 12, 11, 10, 12, 11, 10, 9, 11, 10, 9, 8, 10, 9, 8, 7, 9, 8, 7, 6, 8, 7, 6, 5,
                                        7, 6, 5, 4, 6, 5, 4, 3, 5, 4, 3, 2, 4, 3, 2, 1, 3, 2, 1, 0);
    __m512i a[4], b2[4];
    for (int b = 0; b < nb; b++) {
        a[b] = _mm512_set1_epi32(R->acc0[0]);
        b2[b] = _mm512_set1_epi32(R->acc0[1]);
    }
    for (int j = 0; j < R->n; j++) {
        const int ia = R->ia[j], ib = R->ib[j];
        const uint8_t *src = R->row[j] + ow0;
        if (ia >= 0 && ib >= 0)
            dw_taps(1, 1, src, quad + ia * nq, quad + ib * nq, nq, nb, win, a, b2);
        else if (ia >= 0)
            dw_taps(1, 0, src, quad + ia * nq, quad, nq, nb, win, a, b2);
        else
            dw_taps(0, 1, src, quad, quad + ib * nq, nq, nb, win, a, b2);
    }
    const q8_rq16_row k = q8_rq16_row_avx512(rq, (size_t)c);
    for (int b = 0; b < nb; b++) {
        const int o = ow0 + 16 * b, n = wo - o < 16 ? wo - o : 16;
        _mm_mask_storeu_epi8(ya + o, (__mmask16)((1u << n) - 1), q8_rq16_apply_avx512(a[b], &k));
        if (R->two)
            _mm_mask_storeu_epi8(yb + o, (__mmask16)((1u << n) - 1), q8_rq16_apply_avx512(b2[b], &k));
    }
}

/* quad[i * nq + k]: taps 4k..4k+3 of kernel row i */
static void dw_row(const dw_rows *R, int c, int nq, const int32_t *quad, uint8_t *ya, uint8_t *yb, int wo,
                   const q8_rq *rq)
{
    int ow0 = 0;
    for (; wo - ow0 > 48; ow0 += 64) /* 4 blocks, the last one possibly partial */
        dw_blocks(R, nq, quad, ya, yb, ow0, wo, 4, rq, c);
    switch ((wo - ow0 + 15) / 16) {
    case 3: dw_blocks(R, nq, quad, ya, yb, ow0, wo, 3, rq, c); break;
    case 2: dw_blocks(R, nq, quad, ya, yb, ow0, wo, 2, rq, c); break;
    case 1: dw_blocks(R, nq, quad, ya, yb, ow0, wo, 1, rq, c); break;
    default: break;
    }
}

static int quads(const q8_dw_params *p, int c, int32_t *quad)
{
    const int nq = (p->kw + 3) / 4, T = p->kh * p->kw;
    int8_t wc[Q8_DW_MAX_TAPS + 4] = {0}; /* 4-byte reads past the last tap stay inside */
    memcpy(wc, p->w + (size_t)c * T, (size_t)T);
    for (int k = 0; k < nq; k++) {
        const int n = p->kw - 4 * k; /* taps of this quad within the row: the rest get weight 0 */
        const uint32_t keep = n >= 4 ? ~0u : (1u << (8 * n)) - 1;
        for (int i = 0; i < p->kh; i++) {
            uint32_t v;
            memcpy(&v, wc + i * p->kw + 4 * k, 4);
            quad[i * nq + k] = (int32_t)(v & keep);
        }
    }
    return nq;
}

/* The padded channel's rows that hold input (rows wholly in the top or bottom padding are never read:
 * see pad_sum below): zx around the input row, written with vector stores, no libc call per row (the
 * per-row memset/memcpy of q8_dw_pad_channel cost more than the arithmetic on ppocr's 2x96 maps). */
static void pad_rows(const q8_dw_params *p, const uint8_t *xc, uint8_t *buf, size_t wq)
{
    const __m512i z = _mm512_set1_epi8((char)p->zx);
    const size_t rows = q8_dw_rows(p), n = (size_t)p->W < wq - (size_t)p->pl ? (size_t)p->W : wq - (size_t)p->pl;
    for (int ih = 0; ih < p->H && (size_t)(ih + p->pt) < rows; ih++) {
        if (ih + p->pt < 0)
            continue;
        uint8_t *dst = buf + (size_t)(ih + p->pt) * wq;
        for (size_t o = 0; o < wq; o += 64)
            _mm512_mask_storeu_epi8(dst + o, wq - o >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (wq - o)) - 1, z);
        const uint8_t *src = xc + (size_t)ih * p->W;
        for (size_t o = 0; o < n; o += 64) {
            const __mmask64 m = n - o >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (n - o)) - 1;
            _mm512_mask_storeu_epi8(dst + p->pl + o, m, _mm512_maskz_loadu_epi8(m, src + o));
        }
    }
}

void q8_dwconv__avx512vnni(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch)
{
    if (p->sw != 1 || p->dw != 1 || p->kh * p->kw > Q8_DW_MAX_TAPS) {
        q8_dwconv__avx512(p, x, y, scratch);
        return;
    }
    const q8_rq rq = {p->bias, p->mult, p->shift, p->zp, p->qmin, p->qmax, p->scale};
    const int flat = q8_dw_use_flat(p, 16);
    /* flat: one run of q8_dw_flat_n outputs over rows of stride wp (see q8-dwconv.h) */
    const size_t stride = flat ? q8_dw_flat_wp(p) : q8_dw_wq(p), hw = (size_t)p->Ho * p->Wo;
    uint8_t *run = scratch + q8_dw_rows(p) * stride + 64;
    for (int b = 0; b < p->batch; b++)
        for (int c = 0; c < p->C; c++) {
            const size_t plane = (size_t)b * p->C + c;
            int32_t qbuf[MAX_QUADS];
            const int nq = (p->kw + 3) / 4;
            const int32_t *quad = p->quad ? p->quad + (size_t)c * p->kh * nq : (quads(p, c, qbuf), qbuf);
            uint8_t *yc = y + plane * hw;
            dw_rows R;
            if (flat) {
                q8_dw_pad_flat(p, x + plane * p->H * p->W, scratch);
                R.n = p->kh;
                R.two = 0;
                R.acc0[0] = R.acc0[1] = p->bias[c];
                for (int i = 0; i < p->kh; i++) {
                    R.row[i] = scratch + (size_t)i * p->dh * stride;
                    R.ia[i] = i;
                    R.ib[i] = -1;
                }
                dw_row(&R, c, nq, quad, run, run, (int)q8_dw_flat_n(p), &rq);
                for (int oh = 0; oh < p->Ho; oh++)
                    memcpy(yc + (size_t)oh * p->Wo, run + (size_t)oh * stride, (size_t)p->Wo);
                continue;
            }
            pad_rows(p, x + plane * p->H * p->W, scratch, stride);
            /* a kernel row wholly in the top or bottom padding reads only zx: zx * (its weights' sum) */
            int32_t zbuf[Q8_DW_MAX_TAPS];
            const int32_t *pad_sum = p->zrow ? p->zrow + (size_t)c * p->kh : zbuf;
            if (!p->zrow) {
                const int8_t *wc = p->w + (size_t)c * p->kh * p->kw;
                for (int i = 0; i < p->kh; i++) {
                    int32_t s = 0;
                    for (int j = 0; j < p->kw; j++)
                        s += wc[i * p->kw + j];
                    zbuf[i] = s * (int32_t)p->zx;
                }
            }
            for (int oh = 0; oh < p->Ho;) {
                /* pairs share rows only with dilation 1 and a vertical stride within the window */
                R.two = oh + 1 < p->Ho && p->dh == 1 && p->sh < p->kh;
                R.n = 0;
                for (int o = 0; o <= R.two; o++) {
                    R.acc0[o] = p->bias[c];
                    for (int i = 0; i < p->kh; i++) {
                        const int ih = (oh + o) * p->sh + i * p->dh - p->pt;
                        if (ih < 0 || ih >= p->H)
                            R.acc0[o] += pad_sum[i];
                    }
                }
                const int r0 = oh * p->sh;
                if (R.two) { /* dilation 1: rows r0 .. r0 + sh + kh - 1, A's from r0, B's from r0 + sh */
                    for (int r = r0; r < r0 + p->sh + p->kh; r++) {
                        if (r - p->pt < 0 || r - p->pt >= p->H)
                            continue;
                        R.row[R.n] = scratch + (size_t)r * stride;
                        R.ia[R.n] = r - r0 < p->kh ? r - r0 : -1;
                        R.ib[R.n] = r - r0 >= p->sh ? r - r0 - p->sh : -1;
                        R.n++;
                    }
                } else {
                    for (int i = 0; i < p->kh; i++) {
                        const int r = r0 + i * p->dh;
                        if (r - p->pt < 0 || r - p->pt >= p->H)
                            continue;
                        R.row[R.n] = scratch + (size_t)r * stride;
                        R.ia[R.n] = i;
                        R.ib[R.n] = -1;
                        R.n++;
                    }
                }
                dw_row(&R, c, nq, quad, yc + (size_t)oh * p->Wo, yc + (size_t)(oh + 1) * p->Wo, p->Wo, &rq);
                oh += 1 + R.two;
            }
        }
}
