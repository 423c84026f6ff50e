/* q8 GSPC variant KERNEL (T_O = TO, T_I = TI) vs the direct scalar reference, bit-exact: groups 1..8, channels
 * per group not multiples of 4 or T_O, kernels 1/3/5, strides 1-2, dilation, pads, odd widths, 2 threads.
 * W7: 7-bit weights (|w| <= 64), the only ones a vpmaddubsw variant is exact on. Every 4th case draws its
 * shifts from the whole [31, 62] (kernels may take a faster path for the usual [33, 54]). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q8-gspc/q8-gspc.h"

/* FP32_RQ: fp32 requantization (p.scale set): power-of-two scales on even channels (exact ties), any on odd ones */
#ifndef FP32_RQ
#define FP32_RQ 0
#endif

static uint32_t rng = 31;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }
static int ncase;

static int run(int G, int cpg, int kpg, int H, int W, int k, int s, int d, int pad, ec_pool *pool)
{
    q8_gspc_params p = {1, G, cpg, kpg, H, W, k, k, s, s, d, d, pad, pad, 0, 0, NULL, NULL, NULL, NULL, 0, 0, 255, 0, NULL};
    p.Ho = (H + 2 * pad - d * (k - 1) - 1) / s + 1;
    p.Wo = (W + 2 * pad - d * (k - 1) - 1) / s + 1;
    if (p.Ho <= 0 || p.Wo <= 0)
        return 0;
    const int K = G * kpg, T = k * k, kpgp = (kpg + TO - 1) / TO * TO, c4n = (cpg + TI - 1) / TI;
    int8_t *w = malloc((size_t)K * cpg * T), *wp = calloc((size_t)G * kpgp * c4n * TI * T, 1);
    int32_t *b0 = malloc(4 * K), *m0 = malloc(4 * K), *s0 = malloc(4 * K);
    int32_t *b1 = calloc(G * kpgp, 4), *m1 = calloc(G * kpgp, 4), *s1 = calloc(G * kpgp, 4);
    float *f0 = malloc(4 * K), *f1 = calloc(G * kpgp, 4);
    size_t nx = (size_t)G * cpg * H * W, ny = (size_t)K * p.Ho * p.Wo;
    uint8_t *x = malloc(nx), *y0 = malloc(ny), *y1 = malloc(ny), *scr = malloc(q8_gspc_scratch_bytes(&p) * 2 * EC_MAX_THREADS);
    for (size_t i = 0; i < nx; i++) x[i] = (uint8_t)rnd();
#ifdef W7
    for (int i = 0; i < K * cpg * T; i++) w[i] = (int8_t)((int)(rnd() % 129) - 64);
#else
    for (int i = 0; i < K * cpg * T; i++) w[i] = (int8_t)rnd();
#endif
    const int wide = ++ncase % 4 == 0;
    p.zx = (uint8_t)rnd();
    p.zp = (int32_t)(rnd() & 255);
    for (int oc = 0; oc < K; oc++) {
        int32_t sw = 0;
        for (int i = 0; i < cpg * T; i++) sw += w[oc * cpg * T + i];
        b0[oc] = (int32_t)(rnd() % 40001) - 20000 - p.zx * sw;
        m0[oc] = (int32_t)((1u << 30) + (rnd() % (1u << 22)) * 256u);
        s0[oc] = wide ? 31 + (int32_t)(rnd() % 32) : 38 + (int32_t)(rnd() % 5);
        const int e = 6 + (int)(rnd() % 10);
        f0[oc] = oc % 2 ? (float)(rnd() % 4096 + 1) / 2048.0f / (float)(1 << e) : 1.0f / (float)(1 << e);
        int g = oc / kpg, o = oc % kpg;
        b1[g * kpgp + o] = b0[oc]; m1[g * kpgp + o] = m0[oc]; s1[g * kpgp + o] = s0[oc]; f1[g * kpgp + o] = f0[oc];
        for (int c = 0; c < cpg; c++)  /* [g][ob][c/TI][kh][kw][TO][TI] */
            for (int t = 0; t < T; t++)
                wp[(size_t)g * kpgp * c4n * TI * T + ((((size_t)(o / TO) * c4n + c / TI) * T + t) * TO + o % TO) * TI + c % TI] =
                    w[((size_t)oc * cpg + c) * T + t];
    }
    for (int g = 0; g < G; g++) /* padded lanes: valid shift so the unused lanes stay defined */
        for (int o = kpg; o < kpgp; o++) { m1[g * kpgp + o] = 1 << 30; s1[g * kpgp + o] = 40; }
    if (rnd() & 1) { p.qmin = p.zp; p.qmax = 240; }
    p.w = w; p.bias = b0; p.mult = m0; p.shift = s0; p.scale = FP32_RQ ? f0 : NULL;
    q8_gspc__scalar(&p, x, y0, scr, NULL);
    p.w = wp; p.bias = b1; p.mult = m1; p.shift = s1; p.scale = FP32_RQ ? f1 : NULL;
    KERNEL(&p, x, y1, scr, pool);
    int bad = memcmp(y0, y1, ny) != 0;
    if (bad)
        printf("MISMATCH G=%d cpg=%d kpg=%d H=%d W=%d k=%d s=%d d=%d pad=%d\n", G, cpg, kpg, H, W, k, s, d, pad);
    free(w); free(wp); free(b0); free(m0); free(s0); free(b1); free(m1); free(s1); free(x); free(y0); free(y1); free(scr);
    free(f0); free(f1);
    return bad;
}

int main(void)
{
    static const int Gs[] = {1, 2, 4, 8}, Cs[] = {1, 3, 4, 8, 17}, Ks[] = {1, 5, 16, 17};
    ec_pool pool;
    if (ec_pool_init(&pool, 2))
        return 2;
    int fails = 0, cases = 0;
    for (int a = 0; a < 4; a++)
        for (int c = 0; c < 5; c++)
            for (int kk = 0; kk < 4; kk++, cases++) {
                int k = 1 + 2 * (cases % 3), s = 1 + cases % 2, d = 1 + (cases % 5 == 0);
                fails += run(Gs[a], Cs[c], Ks[kk], 5 + cases % 7, 3 + cases % 15, k, s, d, k / 2, cases % 3 ? &pool : NULL);
            }
    /* small maps (pixel blocks span rows), wide rows (several 16-pixel packing steps), pads wider
     * than the kernel reach */
    static const int extra[][9] = {{2, 16, 16, 8, 8, 3, 1, 1, 1}, {4, 8, 8, 8, 8, 3, 1, 1, 1}, {4, 8, 16, 4, 4, 3, 1, 1, 1},
                                   {3, 5, 24, 2, 3, 3, 1, 1, 1}, {2, 9, 7, 6, 37, 3, 2, 1, 1}, {1, 4, 33, 3, 41, 5, 1, 2, 4},
                                   {4, 8, 16, 8, 8, 3, 2, 1, 1}, {2, 6, 13, 7, 19, 3, 1, 2, 2}, {2, 16, 16, 8, 8, 3, 1, 1, 1},
                                   {4, 8, 8, 8, 8, 3, 1, 1, 1}};
    for (size_t e = 0; e < sizeof extra / sizeof extra[0]; e++, cases++) {
        const int *a = extra[e];
        fails += run(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], e % 2 ? &pool : NULL);
    }
    ec_pool_destroy(&pool);
    printf("%s: %d/%d cases match\n", KERNEL_NAME, cases - fails, cases);
    return fails != 0;
}
