/* q8 GEMM microbenchmark: the same packed operands through each x86 variant, best of R repeats,
 * GMAC/s per shape. Built and run by benchmarks/bench_int8.py --micro. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q8-gemm/q8-gemm.h"
#include "q8_micro_time.h"

int main(void)
{
    /* M x N x K: 1x1 convs of ppocr cls at 48x192 and a mid-size ResNet-style layer */
    static const size_t shapes[][3] = {{16, 2304, 16}, {32, 576, 32}, {64, 144, 64}, {128, 36, 128},
                                       {200, 192, 32}, {32, 192, 200}, {64, 784, 576}};
    static const struct { const char *name; q8_gemm_fn f; } v[] = {
        {"vpmaddwd 4x8 (s16)", q8_gemm_4x8__avx2}, {"vpmaddubsw 4x16 (7-bit w)", q8_gemm_4x16__avx2_maddubs}};
    printf("| M x N x K | %s GMAC/s | %s GMAC/s | ratio |\n|---|---|---|---|\n", v[0].name, v[1].name);
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], Mp = (M + 3) / 4 * 4;
        int8_t *W = malloc(M * K), *Wp = malloc(q8_pack_w_bytes(M, K));
        uint8_t *X = malloc(K * N), *Xp = malloc(q8_pack_x_bytes(K, N)), *Y = malloc(M * N);
        int32_t *bias = calloc(Mp, 4), *mult = malloc(Mp * 4), *shift = malloc(Mp * 4);
        for (size_t i = 0; i < M * K; i++)
            W[i] = (int8_t)(rand() % 129 - 64);
        for (size_t i = 0; i < K * N; i++)
            X[i] = (uint8_t)rand();
        for (size_t m = 0; m < Mp; m++)
            mult[m] = 1 << 30, shift[m] = 40;
        q8_rq rq = {bias, mult, shift, 128, 0, 255, NULL};
        q8_pack_w(M, K, W, Wp);
        q8_pack_x(K, N, X, N, 0, Xp);
        const double macs = (double)M * N * K;
        const int reps = (int)(2e8 / macs) + 1;
        double g[2];
        for (int i = 0; i < 2; i++)
            g[i] = macs / best_s(v[i].f, M, N, (K + 3) / 4, Wp, Xp, q8_pack_np(N), Y, &rq, reps) * 1e-9;
        printf("| %zu x %zu x %zu | %.1f | %.1f | %.2fx |\n", M, N, K, g[0], g[1], g[1] / g[0]);
        free(W); free(Wp); free(X); free(Xp); free(Y); free(bias); free(mult); free(shift);
    }
    return 0;
}
