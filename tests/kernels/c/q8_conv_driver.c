/* Runs q8_conv with the GEMM variant KERNEL (and, where IGEMM is defined, its implicit form for stride-1 layers,
 * whose weights the file then holds in that layout; where CGEMM is, the channel-lane GEMM, weights in its layout
 * and the fp32 scales after the shifts) on a problem read from argv[1]; writes y to argv[2].
 * File: int32 header[21] = batch groups C H W ocg kh kw sh sw dh dw pt pl Ho Wo zp qmin qmax zx flip,
 * then packed weights, bias/mult/shift (groups x ceil4(ocg) int32 each), then x (u8).
 * Optional argv[3]: threads.
 * With LUT (a u8 -> u8 table function, q8-eltwise.h): q8_conv applies the table (i * 37 + 11) mod 256 to its output
 * (q8_conv_params.lut), so the test can tell a byte it missed or mapped twice.
 * With IO (q8_conv_params.io flags): x is converted to the blocked layout first (q8_pack_x per image) and y back
 * (q8_unpack_c4), so the file and the output stay NCHW; the blocked input also ends at the inaccessible page.
 * x ends where an inaccessible page begins: a read past its last byte faults, masked vector loads included (which
 * AddressSanitizer does not check). */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "q8-conv/q8-conv.h"
#ifdef LUT
#include "q8-eltwise/q8-eltwise.h"
#endif

static void *slurp(FILE *f, size_t n)
{
    void *p = malloc(n ? n : 1);
    if (n && fread(p, 1, n, f) != n) {
        fprintf(stderr, "short read\n");
        exit(2);
    }
    return p;
}

/* n bytes from f, the last one just before a PROT_NONE page */
static uint8_t *slurp_guarded(FILE *f, size_t n, void **map, size_t *len)
{
    const size_t ps = (size_t)sysconf(_SC_PAGESIZE), body = (n + ps - 1) / ps * ps;
    *len = body + ps;
    *map = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (*map == MAP_FAILED || mprotect((uint8_t *)*map + body, ps, PROT_NONE)) {
        fprintf(stderr, "mmap failed\n");
        exit(2);
    }
    uint8_t *p = (uint8_t *)*map + body - n;
    if (n && fread(p, 1, n, f) != n) {
        fprintf(stderr, "short read\n");
        exit(2);
    }
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4)
        return 2;
    FILE *f = fopen(argv[1], "rb");
    if (!f)
        return 2;
    int32_t h[21];
    if (fread(h, 4, 21, f) != 21)
        return 2;
    q8_conv_params p = {{h[2], h[3], h[4], h[6], h[7], h[8], h[9], h[10], h[11], h[12], h[13], h[14], h[15]},
                        h[0], h[1], h[5], NULL, NULL, NULL, NULL, h[16], h[17], h[18],
                        (uint8_t)h[19], (uint8_t)h[20], KERNEL, NULL, NULL, 0, NULL, 0, NULL, NULL};
#ifdef IGEMM
    p.igemm = IGEMM;
#endif
#ifdef LUT
    static uint8_t table[256];
    for (int i = 0; i < 256; i++)
        table[i] = (uint8_t)(i * 37 + 11);
    p.lut = table;
    p.lut_fn = LUT;
#endif
#ifdef CGEMM /* the channel-lane GEMM: weights in q8_pack_w_c32's layout, fp32 scales after the shifts */
    p.cgemm = CGEMM;
#endif
    const size_t K = q8_conv_implicit(&p) ? (size_t)(p.s.C + 3) / 4 * 4 * p.s.kh * p.s.kw
                                          : (size_t)p.s.C * p.s.kh * p.s.kw;
    const size_t mg = ((size_t)p.ocg + 3) / 4 * 4;
#ifdef PACK_W_BYTES /* a GEMM with a weight layout of its own (AMX; the channel-lane GEMM's reads no wlayout) */
#ifndef CGEMM
    p.wlayout = Q8_WLAYOUT_AMX;
#endif
    p.wp = slurp(f, PACK_W_BYTES((size_t)p.ocg, K) * (size_t)p.groups);
#else
    p.wp = slurp(f, q8_pack_w_bytes((size_t)p.ocg, K) * (size_t)p.groups);
#endif
    p.bias = slurp(f, 4 * mg * (size_t)p.groups);
    p.mult = slurp(f, 4 * mg * (size_t)p.groups);
    p.shift = slurp(f, 4 * mg * (size_t)p.groups);
#ifdef CGEMM
    p.scale = slurp(f, 4 * mg * (size_t)p.groups);
#endif
    const size_t nx = (size_t)p.batch * p.groups * p.s.C * p.s.H * p.s.W;
    const size_t ny = (size_t)p.batch * p.groups * p.ocg * p.s.Ho * p.s.Wo;
    void *xmap;
    size_t xlen;
    uint8_t *x = slurp_guarded(f, nx, &xmap, &xlen), *y = malloc(ny), *scratch = malloc(q8_conv_scratch_bytes(&p));
    fclose(f);
    uint8_t *xin = x, *yout = y, *yc = NULL;
    void *cmap = NULL;
    size_t clen = 0;
#ifdef IO
    const size_t HW = (size_t)p.s.H * p.s.W, N = (size_t)p.s.Ho * p.s.Wo, C = (size_t)p.s.C, M = (size_t)p.ocg;
    p.io = IO;
    if (p.io & Q8_X_C4) { /* the blocked copy, its last byte before the guard page */
        const size_t nc = (size_t)p.batch * C * q8_pack_np(HW), ps = (size_t)sysconf(_SC_PAGESIZE);
        clen = (nc + ps - 1) / ps * ps + ps;
        cmap = mmap(NULL, clen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (cmap == MAP_FAILED || mprotect((uint8_t *)cmap + clen - ps, ps, PROT_NONE))
            return 2;
        xin = (uint8_t *)cmap + clen - ps - nc;
        for (int b = 0; b < p.batch; b++)
            q8_pack_x(C, HW, x + (size_t)b * C * HW, HW, 0, xin + (size_t)b * C * q8_pack_np(HW));
    }
    if (p.io & Q8_Y_C4)
        yout = yc = malloc((size_t)p.batch * M * q8_pack_np(N));
#endif
    ec_pool pool, *pp = NULL;
    if (argc == 4 && atoi(argv[3]) > 1) { /* threaded run: must give the same bytes */
        if (ec_pool_init(&pool, atoi(argv[3])))
            return 2;
        pp = &pool;
    }
    q8_conv(&p, xin, yout, scratch, pp);
    if (pp)
        ec_pool_destroy(pp);
#ifdef IO
    for (int b = 0; yc && b < p.batch; b++)
        q8_unpack_c4(M, N, yc + (size_t)b * M * q8_pack_np(N), y + (size_t)b * M * N, 0, (M + 3) / 4);
#endif
    FILE *o = fopen(argv[2], "wb");
    if (!o || fwrite(y, 1, ny, o) != ny)
        return 2;
    fclose(o);
    free((void *)p.wp); free((void *)p.bias); free((void *)p.mult); free((void *)p.shift); free((void *)p.scale);
    munmap(xmap, xlen); free(y); free(scratch); free(yc);
    if (cmap)
        munmap(cmap, clen);
    return 0;
}
