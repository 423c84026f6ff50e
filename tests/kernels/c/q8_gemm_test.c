/* Compares one q8 GEMM variant (KERNEL, X_SIGNED) bit-exactly with a reference (REF, default the
 * exact scalar kernel) on shapes around the 4-row / 8- and 16-pixel tiles, random and extreme
 * values. Weights are drawn from [WMIN, WMAX] (default the whole int8 range): kernels that are
 * exact only on narrower weights are tested on those, and shown to differ outside them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q8-gemm/q8-gemm.h"

#ifndef REF
#define REF q8_gemm_4x8__scalar
#endif
#ifndef WMIN
#define WMIN (-128)
#endif
#ifndef WMAX
#define WMAX 127
#endif
#ifndef SHIFT_MIN /* requantization shifts drawn from [SHIFT_MIN, SHIFT_MIN + SHIFT_SPAN) */
#define SHIFT_MIN 31
#endif
#ifndef SHIFT_SPAN
#define SHIFT_SPAN 14
#endif
/* FP32_RQ: fp32 requantization (rq.scale set): power-of-two scales in the even modes (many exact
 * ties: round half to even is checked), any float scale in the odd ones, up to 2 (the clamps) */
#ifndef FP32_RQ
#define FP32_RQ 0
#endif
/* the kernel's weight layout (the reference always reads q8_pack_w's) */
#ifndef PACK_W
#define PACK_W q8_pack_w
#define PACK_W_BYTES q8_pack_w_bytes
#endif
#ifndef KS_EXTRA /* more depths for kernels that block K (AMX: 16 k4 steps a block) */
#define KS_EXTRA
#endif
#ifndef NMODES
#define NMODES 4 /* 6 adds the pair-bound and (WMIN, X = 0) extremes, 7 the two-step int16 bound */
#endif

static uint32_t rng = 12345;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

static int run(size_t M, size_t N, size_t K, int mode)
{
    const size_t K4 = (K + 3) / 4, Mp = (M + 3) / 4 * 4, np = q8_pack_np(N);
    int8_t *W = malloc(M * K), *Wp = malloc(q8_pack_w_bytes(M, K)), *Wk = malloc(PACK_W_BYTES(M, K));
    uint8_t *X = malloc(K * N), *Xu = malloc(q8_pack_x_bytes(K, N)), *Xs = malloc(q8_pack_x_bytes(K, N));
    uint8_t *Y0 = malloc(M * N), *Y1 = malloc(M * N);
    int32_t *b0 = calloc(Mp, 4), *b1 = calloc(Mp, 4), *mult = calloc(Mp, 4), *shift = calloc(Mp, 4);
    float *scale = calloc(Mp, 4);
    /* modes: 0, 3 random (3 with a clamp); 1, 2, 5 range ends; 4 k-pairs (127, 1) / (-128, 0), the
     * widest pairs whose u8 x s8 int16 sum cannot saturate (kept only if within [WMIN, WMAX]) */
    /* mode 6 (7-bit weights), X = 255: per 8 k (two k4 steps a, b) the four weights of a pixel's int16 lane
     * (k, k+1 of a and of b) sum their positive (or negative) parts to exactly 128 (-128) in some 4-row
     * blocks, where the AVX2 kernel adds the two steps in int16, and to 129 (-129) in others, where it
     * must not; the block's lane sums alternate sign by block pair */
    static const int8_t at[8] = {64, 32, 64, 64, 32, 0, 0, 0}, over[8] = {64, 64, 64, 64, 1, 0, 0, 0};
    for (size_t i = 0; i < M * K; i++) {
        const int pair = (i / K) % 2 ? ((i % K) % 2 ? 0 : -128) : ((i % K) % 2 ? 1 : 127);
        if (mode == 6) {
            const size_t blk = i / K / 4, kk = (i % K) % 8;
            const int v = blk % 2 ? over[kk] : at[kk];
            W[i] = (int8_t)(blk / 2 % 2 ? -v : v);
            continue;
        }
        W[i] = (int8_t)(mode == 1 || mode == 5 ? WMIN : mode == 2 ? WMAX
                        : mode == 4 ? (pair < WMIN ? WMIN : pair > WMAX ? WMAX : pair)
                        : WMIN + (int)(rnd() % (uint32_t)(WMAX - WMIN + 1)));
    }
    for (size_t i = 0; i < K * N; i++)
        X[i] = mode == 1 || mode == 4 || mode == 6 ? 255 : mode == 2 || mode == 5 ? 0 : (uint8_t)(rnd() & 255);
    const int32_t zx = (int32_t)(rnd() & 255);
    for (size_t m = 0; m < Mp; m++) {
        int32_t sw = 0;
        for (size_t k = 0; k < K && m < M; k++)
            sw += W[m * K + k];
        int32_t bias = (int32_t)(rnd() % 20001) - 10000;
        b0[m] = bias - zx * sw;
        b1[m] = b0[m] + (X_SIGNED ? 128 * sw : 0);
        mult[m] = (int32_t)((1u << 30) + (rnd() % (1u << 22)) * 256u);
        shift[m] = SHIFT_MIN + (int32_t)(rnd() % SHIFT_SPAN);
        const int e = (int)(rnd() % 14);
        scale[m] = mode % 2 ? (float)(rnd() % 4096 + 1) / 2048.0f / (float)(1 << e) : 1.0f / (float)(1 << e);
    }
    q8_rq rq0 = {b0, mult, shift, (int32_t)(rnd() & 255), 0, 255, FP32_RQ ? scale : NULL};
    if (mode == 3) { rq0.qmin = 20; rq0.qmax = 200; }
    q8_rq rq1 = rq0;
    rq1.bias = b1;
    q8_pack_w(M, K, W, Wp);
    PACK_W(M, K, W, Wk);
    q8_pack_x(K, N, X, N, 0, Xu);
    q8_pack_x(K, N, X, N, X_SIGNED ? 0x80 : 0, Xs);
    memset(Y0, 0xEE, M * N);
    memset(Y1, 0xEE, M * N);
    REF(M, N, K4, Wp, Xu, np, Y0, N, &rq0);
    KERNEL(M, N, K4, Wk, Xs, np, Y1, N, &rq1);
    int bad = 0;
    for (size_t i = 0; i < M * N && !bad; i++)
        if (Y0[i] != Y1[i]) {
            printf("MISMATCH M=%zu N=%zu K=%zu mode=%d at %zu: ref %d got %d\n", M, N, K, mode, i,
                   Y0[i], Y1[i]);
            bad = 1;
        }
    free(W); free(Wp); free(Wk); free(X); free(Xu); free(Xs); free(Y0); free(Y1);
    free(b0); free(b1); free(mult); free(shift); free(scale);
    return bad;
}

int main(void)
{
    static const size_t Ms[] = {1, 3, 4, 5, 7, 8, 15, 17, 33};
    static const size_t Ns[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33};
    static const size_t Ks[] = {1, 3, 4, 5, 7, 16, 17, 33, 100 KS_EXTRA};
    int fails = 0, cases = 0;
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
            for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++)
                for (int mode = 0; mode < NMODES; mode++, cases++)
                    fails += run(Ms[a], Ns[b], Ks[c], mode);
    printf("%s: %d/%d cases match\n", KERNEL_NAME, cases - fails, cases);
    return fails != 0;
}
