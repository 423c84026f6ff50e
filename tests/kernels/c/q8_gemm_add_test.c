/* A q8 GEMM with the residual Add in its store (KERNEL_ADD) against the separate passes it replaces:
 * the plain GEMM (REF, exact scalar) and then q8_add, byte for byte; odd shapes around the 4-row /
 * 16-pixel tiles, random and extreme operands, clamps on the conv and on the Add, the residual in its
 * own buffer and in place (R == Y). Then q8_conv1x1_add against q8_conv + q8_add, serial and on a pool. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q8-gemm/q8-conv1x1-add.h"

#ifndef REF
#define REF q8_gemm_4x8__scalar
#endif
#ifndef WMIN
#define WMIN (-64)
#endif
#ifndef WMAX
#define WMAX 64
#endif
#ifndef SHIFT_MIN
#define SHIFT_MIN 31
#endif
#ifndef SHIFT_SPAN
#define SHIFT_SPAN 24
#endif
#define NMODES 6

static uint32_t rng = 4242;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

typedef struct {
    int8_t *W, *Wp;
    uint8_t *X, *Xp, *R;
    int32_t *bias, *mult, *shift;
    q8_rq rq;
    q8_add_params ap;
} problem;

/* modes: 0 random; 1 all operands at their top; 2 at their bottom; 3 clamps on conv and Add;
 * 4 Add multipliers at their bound (2^21 - 1) with ties-heavy shifts; 5 residual zero point 255 / 0 */
static void make(problem *p, size_t M, size_t N, size_t K, int mode)
{
    const size_t Mp = (M + 3) / 4 * 4;
    p->W = malloc(M * K), p->Wp = malloc(q8_pack_w_bytes(M, K));
    p->X = malloc(K * N), p->Xp = malloc(q8_pack_x_bytes(K, N)), p->R = malloc(M * N);
    p->bias = calloc(Mp, 4), p->mult = calloc(Mp, 4), p->shift = calloc(Mp, 4);
    for (size_t i = 0; i < M * K; i++)
        p->W[i] = (int8_t)(mode == 1 ? WMAX : mode == 2 ? WMIN : WMIN + (int)(rnd() % (uint32_t)(WMAX - WMIN + 1)));
    for (size_t i = 0; i < K * N; i++)
        p->X[i] = mode == 1 ? 255 : mode == 2 ? 0 : (uint8_t)(rnd() & 255);
    for (size_t i = 0; i < M * N; i++)
        p->R[i] = mode == 1 ? 255 : mode == 2 ? 0 : (uint8_t)(rnd() & 255);
    const int32_t zx = (int32_t)(rnd() & 255);
    for (size_t m = 0; m < Mp; m++) {
        int32_t sw = 0;
        for (size_t k = 0; k < K && m < M; k++)
            sw += p->W[m * K + k];
        p->bias[m] = (int32_t)(rnd() % 20001) - 10000 - zx * sw;
        p->mult[m] = (int32_t)((1u << 30) + (rnd() % (1u << 22)) * 256u);
        p->shift[m] = SHIFT_MIN + (int32_t)(rnd() % SHIFT_SPAN);
    }
    q8_rq rq = {p->bias, p->mult, p->shift, (int32_t)(rnd() & 255), 0, 255, NULL};
    if (mode == 3)
        rq.qmin = 7, rq.qmax = 230;
    p->rq = rq;
    q8_add_params ap = {rq.zp, (int32_t)(rnd() & 255), (int32_t)(rnd() % (1u << 21)), (int32_t)(rnd() % (1u << 21)),
                        1 + (int32_t)(rnd() % 30), (int32_t)(rnd() & 255), 0, 255};
    if (mode == 3)
        ap.qmin = 30, ap.qmax = 180;
    if (mode == 4)
        ap.ma = ap.mb = (1 << 21) - 1, ap.shift = 21;
    if (mode == 5)
        ap.zb = (rnd() & 1) ? 255 : 0, ap.zy = 255 - ap.zb;
    p->ap = ap;
    q8_pack_w(M, K, p->W, p->Wp);
    q8_pack_x(K, N, p->X, N, 0, p->Xp);
}

static void drop(problem *p)
{
    free(p->W); free(p->Wp); free(p->X); free(p->Xp); free(p->R);
    free(p->bias); free(p->mult); free(p->shift);
}

