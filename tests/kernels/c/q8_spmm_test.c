/* int8 sparse x dense variant KERNEL (blocks BR x BC) vs the scalar reference, bit-exact, over block
 * sparsity 0, 0.5, 0.9 and 1.0, odd shapes, extreme values, clamp on/off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q8-spmm/q8-spmm.h"

static uint32_t rng = 77;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

static int run(size_t M, size_t N, size_t K, int pct, int extreme)
{
    const size_t Mp = (M + BR - 1) / BR * BR, nrb = Mp / BR, ncb = K / BC;
    int8_t *val = malloc(Mp * K + 1);
    int32_t *rp = malloc(4 * (nrb + 1)), *col = malloc(4 * (nrb * ncb + 1));
    int32_t *bias = malloc(4 * Mp), *mult = malloc(4 * Mp), *shift = malloc(4 * Mp);
    uint8_t *x = malloc(K * N), *y0 = malloc(M * N), *y1 = malloc(M * N);
    int nb = 0;
    rp[0] = 0;
    for (size_t rb = 0; rb < nrb; rb++) {
        for (size_t cb = 0; cb < ncb; cb++) {
            if ((int)(rnd() % 100) < pct)
                continue;
            col[nb] = (int32_t)(cb * BC);
            for (int i = 0; i < BR * BC; i++)
                val[nb * BR * BC + i] = extreme ? -128 : (int8_t)rnd();
            nb++;
        }
        rp[rb + 1] = nb;
    }
    for (size_t i = 0; i < K * N; i++) x[i] = extreme ? 255 : (uint8_t)rnd();
    for (size_t m = 0; m < Mp; m++) {
        bias[m] = (int32_t)(rnd() % 20001) - 10000;
        mult[m] = (int32_t)((1u << 30) + (rnd() % (1u << 22)) * 256u);
        shift[m] = 31 + (int32_t)(rnd() % 14);
    }
    q8_bsr w = {BR, BC, rp, col, val};
    q8_rq rq = {bias, mult, shift, (int32_t)(rnd() & 255), 0, 255, NULL};
    if (rnd() & 1) { rq.qmin = 10; rq.qmax = 240; }
    memset(y0, 0xEE, M * N);
    memset(y1, 0xEE, M * N);
    q8_spmm__scalar(M, N, &w, x, N, y0, N, &rq);
    KERNEL(M, N, &w, x, N, y1, N, &rq);
    int bad = memcmp(y0, y1, M * N) != 0;
    if (bad)
        printf("MISMATCH M=%zu N=%zu K=%zu sparsity=%d%%\n", M, N, K, pct);
    free(val); free(rp); free(col); free(bias); free(mult); free(shift); free(x); free(y0); free(y1);
    return bad;
}

int main(void)
{
    static const size_t Ms[] = {1, 3, 4, 5, 8, 17}, Ns[] = {1, 7, 8, 15, 16, 17, 33, 64}, Ks[] = {4, 8, 36};
    static const int Ss[] = {0, 50, 90, 100};
    int fails = 0, cases = 0;
    for (size_t a = 0; a < 6; a++)
        for (size_t b = 0; b < 8; b++)
            for (size_t c = 0; c < 3; c++)
                for (size_t s = 0; s < 4; s++, cases++)
                    fails += run(Ms[a], Ns[b], Ks[c], Ss[s], cases % 7 == 0);
    printf("%s: %d/%d cases match\n", KERNEL_NAME, cases - fails, cases);
    return fails != 0;
}
