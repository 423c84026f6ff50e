/* q8 MaxPool variant KERNEL vs the portable q8_maxpool, bit-exact: 2x2 stride 2 on odd and even sizes
 * (widths around the 16/32-output steps), other windows (pads, 3x3, stride 1 and 2, dilation) on short and
 * long rows. The input is run twice, starting just after and ending just before an inaccessible page: a read
 * outside it faults, masked vector loads included (which AddressSanitizer does not check). */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "q8-eltwise/q8-eltwise.h"

static uint32_t rng = 99;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

static int run(int N, int C, int H, int W, int k, int st, int d, int pad)
{
    q8_pool_shape s = {N, C, H, W, k, k, st, st, d, d, pad, pad, 0, 0};
    s.Ho = (H + 2 * pad - d * (k - 1) - 1) / st + 1;
    s.Wo = (W + 2 * pad - d * (k - 1) - 1) / st + 1;
    if (s.Ho <= 0 || s.Wo <= 0)
        return 0;
    const size_t nx = (size_t)N * C * H * W, ny = (size_t)N * C * s.Ho * s.Wo;
    /* [guard page][x ... ][guard page]: x at the first guard's end, then copied to end at the second's start */
    const size_t ps = (size_t)sysconf(_SC_PAGESIZE), body = (nx + ps - 1) / ps * ps, len = body + 2 * ps;
    uint8_t *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED || mprotect(map, ps, PROT_NONE) || mprotect(map + ps + body, ps, PROT_NONE))
        return 1;
    uint8_t *x = map + ps, *y0 = malloc(ny), *y1 = malloc(ny);
    for (size_t i = 0; i < nx; i++) x[i] = (uint8_t)rnd();
    q8_maxpool(&s, x, y0);
    KERNEL(&s, x, y1);
    int bad = memcmp(y0, y1, ny) != 0;
    memmove(map + ps + body - nx, x, nx);
    KERNEL(&s, map + ps + body - nx, y1);
    bad |= memcmp(y0, y1, ny) != 0;
    if (bad)
        printf("MISMATCH N=%d C=%d H=%d W=%d k=%d s=%d d=%d pad=%d\n", N, C, H, W, k, st, d, pad);
    munmap(map, len); free(y0); free(y1);
    return bad;
}

int main(void)
{
    static const int Ws[] = {2, 3, 5, 8, 9, 16, 31, 32, 33, 34, 63, 64, 65, 66, 129};
    int fails = 0, cases = 0;
    for (int wi = 0; wi < 15; wi++)
        for (int h = 2; h <= 5; h++, cases++)
            fails += run(1 + h % 2, 3, h, Ws[wi], 2, 2, 1, 0);
    /* short rows, several row pairs a step: plane and batch boundaries inside a step, odd Wo */
    static const int shortw[][4] = {{1, 64, 8, 8}, {2, 5, 4, 4}, {1, 7, 6, 6}, {1, 3, 2, 10}, {1, 9, 4, 12}, {1, 2, 2, 30}};
    for (int o = 0; o < 6; o++, cases++)
        fails += run(shortw[o][0], shortw[o][1], shortw[o][2], shortw[o][3], 2, 2, 1, 0);
    static const int other[][4] = {{2, 2, 1, 1}, {3, 2, 1, 1}, {2, 1, 1, 0}, {3, 1, 2, 0}, {2, 2, 2, 0}, {3, 3, 1, 1}};
    for (int o = 0; o < 6; o++, cases++)
        fails += run(2, 3, 9, 11, other[o][0], other[o][1], other[o][2], other[o][3]);
    /* any window at horizontal stride 1 or 2 over rows long enough for the vector steps (64 bytes / 32 outputs)
     * and their tails, padded or not: SqueezeNet's 3x3/2, ResNet's 3x3/2 pad 1, 3x3/1 pad 1, even and 1-wide windows */
    static const int win[][3] = {{3, 2, 0}, {3, 2, 1}, {3, 1, 1}, {2, 1, 0}, {5, 2, 2}, {4, 2, 1}, {1, 2, 0}};
    static const int wide[] = {5, 33, 65, 111, 130, 260}; /* 260: 3x3/2 rows of three 63-output steps */
    for (int o = 0; o < 7; o++)
        for (int wi = 0; wi < 6; wi++, cases++)
            fails += run(1, 2, 7, wide[wi], win[o][0], win[o][1], 1, win[o][2]);
    printf("%s: %d/%d cases match\n", KERNEL_NAME, cases - fails, cases);
    return fails != 0;
}
