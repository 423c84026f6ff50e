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

/* nb (1..4, a constant after inlining) independent 16-pixel blocks at ow0: a single accumulator would
 * serialise kh * ceil(kw/4) vpdpbusd latencies */
static inline void dw_blocks(const q8_dw_params *p, int c, int nq, const uint8_t *const *row, const int32_t *quad,
                             uint8_t *yr, int ow0, int wo, int nb, const q8_rq *rq)
{
    const __m512i win = _mm512_set_epi8(18, 17, 16, 15, 17, 16, 15, 14, 16, 15, 14, 13, 15, 14, 13, 12, 14, 13, 12, 11,
                                        13, 12, 11, 10, 12, 11, 10, 9, 11, 10, 9, 8, 10, 9, 8, 7, 9, 8, 7, 6, 8, 7, 6, 5,
                                        7, 6, 5, 4, 6, 5, 4, 3, 5, 4, 3, 2, 4, 3, 2, 1, 3, 2, 1, 0);
    __m512i acc[4];
    for (int b = 0; b < nb; b++)
        acc[b] = _mm512_set1_epi32(p->bias[c]);
    for (int i = 0; i < p->kh; i++)
        for (int k = 0; k < nq; k++) {
            const __m512i wv = _mm512_set1_epi32(quad[i * nq + k]);
            const uint8_t *src = row[i] + ow0 + 4 * k;
            for (int b = 0; b < nb; b++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(src + 16 * b));
                acc[b] = _mm512_dpbusd_epi32(acc[b], _mm512_permutexvar_epi8(win, _mm512_castsi256_si512(v)), wv);
            }
        }
    for (int b = 0; b < nb; b++) {
        const int o = ow0 + 16 * b, n = wo - o < 16 ? wo - o : 16;
        _mm_mask_storeu_epi8(yr + o, (__mmask16)((1u << n) - 1), q8_rq16_avx512(acc[b], rq, (size_t)c));
    }
}

/* row[i]: start of the padded input row for kernel row i; quad[i * nq + k]: taps 4k..4k+3 of row i */
static void dw_row(const q8_dw_params *p, int c, int nq, const uint8_t *const *row, const int32_t *quad,
                   uint8_t *yr, int wo, const q8_rq *rq)
{
    int ow0 = 0;
    for (; wo - ow0 > 48; ow0 += 64) /* 4 blocks, the last one possibly partial */
        dw_blocks(p, c, nq, row, quad, yr, ow0, wo, 4, rq);
    switch ((wo - ow0 + 15) / 16) {
    case 3: dw_blocks(p, c, nq, row, quad, yr, ow0, wo, 3, rq); break;
    case 2: dw_blocks(p, c, nq, row, quad, yr, ow0, wo, 2, rq); break;
    case 1: dw_blocks(p, c, nq, row, quad, yr, ow0, wo, 1, rq); break;
    default: break;
    }
}

static int quads(const q8_dw_params *p, int c, int32_t *quad)
{
    const int nq = (p->kw + 3) / 4;
    const int8_t *wc = p->w + (size_t)c * p->kh * p->kw;
    for (int i = 0; i < p->kh; i++)
        for (int k = 0; k < nq; k++) {
            uint32_t v = 0;
            for (int t = 0; t < 4; t++)
                if (4 * k + t < p->kw)
                    v |= (uint32_t)(uint8_t)wc[i * p->kw + 4 * k + t] << (8 * t);
            quad[i * nq + k] = (int32_t)v;
        }
    return nq;
}

void q8_dwconv__avx512vnni(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch)
{
    if (p->sw != 1 || p->dw != 1 || p->kh * p->kw > Q8_DW_MAX_TAPS) {
        q8_dwconv__avx512(p, x, y, scratch);
        return;
    }
    const q8_rq rq = {p->bias, p->mult, p->shift, p->zp, p->qmin, p->qmax};
    const int flat = q8_dw_use_flat(p, 16);
    /* flat: one run of q8_dw_flat_n outputs over rows of stride wp (see q8-dwconv.h) */
    const size_t stride = flat ? q8_dw_flat_wp(p) : q8_dw_wq(p), hw = (size_t)p->Ho * p->Wo;
    uint8_t *run = scratch + q8_dw_rows(p) * stride + 64;
    for (int b = 0; b < p->batch; b++)
        for (int c = 0; c < p->C; c++) {
            const size_t plane = (size_t)b * p->C + c;
            int32_t quad[MAX_QUADS];
            const int nq = quads(p, c, quad);
            const uint8_t *row[Q8_DW_MAX_TAPS];
            uint8_t *yc = y + plane * hw;
            if (flat) {
                q8_dw_pad_flat(p, x + plane * p->H * p->W, scratch);
                for (int i = 0; i < p->kh; i++)
                    row[i] = scratch + (size_t)i * p->dh * stride;
                dw_row(p, c, nq, row, quad, run, (int)q8_dw_flat_n(p), &rq);
                for (int oh = 0; oh < p->Ho; oh++)
                    memcpy(yc + (size_t)oh * p->Wo, run + (size_t)oh * stride, (size_t)p->Wo);
                continue;
            }
            q8_dw_pad_channel(p, x + plane * p->H * p->W, scratch);
            for (int oh = 0; oh < p->Ho; oh++) {
                for (int i = 0; i < p->kh; i++)
                    row[i] = scratch + ((size_t)oh * p->sh + (size_t)i * p->dh) * stride;
                dw_row(p, c, nq, row, quad, yc + (size_t)oh * p->Wo, p->Wo, &rq);
            }
        }
}
