/* Portable reference of the sparse x dense kernel, any block shape (see f32-spmm.h). */
#include "f32-spmm.h"

void f32_spmm__scalar(size_t M, size_t N, const f32_bsr *w, const float *x, size_t x_stride,
                      float *y, size_t y_stride, const ec_epilogue *ep)
{
    const size_t br = (size_t)w->br, bc = (size_t)w->bc;
    for (size_t rb = 0; rb * br < M; rb++)
        for (size_t r = 0; r < br && rb * br + r < M; r++) {
            const size_t m = rb * br + r;
            float *ym = y + m * y_stride;
            for (size_t n = 0; n < N; n++)
                ym[n] = ep && ep->bias ? ep->bias[m] : 0.0f;
            for (int32_t b = w->row_ptr[rb]; b < w->row_ptr[rb + 1]; b++)
                for (size_t c = 0; c < bc; c++) {
                    const float v = w->val[(size_t)b * br * bc + r * bc + c];
                    const float *xk = x + ((size_t)w->col[b] + c) * x_stride;
                    for (size_t n = 0; n < N; n++)
                        ym[n] += v * xk[n];
                }
            if (ep)
                for (size_t n = 0; n < N; n++)
                    ym[n] = ec_epi_value(ym[n], ep->residual ? ep->residual + m * y_stride + n : NULL,
                                         ep->residual_before_act, ep->act);
        }
}
