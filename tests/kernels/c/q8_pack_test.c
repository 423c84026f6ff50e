/* q8_pack_x (the GEMM's [K4][NP][4] layout, its SIMD steps of 64 / 16 / 8 pixels) against the layout's
 * definition, byte for byte: pixel counts around every step, K not a multiple of 4 (rows past K read row 0),
 * row strides wider than N, both flips. */
#include <stdio.h>
#include <stdlib.h>

#include "q8-gemm/q8-gemm.h"

static uint32_t rng = 77;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

int main(void)
{
    static const size_t Ns[] = {1, 7, 8, 15, 16, 63, 64, 65, 79, 128, 130, 192, 200};
    static const size_t Ks[] = {1, 3, 4, 7, 32, 200};
    int fails = 0, cases = 0;
    for (size_t a = 0; a < sizeof Ns / sizeof *Ns; a++)
        for (size_t b = 0; b < sizeof Ks / sizeof *Ks; b++)
            for (int flip = 0; flip < 2; flip++, cases++) {
                const size_t N = Ns[a], K = Ks[b], stride = N + 5, np = q8_pack_np(N), K4 = (K + 3) / 4;
                uint8_t *X = malloc(K * stride), *P = malloc(q8_pack_x_bytes(K, N));
                for (size_t i = 0; i < K * stride; i++) X[i] = (uint8_t)rnd();
                q8_pack_x(K, N, X, stride, flip ? 0x80 : 0, P);
                int bad = 0;
                for (size_t k4 = 0; k4 < K4 && !bad; k4++)
                    for (size_t n = 0; n < np && !bad; n++)
                        for (size_t j = 0; j < 4; j++) {
                            const size_t k = k4 * 4 + j < K ? k4 * 4 + j : 0;
                            const uint8_t want = n < N ? (uint8_t)(X[k * stride + n] ^ (flip ? 0x80 : 0)) : 0;
                            if (P[(k4 * np + n) * 4 + j] != want) {
                                printf("MISMATCH N=%zu K=%zu flip=%d at k4=%zu n=%zu j=%zu\n", N, K, flip, k4, n, j);
                                bad = 1;
                                break;
                            }
                        }
                fails += bad;
                free(X);
                free(P);
            }
    printf("%d/%d cases match\n", cases - fails, cases);
    return fails != 0;
}
