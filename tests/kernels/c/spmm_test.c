/* f32 sparse x dense variant KERNEL (block BR x BC) vs the scalar reference and vs a dense
 * double-precision product, over sparsity 0, 0.5, 0.9, 1.0, odd shapes and fused epilogues. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "f32-spmm/f32-spmm.h"

static uint32_t rng = 99;
static float frand(void) { rng = rng * 1664525u + 1013904223u; return (float)(rng >> 8) / 16777216.0f * 2.0f - 1.0f; }

/* dense W (Mp x K) -> BSR keeping blocks with any nonzero */
static int to_bsr(const float *W, size_t Mp, size_t K, int br, int bc, int32_t *rp, int32_t *col, float *val)
{
    int nb = 0;
    rp[0] = 0;
    for (size_t rb = 0; rb < Mp / (size_t)br; rb++) {
        for (size_t cb = 0; cb < K / (size_t)bc; cb++) {
            int nz = 0;
            for (int r = 0; r < br; r++)
                for (int c = 0; c < bc; c++)
                    nz |= W[(rb * br + r) * K + cb * bc + c] != 0.0f;
            if (!nz)
                continue;
            col[nb] = (int32_t)(cb * bc);
            for (int r = 0; r < br; r++)
                for (int c = 0; c < bc; c++)
                    val[nb * br * bc + r * bc + c] = W[(rb * br + r) * K + cb * bc + c];
            nb++;
        }
        rp[rb + 1] = nb;
    }
    return nb;
}

static int run(size_t M, size_t N, size_t K, float sparsity, int epi)
{
    const size_t Mp = (M + BR - 1) / BR * BR;
    float *W = calloc(Mp * K, 4), *X = malloc(K * N * 4), *Y0 = malloc(M * N * 4), *Y1 = malloc(M * N * 4);
    float *bias = malloc(M * 4), *res = malloc(M * N * 4), *val = malloc(Mp * K * 4);
    int32_t *rp = malloc((Mp / BR + 1) * 4), *col = malloc(Mp * K * 4);
    for (size_t rb = 0; rb < M; rb += BR)   /* zero whole blocks so the block sparsity is exact */
        for (size_t cb = 0; cb < K; cb += BC) {
            int keep = (frand() + 1.0f) * 0.5f >= sparsity;
            for (size_t r = rb; r < rb + BR && r < M; r++)
                for (size_t c = cb; c < cb + BC; c++)
                    W[r * K + c] = keep ? frand() : 0.0f;
        }
    for (size_t i = 0; i < K * N; i++) X[i] = frand();
    for (size_t i = 0; i < M; i++) bias[i] = frand();
    for (size_t i = 0; i < M * N; i++) res[i] = frand();
    f32_bsr w = {BR, BC, rp, col, val};
    to_bsr(W, Mp, K, BR, BC, rp, col, val);
    ec_epilogue ep = {bias, epi >= 1 ? res : NULL, epi != 2, {EC_ACT_NONE, 0.0f, 0.0f}};
    if (epi == 1) ep.act.kind = EC_ACT_RELU;
    if (epi == 2) ep.act.kind = EC_ACT_HARD_SWISH;
    if (epi == 3) { ep.act.kind = EC_ACT_CLIP; ep.act.a = -0.5f; ep.act.b = 0.5f; }
    f32_spmm__scalar(M, N, &w, X, N, Y0, N, &ep);
    KERNEL(M, N, &w, X, N, Y1, N, &ep);
    int bad = 0;
    for (size_t m = 0; m < M && !bad; m++)
        for (size_t n = 0; n < N && !bad; n++) {
            double d = bias[m];
            for (size_t k = 0; k < K; k++) d += (double)W[m * K + k] * X[k * N + n];
            float ref = ec_epi_value((float)d, ep.residual ? &res[m * N + n] : NULL, ep.residual_before_act, ep.act);
            float a = Y0[m * N + n], b = Y1[m * N + n];
            if (fabsf(a - b) > 1e-5f * (1.0f + fabsf(a)) || fabsf(a - ref) > 1e-4f * (1.0f + fabsf(ref))) {
                printf("MISMATCH M=%zu N=%zu K=%zu s=%.2f epi=%d at %zu,%zu: dense %g ref %g got %g\n",
                       M, N, K, sparsity, epi, m, n, ref, a, b);
                bad = 1;
            }
        }
    free(W); free(X); free(Y0); free(Y1); free(bias); free(res); free(val); free(rp); free(col);
    return bad;
}

int main(void)
{
    static const size_t Ms[] = {1, 3, 4, 5, 7, 8, 17, 33};
    static const size_t Ns[] = {1, 3, 7, 8, 15, 16, 17, 31, 33, 64};
    static const size_t Ks[] = {4, 8, 12, 36};
    static const float Ss[] = {0.0f, 0.5f, 0.9f, 1.0f};
    int fails = 0, cases = 0;
    for (size_t a = 0; a < 8; a++)
        for (size_t b = 0; b < 10; b++)
            for (size_t c = 0; c < 4; c++)
                for (size_t s = 0; s < 4; s++, cases++)
                    fails += run(Ms[a], Ns[b], Ks[c] - (BC == 1 && c % 2 ? 1 : 0), Ss[s], (int)(cases % 4));
    printf("%s: %d/%d cases match\n", KERNEL_NAME, cases - fails, cases);
    return fails != 0;
}
