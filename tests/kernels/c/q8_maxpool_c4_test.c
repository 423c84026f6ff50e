/* The blocked-layout MaxPool (q8-maxpool-c4.c): the portable form against the NCHW q8_maxpool between q8_pack_x and
 * q8_unpack_c4 (the layout's definition), and KERNEL against the portable form byte for byte, output pitch padding
 * untouched. Windows 1..5 (3x3 stride 2 with and without padding, 2x2 stride 2, stride 1, dilated rows), maps 1..40
 * wide, batch 1-2. The input ends at an inaccessible page (reads past it fault, masked loads included). */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "q8-eltwise/q8-eltwise.h"
#include "q8-gemm/q8-gemm.h"

static uint32_t rng = 5;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

static uint8_t *guarded(size_t n, void **map, size_t *len)
{
    const size_t ps = (size_t)sysconf(_SC_PAGESIZE), body = (n + ps - 1) / ps * ps;
    *len = body + ps;
    *map = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (*map == MAP_FAILED || mprotect((uint8_t *)*map + body, ps, PROT_NONE))
        exit(2);
    return (uint8_t *)*map + body - n;
}

static int run1(int batch, int C, int H, int W, int k, int s, int d, int pad)
{
    const int Ho = (H + 2 * pad - d * (k - 1) - 1) / s + 1, Wo = (W + 2 * pad - (k - 1) - 1) / s + 1;
    if (Ho < 1 || Wo < 1)
        return 1;
    const size_t HW = (size_t)H * W, N = (size_t)Ho * Wo, npi = q8_pack_np(HW), npo = q8_pack_np(N);
    const size_t planes = (size_t)batch * C / 4;
    uint8_t *x = malloc((size_t)batch * C * HW), *y0 = malloc((size_t)batch * C * N), *y1 = malloc((size_t)batch * C * N);
    uint8_t *yc = malloc(planes * npo * 4), *yk = malloc(planes * npo * 4);
    void *map;
    size_t len;
    uint8_t *xc = guarded(planes * npi * 4, &map, &len);
    for (size_t i = 0; i < (size_t)batch * C * HW; i++)
        x[i] = (uint8_t)rnd();
    for (int b = 0; b < batch; b++)
        q8_pack_x((size_t)C, HW, x + (size_t)b * C * HW, HW, 0, xc + (size_t)b * C / 4 * npi * 4);
    const q8_pool_shape sn = {batch, C, H, W, k, k, s, s, d, 1, pad, pad, Ho, Wo};
    const q8_pool_shape sc = {batch, C / 4, H, W, k, k, s, s, d, 1, pad, pad, Ho, Wo};
    q8_maxpool(&sn, x, y0);
    memset(yc, 0xA5, planes * npo * 4);
    memset(yk, 0xA5, planes * npo * 4);
    q8_maxpool_c4(&sc, xc, yc);
    KERNEL(&sc, xc, yk);
    for (int b = 0; b < batch; b++)
        q8_unpack_c4((size_t)C, N, yc + (size_t)b * C / 4 * npo * 4, y1 + (size_t)b * C * N, 0, (size_t)C / 4);
    const int ok = memcmp(y0, y1, (size_t)batch * C * N) == 0 && memcmp(yc, yk, planes * npo * 4) == 0;
    if (!ok)
        printf("mismatch: batch %d C %d H %d W %d k %d s %d d %d pad %d\n", batch, C, H, W, k, s, d, pad);
    free(x); free(y0); free(y1); free(yc); free(yk);
    munmap(map, len);
    return ok;
}

int main(void)
{
    static const int win[][4] = {{3, 2, 1, 0}, {3, 2, 1, 1}, {2, 2, 1, 0}, {3, 1, 1, 1}, {5, 2, 1, 2}, {1, 1, 1, 0},
                                 {3, 2, 2, 1}, {2, 1, 1, 0}, {5, 1, 1, 2}};
    int pass = 0, total = 0;
    for (int w = 0; w < 9; w++)
        for (int i = 0; i < 24; i++, total++)
            pass += run1(1 + (int)(rnd() % 2), 4 * (1 + (int)(rnd() % 5)), 1 + (int)(rnd() % 30), 1 + (int)(rnd() % 40),
                         win[w][0], win[w][1], win[w][2], win[w][3]);
    printf("%s: %d/%d cases match\n", KERNEL_NAME, pass, total);
    return pass == total ? 0 : 1;
}
