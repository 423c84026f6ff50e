/* q8 depthwise variant KERNEL vs the scalar reference, bit-exact: kernel 1x1..5x5, strides 1-3,
 * dilation, asymmetric pads, widths around the 8/16-pixel vectors, clamp on/off, maps shorter than the
 * window (output rows that read the same image rows among them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q8-dwconv/q8-dwconv.h"

#ifndef WMIN /* weights drawn from [WMIN, WMAX]: narrower for kernels exact only there */
#define WMIN (-128)
#endif
#ifndef WMAX
#define WMAX 127
#endif

/* FP32_RQ: fp32 requantization (p.scale set): power-of-two scales on even channels (exact ties: round
 * half to even), any float scale on odd ones */
#ifndef FP32_RQ
#define FP32_RQ 0
#endif

static uint32_t rng = 4242;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

static int run2(int C, int H, int W, int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl)
{
    q8_dw_params p = {2, C, H, W, kh, kw, sh, sw, dh, dw, pt, pl, 0, 0, NULL, NULL, NULL, NULL, 0, 0, 255, 0, NULL, NULL, NULL};
    const int k = kh * kw;
    p.Ho = (H + 2 * pt - dh * (kh - 1) - 1) / sh + 1;
    p.Wo = (W + pl + (pl + 1) - dw * (kw - 1) - 1) / sw + 1; /* right pad pl+1 */
    if (p.Ho <= 0 || p.Wo <= 0)
        return 0;
    size_t nx = (size_t)2 * C * H * W, ny = (size_t)2 * C * p.Ho * p.Wo;
    uint8_t *x = malloc(nx), *y0 = malloc(ny), *y1 = malloc(ny), *scr;
    int8_t *w = malloc((size_t)C * k);
    int32_t *bias = malloc(4 * C), *mult = malloc(4 * C), *shift = malloc(4 * C);
    float *scale = malloc(4 * C);
    for (size_t i = 0; i < nx; i++) x[i] = (uint8_t)rnd();
    for (int i = 0; i < C * k; i++) /* every 7th channel at the range ends, against x = 255 / 0 */
        w[i] = (int8_t)((i / k) % 7 == 6 ? (i % 2 ? WMIN : WMAX) : WMIN + (int)(rnd() % (uint32_t)(WMAX - WMIN + 1)));
#ifdef WODD /* taps -100, 100, 100, -100, ... per channel: the even pairs fit vpmaddubsw's int16 sum, the odd ones not */
    for (int i = 0; i < C * k; i++)
        w[i] = (int8_t)(((i % k) % 4 == 1 || (i % k) % 4 == 2) ? 100 : -100);
#endif
    for (int c = 6; c < C; c += 7)
        for (int b = 0; b < 2; b++)
            memset(x + ((size_t)b * C + c) * H * W, (c / 7) % 2 ? 255 : 0, (size_t)H * W);
    for (int c = 0; c < C; c++) {
        bias[c] = (int32_t)(rnd() % 40001) - 20000;
        mult[c] = (int32_t)((1u << 30) + (rnd() % (1u << 22)) * 256u);
        shift[c] = rnd() % 4 ? 36 + (int32_t)(rnd() % 6) : 31 + (int32_t)(rnd() % 32); /* every requant form */
        const int e = 5 + (int)(rnd() % 10);
        scale[c] = c % 2 ? (float)(rnd() % 4096 + 1) / 2048.0f / (float)(1 << e) : 1.0f / (float)(1 << e);
    }
    p.w = w; p.bias = bias; p.mult = mult; p.shift = shift; p.scale = FP32_RQ ? scale : NULL;
    p.zp = (int32_t)(rnd() & 255); p.zx = (uint8_t)rnd();
    if (rnd() & 1) { p.qmin = rnd() & 2 ? p.zp : 0; p.qmax = 250; } /* a clamp at one end or both */
    scr = malloc(q8_dwconv_scratch_bytes(&p)); /* with the fp32 scales set: the channel-lane kernel's too */
    q8_dwconv__scalar(&p, x, y0, scr);
    KERNEL(&p, x, y1, scr);
    int bad = memcmp(y0, y1, ny) != 0;
    if (bad)
        printf("MISMATCH C=%d H=%d W=%d k=%dx%d s=%d,%d d=%d,%d pads=%d,%d\n", C, H, W, kh, kw, sh, sw, dh, dw, pt, pl);
    free(x); free(y0); free(y1); free(scr); free(w); free(bias); free(mult); free(shift); free(scale);
    return bad;
}

