/* 1x1 convolution (pointwise, NCHW) with fp16 weights and native fp16 arithmetic, for CPUs that have
 * it (ARMv8.2-A FP16, e.g. Cortex-A76 / Raspberry Pi 5):
 *   y[m][n] = epilogue(sum_k W[m][k] x[k][n]),  x, y float32; W fp16 packed [ceil(M/4)][K][4].
 * x is converted to fp16 into scratch (K rows of f16_xrow(N) halves), products are accumulated in
 * fp16 (8 lanes), the sum is widened to fp32 for bias / activation / residual. fp16 accumulation
 * costs precision: relative error grows about like sqrt(K) * 2^-11. */
#ifndef F16_GEMM_H
#define F16_GEMM_H

#include "../ec_common.h"

static inline size_t f16_xrow(size_t N) { return (N + 15) / 16 * 16; }
static inline size_t f16_conv1x1_scratch_bytes(size_t K, size_t N) { return K * f16_xrow(N) * 2; }

/* reference: same inputs, fp32 accumulation (the value the fp16 kernel approximates) */
void f16_conv1x1__scalar(size_t M, size_t N, size_t K, const uint16_t *Wp, const float *x, float *y,
                         const ec_epilogue *ep, void *scratch);
void f16_conv1x1__neonfp16arith(size_t M, size_t N, size_t K, const uint16_t *Wp, const float *x, float *y,
                                const ec_epilogue *ep, void *scratch);

#endif
