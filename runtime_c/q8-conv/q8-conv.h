/* Int8 convolution (any kxk, stride, dilation, pads, groups) and MatMul as packed GEMM.
 * Activations u8 domain NCHW (see q8-requant.h). Per group: im2col straight into the q8 GEMM's
 * packed layout (a plain interleave for 1x1 stride 1), then the target's q8 GEMM. */
#ifndef Q8_CONV_H
#define Q8_CONV_H

#include "../q8-gemm/q8-gemm.h"
#include "../ec_threadpool.h"

typedef struct {
    q8_conv_shape s;       /* per-group input channels in s.C */
    int batch, groups, ocg; /* ocg = output channels per group */
    const int8_t *wp;      /* groups x q8_pack_w(ocg, s.C*kh*kw), consecutive */
    const int32_t *bias, *mult, *shift; /* groups x ceil4(ocg), bias corrected for zx / flip */
    int32_t zp, qmin, qmax;
    uint8_t zx, flip;      /* input zero point (padding value); 0x80 if the GEMM reads signed X */
    q8_gemm_fn gemm;
    const float *scale;    /* like mult, or NULL: fp32 requantization (kernels that support it, q8-requant.h) */
} q8_conv_params;

/* scratch: one group's packed input, then its zero-point padded copy */
static inline size_t q8_conv_scratch_bytes(const q8_conv_params *p)
{
    const size_t K = (size_t)p->s.C * p->s.kh * p->s.kw, N = (size_t)p->s.Ho * p->s.Wo;
    return q8_pack_x_bytes(K, N) + (size_t)p->s.C * q8_im2col_hp(&p->s) * q8_im2col_wp(&p->s) + 32;
}

/* pool may be NULL (serial); with threads the GEMM of each group is split over 32-pixel chunks, and its packing
 * (from 64 KB packed) over channels / groups of 4 input rows. */
void q8_conv(const q8_conv_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch, ec_pool *pool);

/* Y[rows][M] = A[rows][K] x B, B given as W[M][K] = B^T packed by q8_pack_w; scratch holds
 * q8_pack_x_bytes(K, rows) + rows * ceil4(M) bytes. rq as in the GEMM (bias corrected). */
void q8_matmul(size_t rows, size_t M, size_t K, const uint8_t *A, const int8_t *wp, const q8_rq *rq,
               uint8_t flip, q8_gemm_fn gemm, uint8_t *Y, uint8_t *scratch);

static inline size_t q8_matmul_scratch_bytes(size_t rows, size_t M, size_t K)
{
    return q8_pack_x_bytes(K, rows) + rows * ((M + 3) / 4 * 4);
}

#endif