static int run(int C, int H, int W, int k, int s, int d, int pt, int pl)
{
    return run2(C, H, W, k, k, s, s, d, d, pt, pl);
}

int main(void)
{
    static const int Ws[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33};
    int fails = 0, cases = 0;
    for (int k = 1; k <= 5; k += 2)
        for (int s = 1; s <= 3; s++)
            for (int d = 1; d <= 2; d++)
                for (int wi = 0; wi < 10; wi++, cases++)
                    fails += run(3, 5 + wi % 4, Ws[wi], k, s, d, k / 2, (k / 2 + wi) % 3);
    /* rectangular kernels, vertical-only stride / dilation (text models: stride (2, 1)), rows wider than
     * several vector steps, kernels wider than 4 and 8 taps */
    static const int rect[][8] = {{5, 5, 2, 1, 1, 1, 2, 2}, {3, 3, 2, 1, 1, 1, 1, 1}, {1, 5, 1, 1, 1, 1, 0, 2},
                                  {5, 1, 1, 1, 2, 1, 4, 0}, {3, 7, 1, 1, 1, 1, 1, 3}, {2, 9, 3, 1, 2, 1, 1, 4},
                                  {3, 4, 1, 1, 1, 1, 1, 2}, {4, 8, 2, 1, 1, 1, 2, 3}};
    static const int RW[] = {2, 8, 13, 40, 96, 101};
    for (int r = 0; r < 8; r++)
        for (int wi = 0; wi < 6; wi++, cases++) {
            const int *a = rect[r];
            fails += run2(3, 3 + (r + wi) % 5, RW[wi], a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
        }
    /* maps shorter than the window (text models: 5x5 over 2-3 rows, vertical stride 2), where whole
     * kernel rows fall in the top/bottom padding, and pads wider than the image (rows with no tap inside) */
    static const int shortm[][10] = {{2, 96, 5, 5, 1, 1, 1, 1, 2, 2}, {3, 96, 5, 5, 1, 1, 1, 1, 2, 2},
                                     {3, 97, 5, 5, 2, 1, 1, 1, 2, 2}, {2, 45, 5, 5, 1, 1, 1, 1, 2, 2},
                                     {1, 70, 5, 3, 1, 1, 1, 1, 2, 1}, {1, 33, 3, 3, 1, 1, 1, 1, 3, 1},
                                     {3, 40, 5, 5, 1, 2, 2, 1, 4, 3}, {2, 64, 3, 5, 2, 1, 1, 1, 3, 2},
                                     /* output rows reading the same image rows (rows too long for the flattened
                                      * plane): all of them, a middle pair, with a horizontal stride, 7 rows */
                                     {2, 95, 5, 5, 1, 1, 1, 1, 2, 2}, {3, 95, 5, 5, 1, 1, 1, 1, 2, 2},
                                     {3, 127, 5, 5, 1, 1, 1, 1, 2, 2}, {2, 31, 3, 3, 1, 1, 1, 1, 1, 1},
                                     {4, 95, 5, 5, 1, 1, 1, 1, 2, 2}, {3, 95, 5, 5, 1, 2, 1, 1, 2, 2},
                                     {3, 95, 7, 3, 1, 1, 1, 1, 3, 1}, {2, 70, 5, 5, 2, 1, 1, 1, 2, 2},
                                     /* left pads past 4 columns: windows wholly in the padding */
                                     {2, 20, 3, 7, 1, 1, 1, 1, 1, 6}, {3, 9, 3, 9, 1, 2, 1, 1, 1, 5}};
    for (int r = 0; r < (int)(sizeof shortm / sizeof shortm[0]); r++, cases++) {
        const int *a = shortm[r];
        fails += run2(11, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]);
    }
    /* more than one group of 16 channels, a partial last one (the channel-lane kernel) */
    static const int groups[][11] = {{16, 2, 96, 5, 5, 1, 1, 1, 1, 2, 2}, {33, 6, 40, 3, 3, 2, 1, 1, 1, 1, 1},
                                     {35, 7, 33, 5, 5, 2, 2, 1, 1, 2, 2}, {17, 3, 21, 3, 5, 1, 1, 2, 1, 2, 0},
                                     {48, 1, 70, 1, 5, 1, 1, 1, 1, 0, 2}, {19, 9, 9, 3, 3, 1, 3, 1, 1, 1, 1}};
    for (int r = 0; r < 6; r++, cases++) {
        const int *a = groups[r];
        fails += run2(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10]);
    }
    printf("%s: %d/%d cases match\n", KERNEL_NAME, cases - fails, cases);
    return fails != 0;
}
