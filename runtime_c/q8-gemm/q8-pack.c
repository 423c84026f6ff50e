/* Packing for the q8 GEMM (layouts in q8-gemm.h). Weights are packed once at compile time
 * by the Python emitter with the same layout; this C version serves tests and tools. */
#include <string.h>

#include "q8-gemm.h"

void q8_pack_w(size_t M, size_t K, const int8_t *W, int8_t *Wp)
{
    const size_t K4 = (K + 3) / 4;
    for (size_t mb = 0; mb < (M + 3) / 4; mb++)
        for (size_t k4 = 0; k4 < K4; k4++)
            for (size_t r = 0; r < 4; r++)
                for (size_t j = 0; j < 4; j++) {
                    size_t m = mb * 4 + r, k = k4 * 4 + j;
                    *Wp++ = (m < M && k < K) ? W[m * K + k] : 0;
                }
}

void q8_pack_x(size_t K, size_t N, const uint8_t *X, size_t x_stride, uint8_t flip, uint8_t *Xp)
{
    const size_t np = q8_pack_np(N);
    memset(Xp, 0, q8_pack_x_bytes(K, N));
    for (size_t k = 0; k < K; k++) {
        const uint8_t *row = X + k * x_stride;
        uint8_t *dst = Xp + (k / 4) * np * 4 + (k % 4);
        for (size_t n = 0; n < N; n++)
            dst[n * 4] = row[n] ^ flip;
    }
}

/* One output row of taps for a fixed (c, i, j): contiguous when the stride is 1. */
static void im2col_row(const q8_conv_shape *s, const uint8_t *xc, int i, int j, uint8_t pad,
                       uint8_t flip, uint8_t *dst)
{
    for (int oh = 0; oh < s->Ho; oh++) {
        int ih = oh * s->sh + i * s->dh - s->pt;
        uint8_t *d = dst + (size_t)oh * s->Wo * 4;
        if (ih < 0 || ih >= s->H) {
            for (int ow = 0; ow < s->Wo; ow++)
                d[ow * 4] = pad ^ flip;
            continue;
        }
        const uint8_t *row = xc + (size_t)ih * s->W;
        for (int ow = 0; ow < s->Wo; ow++) {
            int iw = ow * s->sw + j * s->dw - s->pl;
            d[ow * 4] = (uint8_t)((iw >= 0 && iw < s->W ? row[iw] : pad) ^ flip);
        }
    }
}

void q8_pack_im2col(const q8_conv_shape *s, const uint8_t *x, uint8_t pad, uint8_t flip,
                    uint8_t *Xp)
{
    const size_t N = (size_t)s->Ho * s->Wo, np = q8_pack_np(N);
    const size_t K = (size_t)s->C * s->kh * s->kw;
    memset(Xp, 0, q8_pack_x_bytes(K, N));
    size_t k = 0;
    for (int c = 0; c < s->C; c++)
        for (int i = 0; i < s->kh; i++)
            for (int j = 0; j < s->kw; j++, k++)
                im2col_row(s, x + (size_t)c * s->H * s->W, i, j, pad, flip,
                           Xp + (k / 4) * np * 4 + (k % 4));
}
