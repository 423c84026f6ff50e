/* Byte-table lookup variant KERNEL vs the scalar one on lengths around its vector width. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q8-eltwise/q8-eltwise.h"

int main(void)
{
    uint8_t lut[256], x[300], a[300], b[300];
    uint32_t s = 7;
    for (int i = 0; i < 256; i++) { s = s * 1664525u + 1013904223u; lut[i] = (uint8_t)(s >> 24); }
    for (int i = 0; i < 300; i++) /* every byte value (37 is odd), then the extremes */
        x[i] = (uint8_t)(i < 256 ? i * 37 : (i & 1) * 255);
    int bad = 0;
    /* the random table, then ones whose first p bytes are equal (constant leading rows: whole, short by one,
     * one past, all but the last row) */
    static const int prefix[] = {0, 15, 16, 17, 31, 32, 48, 63, 64, 80, 96, 112, 128, 240, 256};
    for (size_t pi = 0; pi < sizeof prefix / sizeof prefix[0]; pi++) {
        for (int i = 0; i < prefix[pi]; i++)
            lut[i] = lut[0];
        for (size_t n = 0; n <= 300; n++) {
            memset(a, 0xAB, sizeof a);
            memset(b, 0xAB, sizeof b);
            q8_lut(n, x, lut, a);
            KERNEL(n, x, lut, b);
            bad += memcmp(a, b, sizeof a) != 0; /* also catches writes past n */
        }
    }
    printf("%s: %s\n", KERNEL_NAME, bad ? "MISMATCH" : "all match");
    return bad != 0;
}
