/* q8_mul_outer (vector path where the build has one) vs the scalar float formula, bit-exact:
 * random operands, zero points, scales, clamps; inner sizes around the 8- and 32-lane steps; extreme
 * bytes (0 / 255) and scales up to 2^23, beyond the unclamped path's bound, so products saturate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "q8-eltwise/q8-eltwise.h"

static uint32_t rng = 777;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

int main(void)
{
    int cases = 0, fails = 0;
    static const size_t sizes[] = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31, 33, 35, 37, 39, 41,
                                   63, 64, 65, 96, 97, 288};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int rep = 0; rep < 20; rep++, cases++) {
            const size_t inner = sizes[si];
            const size_t outer = 1 + rnd() % 5, n = outer * inner;
            uint8_t *a = malloc(n), *b = malloc(outer), *y = malloc(n);
            for (size_t i = 0; i < n; i++) a[i] = (uint8_t)(rep % 7 == 6 ? (rnd() & 1) * 255 : rnd());
            for (size_t i = 0; i < outer; i++) b[i] = (uint8_t)(rep % 7 == 6 ? (rnd() & 1) * 255 : rnd());
            const int32_t za = (int32_t)(rnd() & 255), zb = (int32_t)(rnd() & 255), zy = (int32_t)(rnd() & 255);
            const int32_t qmin = rep % 3 ? 0 : zy, qmax = rep % 4 || zy > 240 ? 255 : 240; /* qmin <= qmax */
            const float scale = ldexpf((float)(1 + rnd() % 1000) / 1000.0f,
                                       rep % 5 == 4 ? (int)(rnd() % 24) : -(int)(rnd() % 12));
            q8_mul_outer(outer, inner, a, b, za, zb, scale, zy, qmin, qmax, y);
            int bad = 0;
            for (size_t o = 0; o < outer; o++) {
                const float s = (float)((int32_t)b[o] - zb) * scale;
                for (size_t i = 0; i < inner; i++) {
                    float v = nearbyintf((float)((int32_t)a[o * inner + i] - za) * s) + (float)zy;
                    v = v < (float)qmin ? (float)qmin : v > (float)qmax ? (float)qmax : v;
                    bad |= y[o * inner + i] != (uint8_t)v;
                }
            }
            if (bad)
                printf("MISMATCH inner=%zu outer=%zu rep=%d\n", inner, outer, rep);
            fails += bad;
            free(a); free(b); free(y);
        }
    printf("%d/%d cases match\n", cases - fails, cases);
    return fails != 0;
}
