/* fp16-arithmetic 1x1 conv vs its fp32-accumulating reference, odd shapes and epilogues: every output
 * within the worst-case fp16 bound (K + 2) * 2^-11 * sum_k |w x| (x rounded to fp16, K rounded adds);
 * a wrong lane or row would miss by O(sum |w x|). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "f16-gemm/f16-gemm.h"

static uint32_t rng = 5;
static float frand(void) { rng = rng * 1664525u + 1013904223u; return (float)(rng >> 8) / 8388608.0f - 1.0f; }

int main(void)
{
    static const size_t Ms[] = {1, 3, 4, 5, 8, 17}, Ns[] = {1, 3, 7, 8, 15, 16, 17, 33, 64}, Ks[] = {1, 3, 16, 33, 100};
    int fails = 0, cases = 0;
    for (size_t a = 0; a < 6; a++)
        for (size_t b = 0; b < 9; b++)
            for (size_t c = 0; c < 5; c++, cases++) {
                size_t M = Ms[a], N = Ns[b], K = Ks[c], Mp = (M + 3) / 4 * 4;
                uint16_t *W = calloc(Mp * K, 2);
                float *x = malloc(K * N * 4), *y0 = malloc(M * N * 4), *y1 = malloc(M * N * 4);
                float *bias = malloc(M * 4), *res = malloc(M * N * 4);
                void *scr = malloc(f16_conv1x1_scratch_bytes(K, N));
                for (size_t m = 0; m < M; m++) {
                    bias[m] = frand();
                    for (size_t k = 0; k < K; k++) {
                        _Float16 h = (_Float16)(frand() * 0.5f);
                        __builtin_memcpy(&W[(m / 4) * K * 4 + k * 4 + m % 4], &h, 2);
                    }
                }
                for (size_t i = 0; i < K * N; i++) x[i] = frand();
                for (size_t i = 0; i < M * N; i++) res[i] = frand();
                ec_epilogue ep = {bias, cases % 2 ? res : NULL, 1, {cases % 3 ? EC_ACT_RELU : EC_ACT_NONE, 0.0f, 0.0f}};
                f16_conv1x1__scalar(M, N, K, W, x, y0, &ep, scr);
                f16_conv1x1__neonfp16arith(M, N, K, W, x, y1, &ep, scr);
                for (size_t i = 0; i < M * N; i++) {
                    size_t m = i / N, n = i % N;
                    float s = 0.0f;
                    for (size_t k = 0; k < K; k++) {
                        _Float16 h;
                        __builtin_memcpy(&h, &W[(m / 4) * K * 4 + k * 4 + m % 4], 2);
                        s += fabsf((float)h * x[k * N + n]);
                    }
                    float tol = (float)(K + 2) * (1.0f / 2048.0f) * s + 1e-5f;
                    if (fabsf(y0[i] - y1[i]) > tol) {
                        printf("MISMATCH M=%zu N=%zu K=%zu at %zu: %g vs %g\n", M, N, K, i, y0[i], y1[i]);
                        fails++;
                        break;
                    }
                }
                free(W); free(x); free(y0); free(y1); free(bias); free(res); free(scr);
            }
    printf("neonfp16arith: %d/%d cases within fp16 tolerance\n", cases - fails, cases);
    return fails != 0;
}
