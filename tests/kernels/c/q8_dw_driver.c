/* Runs the q8 depthwise variant KERNEL on a problem file (argv[1]) and writes y to argv[2].
 * File: int32 header[18] = batch C H W kh kw sh sw dh dw pt pl Ho Wo zp qmin qmax zx,
 * then w (C*kh*kw int8), bias/mult/shift (C int32 each), quad (C*kh*ceil(kw/4) int32) and zrow
 * (C*kh int32) as the emitter packs them (kernels other than the VNNI ones ignore them), with FP32_RQ the fp32
 * scales (C float), x (u8). Optional argv[3]: threads. */
#include <stdio.h>
#include <stdlib.h>

#include "q8-dwconv/q8-dwconv.h"

static void *slurp(FILE *f, size_t n)
{
    void *p = malloc(n ? n : 1);
    if (n && fread(p, 1, n, f) != n)
        exit(2);
    return p;
}

int main(int argc, char **argv)
{
    FILE *f = argc >= 3 ? fopen(argv[1], "rb") : NULL;
    int32_t h[18];
    if (!f || fread(h, 4, 18, f) != 18)
        return 2;
    q8_dw_params p = {h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11], h[12], h[13],
                      NULL, NULL, NULL, NULL, h[14], h[15], h[16], (uint8_t)h[17], NULL, NULL, NULL};
    p.w = slurp(f, (size_t)p.C * p.kh * p.kw);
    p.bias = slurp(f, 4 * (size_t)p.C);
    p.mult = slurp(f, 4 * (size_t)p.C);
    p.shift = slurp(f, 4 * (size_t)p.C);
    p.quad = slurp(f, 4 * (size_t)p.C * p.kh * ((p.kw + 3) / 4)); /* the emitter's packing (dw_quads) */
    p.zrow = slurp(f, 4 * (size_t)p.C * p.kh);
#ifdef FP32_RQ
    p.scale = slurp(f, 4 * (size_t)p.C);
#endif
    size_t nx = (size_t)p.batch * p.C * p.H * p.W, ny = (size_t)p.batch * p.C * p.Ho * p.Wo;
    uint8_t *x = slurp(f, nx), *y = malloc(ny), *scr = malloc(q8_dwconv_scratch_bytes(&p) * EC_MAX_THREADS);
    fclose(f);
    ec_pool pool, *pp = NULL;
    if (argc == 4 && atoi(argv[3]) > 1) { /* threaded run through the channel-parallel driver */
        if (ec_pool_init(&pool, atoi(argv[3])))
            return 2;
        pp = &pool;
    }
    q8_dwconv_run(KERNEL, &p, x, y, scr, pp);
    if (pp)
        ec_pool_destroy(pp);
    FILE *o = fopen(argv[2], "wb");
    if (!o || fwrite(y, 1, ny, o) != ny)
        return 2;
    fclose(o);
    free((void *)p.w); free((void *)p.bias); free((void *)p.mult); free((void *)p.shift);
    free((void *)p.quad); free((void *)p.zrow);
    free(x); free(y); free(scr);
    return 0;
}
