/* q8 GEMV variant KERNEL vs the scalar reference, bit-exact: M and K around the 4- / 16-row and 16- / 64-k steps
 * (1..67 rows, 1..300 k), weights at -128 / 127 against x = 255 / 0, clamp on/off, and small values at a scale
 * near 1, where every unit of a sum shows in the output byte (at tiny scales an off-by-one sum rarely does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q8-gemm/q8-gemv.h"

#ifndef FP32_RQ /* fp32 requantization (rq.scale set): power-of-two scales on even rows (exact ties) */
#define FP32_RQ 0
#endif

static uint32_t rng = 7;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

static int run1(size_t M, size_t K, int extreme)
{
    int8_t *w = malloc(M * K);
    uint8_t *x = malloc(K), *y0 = malloc(M), *y1 = malloc(M);
    int32_t *bias = malloc(4 * M), *mult = malloc(4 * M), *shift = malloc(4 * M);
    float *scale = malloc(4 * M);
    /* extreme 1: the range ends; 2: small values at a scale near 1, so that every unit of a sum (a wrong
     * carry between lanes, a term too many) moves the output byte */
    for (size_t i = 0; i < M * K; i++)
        w[i] = extreme == 1 ? (int8_t)(i % 3 ? -128 : 127) : extreme == 2 ? (int8_t)((int)(rnd() % 3) - 1) : (int8_t)rnd();
    for (size_t k = 0; k < K; k++)
        x[k] = extreme == 1 ? (uint8_t)(k % 3 ? 255 : 0) : extreme == 2 ? (uint8_t)(rnd() % 4) : (uint8_t)rnd();
    for (size_t m = 0; m < M; m++) {
        bias[m] = (int32_t)(rnd() % 200001) - 100000;
        mult[m] = (int32_t)((1u << 30) + (rnd() % (1u << 22)) * 256u);
        shift[m] = 31 + (int32_t)(rnd() % 16);
        const int e = 8 + (int)(rnd() % 10);
        scale[m] = m % 2 ? (float)(rnd() % 4096 + 1) / 2048.0f / (float)(1 << e) : 1.0f / (float)(1 << e);
        if (extreme == 2) {
            bias[m] = (int32_t)(rnd() % 41) - 20;
            mult[m] = 2145336164; /* 0.999 * 2^31 */
            shift[m] = 31;
            scale[m] = 0.999f;
        }
    }
    q8_rq rq = {bias, mult, shift, (int32_t)(rnd() & 255), 0, 255, FP32_RQ ? scale : NULL};
    if (extreme == 2)
        rq.zp = 128;
    else if (rnd() & 1) { rq.qmin = rq.zp; rq.qmax = 240; }
    q8_gemv__scalar(M, K, w, x, y0, &rq);
    KERNEL(M, K, w, x, y1, &rq);
    const int bad = memcmp(y0, y1, M) != 0;
    if (bad)
        printf("MISMATCH M=%zu K=%zu extreme=%d\n", M, K, extreme);
    free(w); free(x); free(y0); free(y1); free(bias); free(mult); free(shift); free(scale);
    return bad;
}

int main(void)
{
    static const size_t Ms[] = {1, 3, 4, 5, 8, 50, 67}, Ks[] = {1, 15, 16, 17, 33, 200, 300};
    int fails = 0, n = 0;
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 7; j++)
            for (int e = 0; e < 3; e++, n++)
                fails += run1(Ms[i], Ks[j], e);
    printf("%s: %d/%d cases match\n", KERNEL_NAME, n - fails, n);
    return fails != 0;
}
