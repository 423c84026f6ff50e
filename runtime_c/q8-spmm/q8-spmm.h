/* Int8 sparse weights x dense activations for 1x1 convolutions, NCHW, u8 domain (q8-requant.h):
 * Y[m][n] = requant(bias[m] + sum_k W[m][k] X[k][n]) with W block-sparse (BSR, br output x bc input
 * channels; CSR = 1x1), int8 values, int32 accumulation, bias corrected by -zx * sum_k W[m][k] as for
 * the dense GEMM. X rows x_stride bytes apart, Y rows y_stride apart. */
#ifndef Q8_SPMM_H
#define Q8_SPMM_H

#include "../q8-requant/q8-requant.h"

typedef struct {
    int br, bc;
    const int32_t *row_ptr; /* [ceil(M/br) + 1] */
    const int32_t *col;     /* [nblocks] first input channel of each block */
    const int8_t *val;      /* [nblocks][br][bc] */
} q8_bsr;

typedef void (*q8_spmm_fn)(size_t M, size_t N, const q8_bsr *w, const uint8_t *x, size_t x_stride, uint8_t *y,
                           size_t y_stride, const q8_rq *rq);

void q8_spmm__scalar(size_t M, size_t N, const q8_bsr *w, const uint8_t *x, size_t x_stride, uint8_t *y,
                     size_t y_stride, const q8_rq *rq);
/* 4x1 blocks: one activation row feeds 4 output channels; 16 pixels per step */
void q8_spmm_4x1__avx2(size_t M, size_t N, const q8_bsr *w, const uint8_t *x, size_t x_stride, uint8_t *y,
                       size_t y_stride, const q8_rq *rq);

void q8_spmm_4x1__neon(size_t M, size_t N, const q8_bsr *w, const uint8_t *x, size_t x_stride, uint8_t *y,
                       size_t y_stride, const q8_rq *rq);

#endif
