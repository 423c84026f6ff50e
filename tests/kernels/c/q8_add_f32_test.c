/* q8_add_f32 (its vector path for the ISA this is built for) against DequantizeLinear -> Add -> QuantizeLinear
 * in float32 written out here (built with -std=c11: no contraction into fused multiply-adds), bit for bit:
 * every pair of bytes, random scale triples and zero points, ratios that put many sums on exact ties, a fused
 * ReLU's clamp, an odd length (the scalar tail). Runs natively or under qemu. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "q8-eltwise/q8-eltwise.h"

static uint32_t rng = 12345;
static uint32_t next(void)
{
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}
static double uniform(double lo, double hi) { return lo + (hi - lo) * (double)next() / 16777216.0; }

static uint8_t ref(uint8_t a, uint8_t b, const q8_addf_params *p)
{
    const float da = (float)((int32_t)a - p->za) * p->sa;
    const float db = (float)((int32_t)b - p->zb) * p->sb;
    const float v = da + db;
    const float q = nearbyintf(v / p->sy) + (float)p->zy;
    return (uint8_t)(q < (float)p->qmin ? p->qmin : q > (float)p->qmax ? p->qmax : q);
}

int main(void)
{
    enum { N = 65536 + 13, CASES = 48 };
    uint8_t *a = malloc(N), *b = malloc(N), *y = malloc(N);
    for (size_t i = 0; i < N; i++)
        a[i] = (uint8_t)(i >> 8), b[i] = (uint8_t)i;
    int fails = 0;
    for (int c = 0; c < CASES; c++) {
        q8_addf_params p = {0, 0, 0, 0, 255, 0, 0, 0};
        const float sy = (float)pow(10.0, uniform(-4, 1));
        if (c < 40) {
            p.sa = sy * (float)pow(10.0, uniform(-1.5, 1.5)), p.sb = sy * (float)pow(10.0, uniform(-1.5, 1.5));
        } else { /* sa / sy, sb / sy of 1/4, 1/2, 3/2: many exact ties */
            p.sa = sy * (c & 1 ? 0.5f : 0.25f), p.sb = sy * (c & 2 ? 1.5f : 0.5f);
        }
        p.sy = sy;
        p.za = (int32_t)(next() & 255), p.zb = (int32_t)(next() & 255), p.zy = (int32_t)(next() & 255);
        if (c % 5 == 4) p.qmin = p.zy; /* a fused ReLU */
        q8_add_f32(N, a, b, &p, y);
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < N; i++)
            if (y[i] != ref(a[i], b[i], &p) && !bad++) first = i;
        if (bad) {
            fails++;
            printf("case %d (sa %g sb %g sy %g za %d zb %d zy %d): %zu differ, first a=%u b=%u got %u want %u\n", c,
                   (double)p.sa, (double)p.sb, (double)p.sy, p.za, p.zb, p.zy, bad, a[first], b[first], y[first],
                   ref(a[first], b[first], &p));
        }
    }
    printf("q8_add_f32: %d/%d cases match\n", CASES - fails, CASES);
    free(a), free(b), free(y);
    return fails != 0;
}
