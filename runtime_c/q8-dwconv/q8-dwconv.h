/* Int8 depthwise convolution, NCHW, u8 domain (see q8-requant.h); any kxk, stride, dilation, pads.
 * y[c] = requant(bias[c] + sum_taps x[c][tap] * w[c][tap]) with bias already corrected by
 * -zx * sum(w[c]); out-of-image taps read zx. The SIMD variants first copy one channel into
 * scratch, padded with zx and split into `sw` column phases, so every tap of every stride is
 * a contiguous run of pixels (over-read slack included). */
#ifndef Q8_DWCONV_H
#define Q8_DWCONV_H

#include "../q8-requant/q8-requant.h"
#include "../ec_threadpool.h"

typedef struct {
    int batch, C, H, W, kh, kw, sh, sw, dh, dw, pt, pl, Ho, Wo;
    const int8_t *w;                    /* [C][kh*kw] */
    const int32_t *bias, *mult, *shift; /* [C] */
    int32_t zp, qmin, qmax;
    uint8_t zx;
} q8_dw_params;

typedef void (*q8_dwconv_fn)(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch);

/* padded rows and per-phase row width (+32 bytes of slack for 16-byte loads) */
static inline size_t q8_dw_rows(const q8_dw_params *p) { return (size_t)(p->Ho - 1) * p->sh + (size_t)(p->kh - 1) * p->dh + 1; }
static inline size_t q8_dw_wq(const q8_dw_params *p)
{
    size_t wp = (size_t)(p->Wo - 1) * p->sw + (size_t)(p->kw - 1) * p->dw + 1;
    return (wp + p->sw - 1) / p->sw + 32;
}
#define Q8_DW_MAX_TAPS 64 /* larger kernels use the scalar reference */

/* Start of each tap inside the padded, phase-split channel (see q8_dw_pad_channel). */
static inline void q8_dw_tap_offsets(const q8_dw_params *p, size_t off[Q8_DW_MAX_TAPS])
{
    const size_t rows = q8_dw_rows(p), wq = q8_dw_wq(p);
    for (int i = 0; i < p->kh; i++)
        for (int j = 0; j < p->kw; j++) {
            const int col = j * p->dw;
            off[i * p->kw + j] = ((size_t)(col % p->sw) * rows + (size_t)i * p->dh) * wq + (size_t)(col / p->sw);
        }
}

/* Weights of one channel as int16 pairs in an int32 (for vpmaddwd); an odd tap count pairs with 0. */
static inline void q8_dw_pair_weights(const int8_t *wc, int T, int32_t *wpair)
{
    for (int t = 0; t < T; t += 2)
        wpair[t / 2] = (int32_t)(((uint32_t)(uint16_t)(t + 1 < T ? wc[t + 1] : 0) << 16) | (uint16_t)(int16_t)wc[t]);
}

static inline size_t q8_dwconv_scratch_bytes(const q8_dw_params *p)
{
    return (size_t)p->sw * q8_dw_rows(p) * q8_dw_wq(p);
}

/* Runs fn over channel slices in parallel (pool may be NULL); scratch holds EC_MAX_THREADS slices of
 * q8_dwconv_scratch_bytes. */
void q8_dwconv_run(q8_dwconv_fn fn, const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch,
                   ec_pool *pool);

void q8_dw_pad_channel(const q8_dw_params *p, const uint8_t *xc, uint8_t *buf);

void q8_dwconv__scalar(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch);
void q8_dwconv__avx2(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch);
void q8_dwconv__neon(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch);
void q8_dwconv__avx512(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch);

#endif
