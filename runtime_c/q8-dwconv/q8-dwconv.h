/* Int8 depthwise convolution, NCHW, u8 domain (see q8-requant.h); any kxk, stride, dilation, pads.
 * y[c] = requant(bias[c] + sum_taps x[c][tap] * w[c][tap]) with bias already corrected by
 * -zx * sum(w[c]); out-of-image taps read zx. The SIMD variants first copy one channel into
 * scratch, padded with zx and split into `sw` column phases, so every tap of every stride is
 * a contiguous run of pixels (over-read slack included). */
#ifndef Q8_DWCONV_H
#define Q8_DWCONV_H

#include <string.h>

#include "../q8-requant/q8-requant.h"
#include "../ec_threadpool.h"

typedef struct {
    int batch, C, H, W, kh, kw, sh, sw, dh, dw, pt, pl, Ho, Wo;
    const int8_t *w;                    /* [C][kh*kw] */
    const int32_t *bias, *mult, *shift; /* [C] */
    int32_t zp, qmin, qmax;
    uint8_t zx;
    /* optional, packed at compile time for the VNNI kernel (NULL: it derives them per channel):
     * quad [C][kh][ceil(kw/4)]: taps 4k..4k+3 of a kernel row, tap 4k+t in byte t, 0 past kw;
     * zrow [C][kh]: zx * the sum of a kernel row's weights (what a row wholly in the padding adds) */
    const int32_t *quad, *zrow;
    const float *scale; /* [C] or NULL: fp32 requantization in the AVX-512 kernels and the reference (q8-requant.h) */
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

/* Stride 1, narrow maps: the channel padded with row stride wp (no per-row slack, q8_dw_pad_flat) is
 * computed as one run of (Ho-1)*wp + Wo outputs over the flattened plane (the wp - Wo outputs between
 * rows are dropped when copying out): fewer vector steps than one per output row when Wo is short of
 * the vector width. */
static inline size_t q8_dw_flat_wp(const q8_dw_params *p) { return (size_t)(p->Wo - 1) + (size_t)(p->kw - 1) * p->dw + 1; }
static inline size_t q8_dw_flat_n(const q8_dw_params *p) { return (size_t)(p->Ho - 1) * q8_dw_flat_wp(p) + (size_t)p->Wo; }
static inline int q8_dw_use_flat(const q8_dw_params *p, size_t vec)
{
    return p->sh == 1 && p->sw == 1 &&
           (q8_dw_flat_n(p) + vec - 1) / vec < (size_t)p->Ho * (((size_t)p->Wo + vec - 1) / vec);
}
/* flat layout: rows x wp padded plane, 64 bytes of over-read slack, then the nf-byte output run */
static inline size_t q8_dw_flat_bytes(const q8_dw_params *p) { return q8_dw_rows(p) * q8_dw_flat_wp(p) + 64 + q8_dw_flat_n(p); }

/* The channel-lane kernel (q8-dwconv-c16-avx512vnni.c) keeps, per group of 16 channels, a ring of the
 * q8_dw_c16_ring input rows one output row reads, each as q8_dw_c16_wins 64-byte windows (4 taps of 16
 * channels). It runs where the fp32 scales are set, the
 * horizontal dilation is 1 and that stays within Q8_DW_C16_MAX_BYTES (in L2 per thread); else the
 * pixel-lane kernel. */
#define Q8_DW_C16_MAX_BYTES 65536
static inline size_t q8_dw_c16_wins(const q8_dw_params *p) /* for whole blocks of 16 output pixels */
{
    return ((size_t)p->Wo + 15) / 16 * 16 * p->sw + 4 * (size_t)((p->kw + 3) / 4 - 1);
}
static inline size_t q8_dw_c16_ring(const q8_dw_params *p) { return (size_t)(p->kh - 1) * p->dh + 1; }
/* a ring slot's slack in windows: rows are built 16 windows at a time from the one starting 4 left of pad */
#define Q8_DW_C16_LEAD 4
#define Q8_DW_C16_TAIL 16
static inline size_t q8_dw_c16_bytes(const q8_dw_params *p)
{
    return q8_dw_c16_ring(p) * (q8_dw_c16_wins(p) + Q8_DW_C16_LEAD + Q8_DW_C16_TAIL) * 64;
}
static inline int q8_dw_c16_ok(const q8_dw_params *p)
{
    return p->scale && p->dw == 1 && p->kh * p->kw <= Q8_DW_MAX_TAPS && q8_dw_c16_bytes(p) <= Q8_DW_C16_MAX_BYTES;
}

static inline size_t q8_dwconv_scratch_bytes(const q8_dw_params *p)
{
    const size_t phased = (size_t)p->sw * q8_dw_rows(p) * q8_dw_wq(p);
    const size_t b = phased > q8_dw_flat_bytes(p) ? phased : q8_dw_flat_bytes(p);
    return q8_dw_c16_ok(p) && q8_dw_c16_bytes(p) > b ? q8_dw_c16_bytes(p) : b;
}

/* One output row of channel c from T tap pointers (vector kernels' inner step). */
typedef void (*q8_dw_row_fn)(const q8_dw_params *p, int c, int T, const uint8_t *const *tap, const int32_t *wpair,
                             uint8_t *yr, const q8_rq *rq);

void q8_dw_pad_flat(const q8_dw_params *p, const uint8_t *xc, uint8_t *buf);

/* The flat path (see q8_dw_use_flat) over a vector kernel's row step: the whole run as one "row". */
static inline void q8_dwconv_flat(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch,
                                  const q8_rq *rq, q8_dw_row_fn row)
{
    const int T = p->kh * p->kw;
    const size_t wp = q8_dw_flat_wp(p), nf = q8_dw_flat_n(p), hw = (size_t)p->Ho * p->Wo;
    uint8_t *run = scratch + q8_dw_rows(p) * wp + 64;
    q8_dw_params q = *p;
    q.Wo = (int)nf;
    for (int b = 0; b < p->batch; b++)
        for (int c = 0; c < p->C; c++) {
            const size_t plane = (size_t)b * p->C + c;
            q8_dw_pad_flat(p, x + plane * p->H * p->W, scratch);
            int32_t wpair[Q8_DW_MAX_TAPS / 2 + 1];
            q8_dw_pair_weights(p->w + (size_t)c * T, T, wpair);
            const uint8_t *tap[Q8_DW_MAX_TAPS + 1];
            for (int i = 0; i < p->kh; i++)
                for (int j = 0; j < p->kw; j++)
                    tap[i * p->kw + j] = scratch + (size_t)i * p->dh * wp + (size_t)j * p->dw;
            tap[T] = tap[0]; /* odd tap count: paired with a zero weight */
            row(&q, c, T, tap, wpair, run, rq);
            for (int oh = 0; oh < p->Ho; oh++)
                memcpy(y + plane * hw + (size_t)oh * p->Wo, run + (size_t)oh * wp, (size_t)p->Wo);
        }
}

void q8_dw_pad_channel(const q8_dw_params *p, const uint8_t *xc, uint8_t *buf);
void q8_dwconv__scalar(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch);

/* A vector kernel's whole layer from its row step: the flat path when it takes fewer vector steps
 * (rows of `vec` pixels), else plane by plane, row by row; windows past Q8_DW_MAX_TAPS go scalar. */
static inline void q8_dwconv_rows(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch,
                                  size_t vec, q8_dw_row_fn row)
{
    const int T = p->kh * p->kw;
    if (T > Q8_DW_MAX_TAPS) {
        q8_dwconv__scalar(p, x, y, scratch);
        return;
    }
    const q8_rq rq = {p->bias, p->mult, p->shift, p->zp, p->qmin, p->qmax, p->scale};
    if (q8_dw_use_flat(p, vec)) {
        q8_dwconv_flat(p, x, y, scratch, &rq, row);
        return;
    }
    const size_t wq = q8_dw_wq(p);
    size_t off[Q8_DW_MAX_TAPS];
    q8_dw_tap_offsets(p, off);
    for (int b = 0; b < p->batch; b++)
        for (int c = 0; c < p->C; c++) {
            const size_t plane = (size_t)b * p->C + c;
            q8_dw_pad_channel(p, x + plane * p->H * p->W, scratch);
            int32_t wpair[Q8_DW_MAX_TAPS / 2 + 1];
            q8_dw_pair_weights(p->w + (size_t)c * T, T, wpair);
            for (int oh = 0; oh < p->Ho; oh++) {
                const uint8_t *tap[Q8_DW_MAX_TAPS + 1];
                for (int t = 0; t < T; t++)
                    tap[t] = scratch + off[t] + (size_t)oh * p->sh * wq;
                tap[T] = tap[0]; /* odd tap count: paired with a zero weight */
                row(p, c, T, tap, wpair, y + plane * p->Ho * p->Wo + (size_t)oh * p->Wo, &rq);
            }
        }
}

/* Runs fn over channel slices in parallel (pool may be NULL); scratch holds EC_MAX_THREADS slices of
 * q8_dwconv_scratch_bytes. */
void q8_dwconv_run(q8_dwconv_fn fn, const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch,
                   ec_pool *pool);

/* A u8 -> u8 table pass (q8_lut and its SIMD variants, q8-eltwise.h); works in place. */
typedef void (*q8_dw_lut_fn)(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y);
#define Q8_DW_LUT_CHUNK 4096 /* output bytes per kernel call before the table runs over them (in L1) */
/* q8_dwconv_run followed by y = lut[y] (a fused HardSwish / HardSigmoid table): the kernel runs on
 * chunks of whole groups of 16 channels, about Q8_DW_LUT_CHUNK output bytes (16 channels at least), and the
 * table over each chunk right after, instead of a separate pass over the layer's output. */
void q8_dwconv_run_lut(q8_dwconv_fn fn, const q8_dw_params *p, const uint8_t *lut, q8_dw_lut_fn lf,
                       const uint8_t *x, uint8_t *y, uint8_t *scratch, ec_pool *pool);

void q8_dwconv__avx2(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch);
/* vpmaddubsw: exact only when every tap pair (0,1), (2,3), ... of each channel keeps the u8 x s8 pair
 * sum within int16 (all 7-bit weights; see q8-dwconv-avx2-tmpl.h) */
void q8_dwconv__avx2_maddubs(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch);
/* the same, where every consecutive tap pair (t, t+1), odd t too, fits the pair sum (every 7-bit weight set):
 * output rows that read the same image rows (maps shorter than the window) share their taps' interleaving */
void q8_dwconv__avx2_maddubs_shared(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch);
/* AVX-VNNI (VEX vpdpbusd): the maddubs kernels' tiling with an exact 4-tap step, any int8 weights */
void q8_dwconv__avxvnni(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch);
void q8_dwconv__neon(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch);
void q8_dwconv__avx512(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch);
/* AVX-512 VNNI + VBMI (horizontal stride/dilation 1; else the AVX-512BW kernel) */
void q8_dwconv__avx512vnni(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch);
/* AVX-512 VNNI + VBMI, 16 channels in the lanes (q8_dw_c16_ok; else q8_dwconv__avx512vnni) */
void q8_dwconv_c16__avx512vnni(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch);

#endif
