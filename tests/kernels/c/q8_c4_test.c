/* The blocked int8 layout (q8-gemm.h): the _c4 GEMMs' bytes equal their row-output forms' followed by q8_pack_x
 * (the layout's definition), pixels past N and past the range untouched; q8_pack_pad4_c4 equals q8_pack_pad4 of the
 * NCHW tensor, q8_im2col_direct_c4 equals q8_im2col_direct_k4, and q8_unpack_c4 inverts q8_pack_x. Odd shapes:
 * M 4 .. 100 (the pixel-lane tile's 4-row tail, the channel-lane one's 16-channel half panel), N 1 .. 83, K4 1 .. 37,
 * fp32 and integer requantization, pixel ranges starting and ending inside tiles. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q8-gemm/q8-gemm.h"

static uint32_t rng = 7;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

/* whether the blocked output yc (pitch np, sentinel 0xA5 where not written) holds rows yr (M x N) for pixels
 * [n0, n1) and the sentinel elsewhere */
static int same_c4(size_t M, size_t N, size_t n0, size_t n1, const uint8_t *yr, const uint8_t *yc, size_t bytes)
{
    const size_t np = q8_pack_np(N);
    for (size_t i = 0; i < bytes; i++) {
        const size_t m = i / (np * 4) * 4 + i % 4, n = i / 4 % np;
        const int in = i < M * np && n >= n0 && n < n1;
        if (yc[i] != (in ? yr[m * N + n] : 0xA5))
            return 0;
    }
    return 1;
}

static void fill_rq(size_t M, int32_t *bias, int32_t *mult, int32_t *shift, float *scale)
{
    for (size_t m = 0; m < M; m++) {
        bias[m] = (int32_t)(rnd() % 200001) - 100000;
        const int e = 8 + (int)(rnd() % 10);
        scale[m] = (float)(rnd() % 4096 + 1) / 2048.0f / (float)(1 << e);
        mult[m] = (int32_t)(rnd() % (1u << 30)) + (1 << 30), shift[m] = 31 + e;
    }
}

/* the pixel-lane GEMM: fp32 = rq.scale set, else the integer multipliers */
static int gemm1(size_t M, size_t N, size_t K4, int fp32)
{
    const size_t K = 4 * K4 - rnd() % 4, np = q8_pack_np(N), yb = M * np + 256;
    int8_t *w = malloc(M * K), *wp = malloc(q8_pack_w_bytes(M, K));
    uint8_t *x = malloc(K4 * np * 4), *yr = malloc(M * N + 64), *yc = malloc(yb);
    int32_t *bias = malloc(4 * M), *mult = malloc(4 * M), *shift = malloc(4 * M);
    float *scale = malloc(4 * M);
    for (size_t i = 0; i < M * K; i++)
        w[i] = (int8_t)rnd();
    for (size_t i = 0; i < K4 * np * 4; i++)
        x[i] = (uint8_t)rnd();
    fill_rq(M, bias, mult, shift, scale);
    q8_pack_w(M, K, w, wp);
    const int clamp = (int)(rnd() % 2);
    const q8_rq rq = {bias, mult, shift, (int32_t)(rnd() % 256), clamp ? 40 : 0, clamp ? 200 : 255, fp32 ? scale : NULL};
    memset(yc, 0xA5, yb);
    GEMM(M, N, K4, wp, x, np, yr, N, &rq);
    GEMM_C4(M, N, K4, wp, x, np, yc, np, &rq);
    const int ok = same_c4(M, N, 0, N, yr, yc, yb);
    if (!ok)
        printf("gemm mismatch: M %zu N %zu K %zu fp32 %d\n", M, N, K, fp32);
    free(w); free(wp); free(x); free(yr); free(yc); free(bias); free(mult); free(shift); free(scale);
    return ok;
}

/* the channel-lane GEMM over packed X, pixels [n0, n1) */
static int cgemm1(size_t M, size_t N, size_t K4, size_t n0, size_t n1)
{
    const size_t K = 4 * K4 - rnd() % 4, np = q8_pack_np(N), yb = M * np + 256;
    int8_t *w = malloc(M * K), *wp = malloc(q8_pack_w_c32_bytes(M, K));
    uint8_t *x = malloc(K4 * np * 4), *yr = malloc(M * N + 64), *yc = malloc(yb);
    int32_t *koff = malloc(4 * K4), *bias = malloc(4 * M), *mult = malloc(4 * M), *shift = malloc(4 * M);
    float *scale = malloc(4 * M);
    for (size_t i = 0; i < M * K; i++)
        w[i] = (int8_t)rnd();
    for (size_t i = 0; i < K4 * np * 4; i++)
        x[i] = (uint8_t)rnd();
    for (size_t k = 0; k < K4; k++)
        koff[k] = (int32_t)(4 * k * np);
    fill_rq(M, bias, mult, shift, scale);
    q8_pack_w_c32(M, K, w, wp);
    const q8_rq rq = {bias, NULL, NULL, (int32_t)(rnd() % 256), 0, 255, scale};
    memset(yr, 0, M * N + 64);
    memset(yc, 0xA5, yb);
    CGEMM(M, n0, n1, N, N, 1, K4, wp, x, koff, yr, N, &rq);
    CGEMM_C4(M, n0, n1, N, N, 1, K4, wp, x, koff, yc, np, &rq);
    const int ok = same_c4(M, N, n0, n1, yr, yc, yb);
    if (!ok)
        printf("cgemm mismatch: M %zu N %zu K %zu n [%zu, %zu)\n", M, N, K, n0, n1);
    free(w); free(wp); free(x); free(yr); free(yc); free(koff); free(bias); free(mult); free(shift); free(scale);
    return ok;
}

