/* Channel-lane q8 GEMM variant KERNEL vs q8_cgemm__scalar, bit-exact (stride 1 and 2 steps through the copy); and the reference itself vs the pixel-lane
 * scalar GEMM (q8_gemm_4x8__scalar) on packed X, so both families compute one function.
 * Shapes: M = 16 .. 96 (a last half panel of 16 channels), K4 1 .. 37, pixel ranges that start and end inside
 * rows (every narrow tile width 1..7), maps 1 .. 11 wide read through an implicit-style extended row (wq > Wo) and
 * through packed X (koff = 4 k np); weights at -128 / 127 against x = 255 / 0, clamps on and off, and small values
 * at a scale near 1, where every unit of a sum shows. Pixels outside [n0, n1) and rows past M must stay untouched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q8-gemm/q8-gemm.h"

static uint32_t rng = 11;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

/* one problem (cs: the horizontal step, 1 or a stride); returns 1 when the kernel's bytes equal the reference's */
static int run1(size_t M, size_t K4, size_t Ho, size_t Wo, size_t wq, size_t cs, size_t n0, size_t n1, int packed,
                int extreme)
{
    const size_t K = 4 * K4 - rnd() % 4, N = Ho * Wo, np = q8_pack_np(N);
    int8_t *w = malloc(M * K), *wp = malloc(q8_pack_w_c32_bytes(M, K));
    /* x: packed [K4][np][4], or an implicit-style copy: K4 "taps" at random offsets into rows wq wide */
    const size_t plane = (Ho + 2) * wq * cs * 4, xbytes = packed ? K4 * np * 4 : (K4 + 2) * plane + 64;
    uint8_t *x = malloc(xbytes), *y0 = malloc(M * N + 64), *y1 = malloc(M * N + 64);
    int32_t *koff = malloc(4 * K4), *bias = malloc(4 * M);
    float *scale = malloc(4 * M);
    for (size_t i = 0; i < M * K; i++)
        w[i] = extreme == 1 ? (int8_t)(i % 3 ? -128 : 127) : extreme == 2 ? (int8_t)((int)(rnd() % 3) - 1) : (int8_t)rnd();
    for (size_t i = 0; i < xbytes; i++)
        x[i] = extreme == 1 ? (uint8_t)(i % 3 ? 255 : 0) : extreme == 2 ? (uint8_t)(rnd() % 4) : (uint8_t)rnd();
    for (size_t k = 0; k < K4; k++) /* implicit: tap k of plane k, shifted by up to 2 rows and 2 columns */
        koff[k] = packed ? (int32_t)(4 * k * np) : (int32_t)(k * plane + ((rnd() % 3) * wq * cs + rnd() % 3) * 4);
    for (size_t m = 0; m < M; m++) {
        bias[m] = extreme == 2 ? (int32_t)(rnd() % 41) - 20 : (int32_t)(rnd() % 200001) - 100000;
        const int e = 8 + (int)(rnd() % 10);
        scale[m] = extreme == 2 ? 0.999f : m % 2 ? (float)(rnd() % 4096 + 1) / 2048.0f / (float)(1 << e)
                                                 : 1.0f / (float)(1 << e);
    }
    q8_pack_w_c32(M, K, w, wp);
    const int clamp = (int)(rnd() % 2);
    q8_rq rq = {bias, NULL, NULL, (int32_t)(rnd() % 256), clamp ? 40 : 0, clamp ? 200 : 255, scale};
    memset(y0, 0xA5, M * N + 64);
    memset(y1, 0xA5, M * N + 64);
    q8_cgemm__scalar(M, n0, n1, Wo, wq * cs, cs, K4, wp, x, koff, y0, N, &rq);
    KERNEL(M, n0, n1, Wo, wq * cs, cs, K4, wp, x, koff, y1, N, &rq);
    int ok = memcmp(y0, y1, M * N + 64) == 0;
    for (size_t m = 0; m < M && ok; m++) /* nothing outside the range written */
        for (size_t n = 0; n < N; n++)
            if ((n < n0 || n >= n1) && y1[m * N + n] != 0xA5)
                ok = 0;
    if (packed && n0 == 0 && n1 == N && ok) { /* the reference = the pixel-lane GEMM on the same packed X */
        int8_t *wq4 = malloc(q8_pack_w_bytes(M, K));
        uint8_t *y2 = malloc(M * N + 64);
        q8_pack_w(M, K, w, wq4);
        q8_gemm_4x8__scalar(M, N, K4, wq4, x, np, y2, N, &rq);
        ok = memcmp(y0, y2, M * N) == 0;
        free(wq4);
        free(y2);
    }
    if (!ok)
        printf("mismatch: M %zu K %zu Ho %zu Wo %zu wq %zu cs %zu n [%zu, %zu) packed %d extreme %d\n", M, K, Ho, Wo,
               wq, cs, n0, n1, packed, extreme);
    free(w); free(wp); free(x); free(y0); free(y1); free(koff); free(bias); free(scale);
    return ok;
}

int main(void)
{
    static const size_t Ms[] = {16, 32, 48, 96}, K4s[] = {1, 2, 9, 37}, Ws[] = {1, 3, 7, 11};
    int pass = 0, total = 0;
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 4; c++)
                for (int packed = 0; packed < 2; packed++)
                    for (int extreme = 0; extreme < 3; extreme++) {
                        const size_t Wo = Ws[c], Ho = 1 + rnd() % 6, N = Ho * Wo;
                        const size_t wq = packed ? Wo : Wo + rnd() % 3;
                        /* whole map, or a range starting and ending inside rows */
                        const size_t n0 = (extreme == 1 && N > 2) ? rnd() % (N / 2) : 0;
                        const size_t n1 = (extreme == 1 && N > 2) ? N - rnd() % (N - n0 - 1) : N;
                        /* implicit: stride 1, or a stride-2 step through rows twice as long (cs 2) */
                        const size_t cs = packed ? 1 : 1 + (size_t)((a + c) % 2);
                        pass += run1(Ms[a], K4s[b], Ho, Wo, wq, cs, n0, n1, packed,
                                     extreme);
                        total++;
                    }
    for (size_t P = 1; P <= 17; P++) { /* every narrow tile width, from one row of P pixels */
        pass += run1(48, 5, 1, P, P + 2, 1 + P % 2, 0, P, 0, 0);
        total++;
    }
    printf("%s: %d/%d cases match\n", KERNEL_NAME, pass, total);
    return pass == total ? 0 : 1;
}
