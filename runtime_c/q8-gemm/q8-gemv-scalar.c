/* Portable reference for q8-gemv.h. */
#include "q8-gemv.h"

void q8_gemv__scalar(size_t M, size_t K, const int8_t *W, const uint8_t *x, uint8_t *y, const q8_rq *rq)
{
    for (size_t m = 0; m < M; m++) {
        int32_t acc = rq->bias[m];
        for (size_t k = 0; k < K; k++)
            acc += (int32_t)W[m * K + k] * x[k];
        y[m] = q8_rq1(rq, m, acc);
    }
}
