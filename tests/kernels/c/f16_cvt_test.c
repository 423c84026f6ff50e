/* Every one of the 65536 half values through KERNEL, bit-compared with the scalar reference; the
 * reference itself checked against the compiler's _Float16 / __fp16 conversion where available. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "f16-cvt/f16-cvt.h"

int main(void)
{
    uint16_t *h = malloc(65536 * 2 + 32);
    float *a = malloc(65536 * 4 + 64), *b = malloc(65536 * 4 + 64);
    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    f16_to_f32__scalar(65536, h, a);
    KERNEL(65536, h, b);
    KERNEL(7, h + 1000, b + 70000 - 70000 + 0); /* odd length tail */
    KERNEL(65536, h, b);
    int bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t ba, bb;
        memcpy(&ba, &a[i], 4);
        memcpy(&bb, &b[i], 4);
        int nan = (i & 0x7C00u) == 0x7C00u && (i & 0x3FFu);
        if (nan ? !(b[i] != b[i]) : ba != bb) {
            if (bad++ < 5) printf("MISMATCH half 0x%04x: ref %08x got %08x\n", i, ba, bb);
        }
#if defined(__FLT16_MAX__)
        _Float16 f;
        memcpy(&f, &h[i], 2);
        float c = (float)f;
        uint32_t bc;
        memcpy(&bc, &c, 4);
        if (!nan && bc != ba && bad++ < 5) printf("REFERENCE WRONG half 0x%04x\n", i);
#endif
    }
    printf("%s: %s (65536 half values)\n", KERNEL_NAME, bad ? "MISMATCH" : "all match");
    free(h); free(a); free(b);
    return bad != 0;
}
