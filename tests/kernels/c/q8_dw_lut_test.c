/* q8_dwconv_run_lut (the table fused into the depthwise driver, run per chunk of channels) against
 * q8_dwconv_run followed by the scalar table pass, bit-exact: planes smaller and larger than the chunk,
 * channel counts that leave a partial last chunk, 1 and 2 threads. KERNEL: the depthwise variant,
 * LUT: the table function; FP32_RQ: fp32 requantization (the channel-lane kernel's chunks of whole groups). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q8-dwconv/q8-dwconv.h"
#include "q8-eltwise/q8-eltwise.h"

#ifndef FP32_RQ
#define FP32_RQ 0
#endif
#ifndef WMIN
#define WMIN (-64)
#endif
#ifndef WMAX
#define WMAX 64
#endif

static uint32_t rng = 99;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

static int run1(ec_pool *pool, int batch, int C, int H, int W, int k, int s, int pad)
{
    q8_dw_params p = {batch, C, H, W, k, k, s, 1, 1, 1, pad, pad, 0, 0, NULL, NULL, NULL, NULL, 0, 0, 255, 0, NULL, NULL, NULL};
    p.Ho = (H + 2 * pad - k) / s + 1;
    p.Wo = (W + 2 * pad - k) + 1;
    const size_t nx = (size_t)batch * C * H * W, ny = (size_t)batch * C * p.Ho * p.Wo;
    float *scale = malloc(4 * (size_t)C);
    for (int c = 0; c < C; c++) scale[c] = (float)(rnd() % 1024 + 1) / 1024.0f / 256.0f;
    p.scale = FP32_RQ ? scale : NULL;
    uint8_t *x = malloc(nx), *y0 = malloc(ny), *y1 = malloc(ny), *scr = malloc(q8_dwconv_scratch_bytes(&p) * EC_MAX_THREADS);
    int8_t *w = malloc((size_t)C * k * k);
    int32_t *bias = malloc(4 * (size_t)C), *mult = malloc(4 * (size_t)C), *shift = malloc(4 * (size_t)C);
    uint8_t lut[256];
    for (size_t i = 0; i < nx; i++) x[i] = (uint8_t)rnd();
    for (int i = 0; i < C * k * k; i++) w[i] = (int8_t)(WMIN + (int)(rnd() % (uint32_t)(WMAX - WMIN + 1)));
    for (int c = 0; c < C; c++) {
        bias[c] = (int32_t)(rnd() % 20001) - 10000;
        mult[c] = (int32_t)((1u << 30) + (rnd() % (1u << 22)) * 256u);
        shift[c] = 36 + (int32_t)(rnd() % 4);
    }
    for (int i = 0; i < 256; i++) lut[i] = (uint8_t)rnd();
    p.w = w; p.bias = bias; p.mult = mult; p.shift = shift;
    p.zp = (int32_t)(rnd() & 255); p.zx = (uint8_t)rnd();
    q8_dwconv_run(KERNEL, &p, x, y0, scr, pool);
    q8_lut(ny, y0, lut, y0);
    memset(y1, 0xA5, ny);
    q8_dwconv_run_lut(KERNEL, &p, lut, LUT, x, y1, scr, pool);
    const int bad = memcmp(y0, y1, ny) != 0;
    if (bad)
        printf("MISMATCH batch=%d C=%d H=%d W=%d k=%d s=%d threads=%d\n", batch, C, H, W, k, s, pool ? 2 : 1);
    free(x); free(y0); free(y1); free(scr); free(w); free(bias); free(mult); free(shift); free(scale);
    return bad;
}

int main(void)
{
    /* batch C H W k stride pad: plane bytes 2x96 (chunks of 16 channels), 3x96 (16: the chunk's byte count
     * alone would give 14), 70x70 (> Q8_DW_LUT_CHUNK), 3x17 with a partial last chunk, batch 2 */
    static const int cases[][7] = {{1, 200, 2, 96, 5, 1, 2}, {1, 88, 3, 96, 5, 1, 2}, {1, 5, 70, 70, 3, 1, 1},
                                   {2, 90, 3, 17, 3, 1, 1}, {1, 41, 6, 33, 5, 2, 2}, {1, 3, 1, 1, 3, 1, 1}};
    ec_pool pool;
    if (ec_pool_init(&pool, 2))
        return 2;
    int fails = 0, n = 0;
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++, n += 2) {
        const int *a = cases[i];
        fails += run1(NULL, a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
        fails += run1(&pool, a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
    }
    ec_pool_destroy(&pool);
    printf("%d/%d cases match\n", n - fails, n);
    return fails != 0;
}
