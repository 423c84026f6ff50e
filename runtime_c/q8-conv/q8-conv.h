/* Int8 convolution (any kxk, stride, dilation, pads, groups) and MatMul as packed GEMM.
 * Activations u8 domain NCHW (see q8-requant.h). Per group: im2col straight into the q8 GEMM's
 * packed layout (a plain interleave for 1x1 stride 1), then the target's q8 GEMM.
 * With an implicit GEMM (igemm set): no im2col. The input is copied once, zero-point padded and split into the
 * stride's phases, as [C/4][sh][sw][hq][wq][4 channels] (q8_pack_pad4); output pixel n = oh * wq + ow of an
 * "extended" row wq wide then reads tap (i, j) of channels 4c..4c+3 at a fixed offset from pixel n (in phase
 * (i dh % sh, j dw % sw), (i dh / sh) rows and (j dw / sw) columns on), so the GEMM walks the copy in place. The
 * wq - Wo extra columns per row are computed and dropped (rows are compacted into y). Weights for it: k = (c4, tap,
 * 4 channels), channels padded to a multiple of 4 with zero weights (codegen's qpack.pack_w_implicit). */
#ifndef Q8_CONV_H
#define Q8_CONV_H

#include "../q8-gemm/q8-gemm.h"
#include "../ec_threadpool.h"

/* weight layouts: q8_pack_w's (implicit: k = (c4, tap, 4 channels)), or the AMX kernels' q8_pack_w_amx (implicit:
 * k = (tap, c4, 4 channels), so each 16-step block is 16 channel quads of one tap, planes a fixed stride apart) */
enum { Q8_WLAYOUT_PACK = 0, Q8_WLAYOUT_AMX = 1 };

/* a u8 -> u8 table pass (q8_lut and its SIMD variants); works in place */
typedef void (*q8_conv_lut_fn)(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y);

typedef struct {
    q8_conv_shape s;       /* per-group input channels in s.C */
    int batch, groups, ocg; /* ocg = output channels per group */
    const int8_t *wp;      /* groups x q8_pack_w(ocg, s.C*kh*kw), consecutive */
    const int32_t *bias, *mult, *shift; /* groups x ceil4(ocg), bias corrected for zx / flip */
    int32_t zp, qmin, qmax;
    uint8_t zx, flip;      /* input zero point (padding value); 0x80 if the GEMM reads signed X */
    q8_gemm_fn gemm;
    const float *scale;    /* like mult, or NULL: fp32 requantization (kernels that support it, q8-requant.h) */
    q8_igemm_fn igemm;     /* non-NULL: the implicit path above, wp holding its weights */
    int wlayout;           /* Q8_WLAYOUT_*: the GEMM's weight layout */
    /* non-NULL: the channel-lane GEMM instead of gemm / igemm (q8-gemm.h; ocg a multiple of 16, wp packed by
     * q8_pack_w_c32): kxk convs read the implicit path's padded copy (its weight order), writing compact rows */
    q8_cgemm_fn cgemm;
    /* Q8_X_C4 / Q8_Y_C4: input / output in the blocked layout (q8-gemm.h; one group, channels a multiple of 4).
     * A blocked input serves 1x1 convs (stride 1: read in place as the packed X; strided: q8_im2col_direct_c4) and
     * the channel-lane GEMM's kxk convs (q8_pack_pad4_c4); a blocked output needs a _c4 gemm / cgemm and no
     * implicit pixel-lane GEMM. */
    int io;
    /* non-NULL: y = lut[y], a u8 -> u8 table fused into the conv (codegen/fuse.py fuse_q8_luts), applied by each
     * task to the part of y it has just stored, while it is in cache and on the pool's threads; lut_fn is the
     * target's table kernel (q8-eltwise.h) */
    const uint8_t *lut;
    q8_conv_lut_fn lut_fn;
} q8_conv_params;

enum { Q8_X_C4 = 1, Q8_Y_C4 = 2 };

static inline int q8_conv_implicit(const q8_conv_params *p)
{
    return p->igemm != NULL || (p->cgemm != NULL && p->s.kh * p->s.kw > 1);
}

/* the implicit path's padded copy (q8_pack_pad4) and the slack the GEMM's last 32-pixel tile reads past it */
static inline size_t q8_conv_pad4_bytes(const q8_conv_shape *s)
{
    return (size_t)(s->C + 3) / 4 * s->sh * s->sw * q8_pad4_hq(s) * q8_pad4_wq(s) * 4 + 4 * (32 + (size_t)s->kw * s->dw) +
           64;
}

/* scratch: one group's packed input, then its zero-point padded copy (the channel-lane GEMM: then the k4 offsets);
 * implicit: the padded copy, the extended output rows of one group (not for the channel-lane GEMM), the k4 offsets */
static inline size_t q8_conv_scratch_bytes(const q8_conv_params *p)
{
    const size_t K = (size_t)p->s.C * p->s.kh * p->s.kw, N = (size_t)p->s.Ho * p->s.Wo;
    if (q8_conv_implicit(p))
        return q8_conv_pad4_bytes(&p->s) + (p->cgemm ? 0 : (size_t)p->ocg * p->s.Ho * q8_pad4_wq(&p->s)) +
               4 * ((size_t)(p->s.C + 3) / 4 * p->s.kh * p->s.kw) + 64;
    return q8_pack_x_bytes(K, N) + (size_t)p->s.C * q8_im2col_hp(&p->s) * q8_im2col_wp(&p->s) + 32 +
           (p->cgemm ? 4 * ((K + 3) / 4) + 4 : 0);
}

/* pool may be NULL (serial); with threads the GEMM of each group is split over 32-pixel chunks, and its packing
 * (from 64 KB packed) over channels / groups of 4 input rows. */
void q8_conv(const q8_conv_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch, ec_pool *pool);

/* Y[rows][M] = A[rows][K] x B, B given as W[M][K] = B^T packed for gemm (wlayout: Q8_WLAYOUT_*); scratch holds
 * q8_pack_x_bytes(K, rows) + rows * ceil4(M) bytes. rq as in the GEMM (bias corrected). pool may be NULL: few rows
 * split the output channels among its threads. */
void q8_matmul(size_t rows, size_t M, size_t K, const uint8_t *A, const int8_t *wp, const q8_rq *rq,
               uint8_t flip, q8_gemm_fn gemm, int wlayout, uint8_t *Y, uint8_t *scratch, ec_pool *pool);

static inline size_t q8_matmul_scratch_bytes(size_t rows, size_t M, size_t K)
{
    return q8_pack_x_bytes(K, rows) + rows * ((M + 3) / 4 * 4);
}

#endif