/* the packing helpers against their NCHW forms, and the round trip */
static int pack1(size_t C, size_t H, size_t W, int k, int stride, int pad)
{
    const size_t HW = H * W, np = q8_pack_np(HW);
    uint8_t *x = malloc(C * HW + 64), *xc = malloc(C * np + 64), *back = malloc(C * HW + 64);
    for (size_t i = 0; i < C * HW; i++)
        x[i] = (uint8_t)rnd();
    q8_pack_x(C, HW, x, HW, 0, xc);
    q8_unpack_c4(C, HW, xc, back, 0, C / 4);
    int ok = memcmp(x, back, C * HW) == 0;
    /* the stride-1 padded copy (the channel-lane GEMM's), for a k x k window */
    const int Ho = (int)H + 2 * pad - k + 1, Wo = (int)W + 2 * pad - k + 1;
    if (Ho > 0 && Wo > 0) {
        const q8_conv_shape s = {(int)C, (int)H, (int)W, k, k, 1, 1, 1, 1, pad, pad, Ho, Wo};
        const size_t bytes = C / 4 * q8_pad4_hq(&s) * q8_pad4_wq(&s) * 4;
        uint8_t *d0 = malloc(bytes + 64), *d1 = malloc(bytes + 64);
        const uint8_t zx = (uint8_t)rnd();
        q8_pack_pad4(&s, x, zx, 0, d0, 0, C / 4);
        q8_pack_pad4_c4(&s, xc, zx, d1, 0, C / 4);
        ok &= memcmp(d0, d1, bytes) == 0;
        free(d0); free(d1);
    }
    /* a strided 1x1 */
    const int Hs = ((int)H - 1) / stride + 1, Ws = ((int)W - 1) / stride + 1;
    const q8_conv_shape s1 = {(int)C, (int)H, (int)W, 1, 1, stride, stride, 1, 1, 0, 0, Hs, Ws};
    const size_t b1 = q8_pack_x_bytes(C, (size_t)(Hs * Ws));
    uint8_t *p0 = malloc(b1), *p1 = malloc(b1);
    memset(p0, 0, b1);
    q8_im2col_direct_k4(&s1, x, 0, p0, 0, C / 4);
    q8_im2col_direct_c4(&s1, xc, p1, 0, C / 4);
    for (size_t c4 = 0; c4 < C / 4; c4++) /* the pixels; the padding lanes are any bytes to the GEMM */
        ok &= memcmp(p0 + c4 * q8_pack_np((size_t)(Hs * Ws)) * 4, p1 + c4 * q8_pack_np((size_t)(Hs * Ws)) * 4,
                     (size_t)(Hs * Ws) * 4) == 0;
    if (!ok)
        printf("pack mismatch: C %zu H %zu W %zu k %d stride %d pad %d\n", C, H, W, k, stride, pad);
    free(x); free(xc); free(back); free(p0); free(p1);
    return ok;
}

int main(void)
{
    static const size_t Ms[] = {4, 8, 12, 36, 100}, Ns[] = {1, 7, 16, 17, 31, 33, 49, 64, 83}, K4s[] = {1, 3, 16, 37};
    int pass = 0, total = 0;
    for (size_t a = 0; a < 5; a++)
        for (size_t b = 0; b < 9; b++)
            for (size_t c = 0; c < 4; c++)
                for (int fp32 = 0; fp32 < 2; fp32++, total++)
                    pass += gemm1(Ms[a], Ns[b], K4s[c], fp32);
    static const size_t Mc[] = {16, 32, 48, 96};
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 9; b++)
            for (size_t c = 0; c < 4; c++, total++) {
                const size_t N = Ns[b], n0 = N > 2 ? rnd() % (N / 2) : 0, n1 = N > 2 ? N - rnd() % (N - n0 - 1) : N;
                pass += cgemm1(Mc[a], N, K4s[c], (a + c) % 2 ? n0 : 0, (a + c) % 2 ? n1 : N);
            }
    for (int i = 0; i < 60; i++, total++)
        pass += pack1(4 * (1 + rnd() % 9), 1 + rnd() % 13, 1 + rnd() % 19, 1 + 2 * (int)(rnd() % 3), 1 + (int)(rnd() % 3),
                      (int)(rnd() % 3));
    printf("%s: %d/%d cases match\n", KERNEL_NAME, pass, total);
    return pass == total ? 0 : 1;
}
