/* KERNEL on every length 0..80 at unaligned starts (whole vector steps plus every tail), against the scalar
 * reference bit for bit, with guard values past the end of the output that must stay untouched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "f16-cvt/f16-cvt.h"

#define MAXN 80
#define GUARD 16

int main(void)
{
    uint16_t h[MAXN + 8];
    float want[MAXN + GUARD], got[MAXN + 8 + GUARD];
    uint32_t s = 12345u;
    int bad = 0, cases = 0;
    for (size_t i = 0; i < MAXN + 8; i++) { /* random halves without NaNs (their payload bits compare as NaN) */
        s = s * 1664525u + 1013904223u;
        uint16_t v = (uint16_t)(s >> 16);
        h[i] = (v & 0x7C00u) == 0x7C00u ? (uint16_t)(v & 0xBFFFu) : v;
    }
    for (size_t off = 0; off < 4; off++)
        for (size_t n = 0; n <= MAXN; n++, cases++) {
            const float sentinel = -1234.5f;
            for (size_t i = 0; i < MAXN + 8 + GUARD; i++) got[i] = sentinel;
            f16_to_f32__scalar(n, h + off, want);
            KERNEL(n, h + off, got + off);
            int fail = memcmp(want, got + off, n * sizeof(float)) != 0;
            for (size_t i = 0; i < MAXN + 8 + GUARD; i++)
                if ((i < off || i >= off + n) && got[i] != sentinel) fail = 1; /* wrote outside [off, off+n) */
            if (fail && bad++ < 5) printf("FAIL n=%zu off=%zu\n", n, off);
        }
    printf("%s: %d/%d lengths ok\n", KERNEL_NAME, cases - bad, cases);
    return bad != 0;
}
