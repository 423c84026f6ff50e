/* Int8 matrix-vector product for one-pixel convs and GEMMs (squeeze-excite 1x1 convs on a pooled
 * [C,1,1] tensor): y[m] = requant(bias[m] + sum_k W[m][k] x[k]), W row-major int8 [M][K] (unpacked),
 * x uint8 (u8 domain), rq.bias = bias - zx * sum_k W[m][k] as for q8-gemm.h's unsigned-X kernels.
 * The packed GEMM computes 16 pixel columns per tile, so a single pixel did 16x the work. */
#ifndef Q8_GEMV_H
#define Q8_GEMV_H

#include <stddef.h>
#include <stdint.h>

#include "../q8-requant/q8-requant.h"

typedef void (*q8_gemv_fn)(size_t M, size_t K, const int8_t *W, const uint8_t *x, uint8_t *y, const q8_rq *rq);

void q8_gemv__scalar(size_t M, size_t K, const int8_t *W, const uint8_t *x, uint8_t *y, const q8_rq *rq);
/* vpmaddwd on zero-/sign-extended int16 (exact for any weights), 4 rows per step */
void q8_gemv__avx2(size_t M, size_t K, const int8_t *W, const uint8_t *x, uint8_t *y, const q8_rq *rq);
/* vpdpbusd on 64-byte chunks of 16 rows, one reduction for the 16; fp32 requantization where rq->scale is set */
void q8_gemv__avx512vnni(size_t M, size_t K, const int8_t *W, const uint8_t *x, uint8_t *y, const q8_rq *rq);

#endif
