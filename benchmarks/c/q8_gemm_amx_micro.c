/* AMX q8 GEMM microbenchmark: the same operands through the AVX-512 VNNI GEMM and the AMX one (each in its weight
 * layout), best of 7 repeats, GMAC/s per shape (SqueezeNet / ResNet-50 conv shapes as M x N x K). Built and run by
 * benchmarks/bench_int8.py --micro on CPUs with AMX. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q8-gemm/q8-gemm.h"
#include "q8_micro_time.h"

int main(void)
{
    static const size_t shapes[][3] = {{16, 3025, 64}, {64, 3025, 16}, {64, 3025, 144}, {32, 729, 256},
                                       {128, 729, 32}, {128, 729, 288}, {256, 169, 64}, {256, 169, 576},
                                       {64, 3136, 576}, {512, 49, 1152}, {1000, 169, 512}};
    if (!q8_amx_available()) {
        printf("the OS grants no AMX tile state\n");
        return 1;
    }
    printf("| M x N x K | VNNI 8x32 GMAC/s | AMX 32x32 GMAC/s | ratio | same bytes |\n|---|---|---|---|---|\n");
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], K4 = (K + 3) / 4, np = q8_pack_np(N);
        const size_t Mp = (M + 15) / 16 * 16;
        int8_t *W = malloc(M * K), *Wv = malloc(q8_pack_w_bytes(M, K)), *Wa = malloc(q8_pack_w_amx_bytes(M, K));
        uint8_t *X = malloc(K * N), *Xp = malloc(q8_pack_x_bytes(K, N)), *Y0 = malloc(M * N), *Y1 = malloc(M * N);
        int32_t *b = calloc(Mp, 4), *mult = calloc(Mp, 4), *shift = calloc(Mp, 4);
        float *scale = calloc(Mp, 4);
        srand(1);
        for (size_t i = 0; i < M * K; i++)
            W[i] = (int8_t)(rand() & 255);
        for (size_t i = 0; i < K * N; i++)
            X[i] = (uint8_t)(rand() & 255);
        for (size_t m = 0; m < Mp; m++) {
            mult[m] = 1 << 30;
            shift[m] = 40;
            scale[m] = 1.0f / 2097152.0f;
        }
        const q8_rq rq = {b, mult, shift, 128, 0, 255, scale};
        q8_pack_w(M, K, W, Wv);
        q8_pack_w_amx(M, K, W, Wa);
        q8_pack_x(K, N, X, N, 0, Xp);
        const int reps = (int)(2e8 / (double)(M * N * K)) + 1;
        const double tv = best_s(q8_gemm_8x32__avx512vnni, M, N, K4, Wv, Xp, np, Y0, &rq, reps);
        const double ta = best_s(q8_gemm_32x32__amx, M, N, K4, Wa, Xp, np, Y1, &rq, reps);
        const double macs = (double)M * N * K;
        printf("| %zu x %zu x %zu | %.0f | %.0f | %.2fx | %s |\n", M, N, K, macs / tv * 1e-9, macs / ta * 1e-9, tv / ta,
               memcmp(Y0, Y1, M * N) ? "NO" : "yes");
        free(W); free(Wv); free(Wa); free(X); free(Xp); free(Y0); free(Y1);
        free(b); free(mult); free(shift); free(scale);
    }
    return 0;
}