static int same(const uint8_t *a, const uint8_t *b, size_t n, const char *what, size_t M, size_t N, size_t K, int mode)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            printf("MISMATCH %s M=%zu N=%zu K=%zu mode=%d at %zu: ref %d got %d\n", what, M, N, K, mode, i, a[i], b[i]);
            return 0;
        }
    return 1;
}

static int kernel_case(size_t M, size_t N, size_t K, int mode)
{
    problem p;
    make(&p, M, N, K, mode);
    const size_t K4 = (K + 3) / 4, np = q8_pack_np(N);
    uint8_t *C = malloc(M * N), *Y0 = malloc(M * N), *Y1 = malloc(M * N), *Y2 = malloc(M * N);
    REF(M, N, K4, p.Wp, p.Xp, np, C, N, &p.rq);
    q8_add(M * N, C, p.R, &p.ap, Y0);
    memset(Y1, 0xEE, M * N);
    KERNEL_ADD(M, N, K4, p.Wp, p.Xp, np, Y1, N, &p.rq, p.R, &p.ap);
    memcpy(Y2, p.R, M * N); /* in place: the output overwrites the residual */
    KERNEL_ADD(M, N, K4, p.Wp, p.Xp, np, Y2, N, &p.rq, Y2, &p.ap);
    const int ok = same(Y0, Y1, M * N, "kernel", M, N, K, mode) && same(Y0, Y2, M * N, "in place", M, N, K, mode);
    free(C); free(Y0); free(Y1); free(Y2);
    drop(&p);
    return ok;
}

static int driver_case(size_t batch, size_t M, size_t H, size_t W, size_t C, int mode, ec_pool *pool)
{
    const size_t N = H * W;
    problem p;
    make(&p, M, batch * N, C, mode); /* X, R: batch images' worth of bytes; W, rq per output channel */
    q8_conv_params cp = {{(int)C, (int)H, (int)W, 1, 1, 1, 1, 1, 1, 0, 0, (int)H, (int)W}, (int)batch, 1, (int)M,
                         p.Wp, p.bias, p.mult, p.shift, p.rq.zp, p.rq.qmin, p.rq.qmax, 0, 0, q8_gemm_4x8__scalar, NULL, NULL, 0,
                         NULL, 0, NULL, NULL};
    uint8_t *scr = malloc(q8_conv_scratch_bytes(&cp));
    uint8_t *Y0 = malloc(batch * M * N), *Y1 = malloc(batch * M * N);
    q8_conv(&cp, p.X, Y0, scr, NULL);
    q8_add(batch * M * N, Y0, p.R, &p.ap, Y0);
    memset(Y1, 0xEE, batch * M * N);
    q8_conv1x1_add(&cp, KERNEL_ADD, p.X, p.R, &p.ap, Y1, scr, pool);
    const int ok = same(Y0, Y1, batch * M * N, pool ? "driver pool" : "driver", M, N, C, mode);
    free(scr); free(Y0); free(Y1);
    drop(&p);
    return ok;
}

int main(void)
{
    static const size_t Ms[] = {1, 3, 4, 5, 7, 8, 17, 33};
    static const size_t Ns[] = {1, 7, 15, 16, 17, 31, 33, 64};
    static const size_t Ks[] = {1, 5, 16, 17, 88};
    int fails = 0, cases = 0;
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
            for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++)
                for (int mode = 0; mode < NMODES; mode++, cases++)
                    fails += !kernel_case(Ms[a], Ns[b], Ks[c], mode);
    ec_pool pool;
    if (ec_pool_init(&pool, 2))
        return 2;
    static const size_t shapes[][5] = {{1, 16, 12, 48, 88}, {2, 5, 3, 11, 17}, {1, 32, 6, 24, 200}, {1, 3, 1, 33, 4}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int mode = 0; mode < NMODES; mode++) {
            const size_t *d = shapes[s];
            fails += !driver_case(d[0], d[1], d[2], d[3], d[4], mode, NULL);
            fails += !driver_case(d[0], d[1], d[2], d[3], d[4], mode, &pool);
            cases += 2;
        }
    ec_pool_destroy(&pool);
    printf("%s: %d/%d cases match\n", KERNEL_NAME, cases - fails, cases);
    return fails != 0;
}
