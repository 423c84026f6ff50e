/* Sparse weights x dense activations for 1x1 convolutions and Gemm/MatMul (and kxk convs in
 * their im2col GEMM form), NCHW: Y[m][n] = epilogue(sum_k W[m][k] X[k][n]).
 *
 * W is block-sparse (BSR) with br x bc blocks, br = output channels, bc = input channels;
 * CSR is the 1x1 case. Rows are padded to a multiple of br (padding rows never stored); when
 * bc > 1, K is a multiple of bc (the emitter falls back to a smaller block otherwise).
 * X rows (input channels) are x_stride floats apart, Y rows y_stride apart, N pixels each.
 * The epilogue (bias per row, residual laid out like Y, activation) is applied in the
 * output loop. No scratch, no over-read: pixel tails use masked loads. */
#ifndef F32_SPMM_H
#define F32_SPMM_H

#include "../ec_common.h"

typedef struct {
    int br, bc;
    const int32_t *row_ptr; /* [ceil(M/br) + 1] first block of each block row */
    const int32_t *col;     /* [nblocks] first input channel of each block */
    const float *val;       /* [nblocks][br][bc] */
} f32_bsr;

typedef void (*f32_spmm_fn)(size_t M, size_t N, const f32_bsr *w, const float *x, size_t x_stride,
                            float *y, size_t y_stride, const ec_epilogue *ep);

/* geo = C H W kh kw sh sw dh dw pt pl Ho Wo; col holds C*kh*kw rows of Ho*Wo floats */
void f32_spmm_im2col(const int geo[13], const float *x, float *col);

void f32_spmm__scalar(size_t M, size_t N, const f32_bsr *w, const float *x, size_t x_stride,
                      float *y, size_t y_stride, const ec_epilogue *ep);

#define F32_SPMM_DECL(name)                                                                 \
    void name(size_t M, size_t N, const f32_bsr *w, const float *x, size_t x_stride, float *y, \
              size_t y_stride, const ec_epilogue *ep);
F32_SPMM_DECL(f32_spmm_1x1__avx2)
F32_SPMM_DECL(f32_spmm_1x4__avx2)
F32_SPMM_DECL(f32_spmm_4x1__avx2)
F32_SPMM_DECL(f32_spmm_4x4__avx2)
F32_SPMM_DECL(f32_spmm_1x1__avx512)
F32_SPMM_DECL(f32_spmm_4x4__avx512)
F32_SPMM_DECL(f32_spmm_1x1__neon)
F32_SPMM_DECL(f32_spmm_1x4__neon)
F32_SPMM_DECL(f32_spmm_4x1__neon)
F32_SPMM_DECL(f32_spmm_4x4__neon)

#endif
