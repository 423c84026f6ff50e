/* 2-D max pooling in two passes, AVX2: ec_f32_maxpool2d_2pass_scalar's plan (horizontal max into a row
 * buffer, then vertical max) with the stride-2 horizontal pass vectorised (compilers leave its strided reads
 * scalar): 16 (KW = 2) or 18 (KW = 3) consecutive inputs make 8 outputs through shuffles that split even and
 * odd columns, one lane permute at the end. Each output row takes the max of its KH rows in one store.
 * Windows that cross the image's edge and other strides or dilations go through the scalar code. Same results
 * as the scalar version (max taken in the same order) except for NaN and -inf. */
#ifndef EC_F32_MAXPOOL_2PASS_AVX2_H
#define EC_F32_MAXPOOL_2PASS_AVX2_H

#include <float.h>
#include <immintrin.h>
#include <stddef.h>

#include "f32-pool/f32-maxpool-2pass-scalar.h"

static inline void ec_f32_maxpool2d_hpass_s2_avx2(int W, int OW, int KW, int PL, const float *xr, float *hr)
{
    int lo = (PL + 1) / 2;                             /* first ow whose window starts inside */
    int hi = W - 1 - (KW - 1) + PL < 0 ? -1 : (W - 1 - (KW - 1) + PL) / 2;  /* last one ending inside */
    if (hi > OW - 1) hi = OW - 1;
    int ow = 0;
    for (; ow < OW && ow < lo; ow++) {                 /* left edge */
        float m = -FLT_MAX;
        for (int kw = 0; kw < KW; kw++) {
            ptrdiff_t iw = (ptrdiff_t)ow * 2 - PL + kw;  /* wide: gcc -O2 proved an int form could overflow */
            if (iw >= 0 && iw < W) m = xr[iw] > m ? xr[iw] : m;
        }
        hr[ow] = m;
    }
    /* 8 outputs read columns 2 ow - PL .. + 15 (+ 17 for KW = 3: one past the last window's end) */
    const int span = KW == 3 ? 18 : 16;
    for (; ow + 7 <= hi && 2 * ow - PL + span <= W; ow += 8) {
        const float *p = xr + 2 * ow - PL;
        __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
        /* lanes hold columns 0 2 8 10 | 4 6 12 14 (even) and 1 3 9 11 | 5 7 13 15 (odd) */
        __m256 m = _mm256_max_ps(_mm256_shuffle_ps(a, b, 0xDD), _mm256_shuffle_ps(a, b, 0x88));
        if (KW == 3) {
            __m256 c = _mm256_loadu_ps(p + 2), d = _mm256_loadu_ps(p + 10);
            m = _mm256_max_ps(_mm256_shuffle_ps(c, d, 0x88), m);
        }
        m = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(m), 0xD8));  /* 64-bit pairs 0 2 1 3 */
        _mm256_storeu_ps(hr + ow, m);
    }
    for (; ow < OW; ow++) {                            /* interior tail and right edge */
        float m = -FLT_MAX;
        for (int kw = 0; kw < KW; kw++) {
            ptrdiff_t iw = (ptrdiff_t)ow * 2 - PL + kw;  /* wide: gcc -O2 proved an int form could overflow */
            if (iw >= 0 && iw < W) m = xr[iw] > m ? xr[iw] : m;
        }
        hr[ow] = m;
    }
}

static inline void ec_f32_maxpool2d_2pass_avx2(size_t planes, int H, int W, int OH, int OW, int KH, int KW, int SH,
                                               int SW, int DH, int DW, int PT, int PL, const float *x, float *y,
                                               float *rows)
{
    const int fast = SW == 2 && DW == 1 && (KW == 2 || KW == 3);
    for (size_t c = 0; c < planes; c++) {
        const float *xp = x + c * (size_t)H * W;
        float *yp = y + c * (size_t)OH * OW;
        for (int ih = 0; ih < H; ih++) {
            if (fast)
                ec_f32_maxpool2d_hpass_s2_avx2(W, OW, KW, PL, xp + (size_t)ih * W, rows + (size_t)ih * OW);
            else
                ec_f32_maxpool2d_hpass(W, OW, KW, SW, DW, PL, xp + (size_t)ih * W, rows + (size_t)ih * OW);
        }
        for (int oh = 0; oh < OH; oh++) {
            float *yr = yp + (size_t)oh * OW;
            const float *src[16];
            int n = 0;
            for (int kh = 0; kh < KH; kh++) {
                int ih = oh * SH - PT + kh * DH;
                if (ih >= 0 && ih < H) {
                    if (n == 16) {  /* more rows than the list holds: fold them into the first */
                        for (int ow = 0; ow < OW; ow++) yr[ow] = src[0][ow];
                        for (int r = 1; r < n; r++)
                            for (int ow = 0; ow < OW; ow++) yr[ow] = src[r][ow] > yr[ow] ? src[r][ow] : yr[ow];
                        src[0] = yr;
                        n = 1;
                    }
                    src[n++] = rows + (size_t)ih * OW;
                }
            }
            if (n == 0) {  /* window wholly in padding */
                for (int ow = 0; ow < OW; ow++) yr[ow] = -FLT_MAX;
                continue;
            }
            int ow = 0;
            for (; ow + 8 <= OW; ow += 8) {
                __m256 m = _mm256_loadu_ps(src[0] + ow);
                for (int r = 1; r < n; r++) m = _mm256_max_ps(_mm256_loadu_ps(src[r] + ow), m);
                _mm256_storeu_ps(yr + ow, m);
            }
            for (; ow < OW; ow++) {
                float m = src[0][ow];
                for (int r = 1; r < n; r++) m = src[r][ow] > m ? src[r][ow] : m;
                yr[ow] = m;
            }
        }
    }
}

#endif
