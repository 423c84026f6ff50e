/* q8_mul_outer_fx against q8_mul_outer (the float formula), bit-exact. argv[1]: a file with za, zb, zy (int32),
 * scale (float), the [256][2] int16 fixed-point table; one plane per gate byte (exact and fallback planes),
 * plane sizes around the 32-byte step, random bytes with 0 and 255 mixed in. Prints "N/N cases match". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q8-eltwise/q8-eltwise.h"

static uint32_t rng = 4242;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

int main(int argc, char **argv)
{
    int32_t z[3];
    float scale;
    int16_t fx[512];
    FILE *f = argc > 1 ? fopen(argv[1], "rb") : NULL;
    if (!f || fread(z, 4, 3, f) != 3 || fread(&scale, 4, 1, f) != 1 || fread(fx, 2, 512, f) != 512) {
        printf("cannot read the table\n");
        return 2;
    }
    fclose(f);
    static const size_t sizes[] = {1, 7, 31, 32, 33, 63, 64, 65, 96, 97, 192, 288};
    int cases = 0, fails = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++, cases++) {
        const size_t inner = sizes[si], outer = 256, n = outer * inner;
        uint8_t *a = malloc(n), *b = malloc(outer), *y = malloc(n), *r = malloc(n);
        for (size_t i = 0; i < n; i++) a[i] = (uint8_t)(i % 17 == 0 ? (rnd() & 1) * 255 : rnd());
        for (size_t o = 0; o < outer; o++) b[o] = (uint8_t)((o * 97 + si) & 255); /* every gate byte once */
        q8_mul_outer_fx(outer, inner, a, b, z[0], z[1], scale, z[2], fx, y);
        q8_mul_outer(outer, inner, a, b, z[0], z[1], scale, z[2], 0, 255, r);
        if (memcmp(y, r, n)) {
            for (size_t i = 0; i < n; i++)
                if (y[i] != r[i]) {
                    printf("MISMATCH inner=%zu plane %zu (gate %d) byte %zu: %d, float %d\n", inner, i / inner,
                           b[i / inner], i % inner, y[i], r[i]);
                    break;
                }
            fails++;
        }
        free(a); free(b); free(y); free(r);
    }
    printf("%d/%d cases match\n", cases - fails, cases);
    return fails != 0;
}
