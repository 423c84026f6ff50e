/* Portable reference of the int8 sparse x dense kernel, any block shape. */
#include "q8-spmm.h"

void q8_spmm__scalar(size_t M, size_t N, const q8_bsr *w, const uint8_t *x, size_t x_stride, uint8_t *y,
                     size_t y_stride, const q8_rq *rq)
{
    const size_t br = (size_t)w->br, bc = (size_t)w->bc;
    for (size_t rb = 0; rb * br < M; rb++)
        for (size_t r = 0; r < br && rb * br + r < M; r++) {
            const size_t m = rb * br + r;
            for (size_t n = 0; n < N; n++) {
                int32_t acc = rq->bias[m];
                for (int32_t b = w->row_ptr[rb]; b < w->row_ptr[rb + 1]; b++)
                    for (size_t c = 0; c < bc; c++)
                        acc += (int32_t)w->val[((size_t)b * br + r) * bc + c] * x[((size_t)w->col[b] + c) * x_stride + n];
                y[m * y_stride + n] = q8_requant1(acc, rq->mult[m], rq->shift[m], rq->zp, rq->qmin, rq->qmax);
            }
        }
}
