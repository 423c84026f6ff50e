/* q8 GEMM for AVX-512 VNNI: vpdpbusd adds 4-deep u8 x s8 dot products straight into int32 (no 16-bit
 * intermediate, so no saturation). 8 weight rows x 32 pixels: 16 accumulators, so 16 independent
 * vpdpbusd per k4 step hide its latency, and each weight quad is one broadcast load shared by two pixel
 * vectors (the 4x16 tile this replaces had 4 chains and a broadcast per vpdpbusd: 42-56 GMAC/s on
 * ppocr's 1x1 layers). The two 4-row panels of q8_pack_w are read side by side; a last panel alone and
 * a last 16-pixel block take the narrower forms of the same tile.
 * A panel's first tile prefetches the next panel's weights: weights read once per call come from memory on
 * large layers (ResNet-50's 2-2.4 MB stage-4 convs: 1.35x faster with the prefetch on a Zen 5 core).
 * The _c4 form writes the blocked layout (q8-gemm.h): each 4-row group's bytes interleaved per pixel. */
#include <immintrin.h>
#include <string.h>

#include "q8-gemm.h"
#include "../ec_vnni.h"
#include "q8-gemm-avx512-out.h"

/* rows (4 or 8) x nv (1 or 2) 16-pixel vectors at n0; constant after inlining. koff (implicit GEMM): k4 step k
 * reads at Xp + koff[k] + 4 n0, else at Xp + (k np + n0) 4. */
static inline __attribute__((always_inline)) void tile(int rows, int nv, size_t mr, size_t N, size_t n0, size_t K4,
                                                       const int8_t *w0, const uint8_t *Xp, size_t np, uint8_t *Y,
                                                       size_t y_stride, const q8_rq *rq, size_t m0,
                                                       const int32_t *koff, const int8_t *pf, int c4)
{
    __m512i acc[8][2];
    for (int r = 0; r < rows; r++)
        acc[r][0] = acc[r][1] = _mm512_set1_epi32(rq->bias[m0 + (size_t)r]);
    const uint8_t *xs = Xp + n0 * 4;
    const int8_t *w1 = w0 + K4 * 16; /* rows 4..7: the next panel */
    for (size_t k4 = 0; k4 < K4; k4++) {
        const uint8_t *x = koff ? xs + koff[k4] : xs + k4 * np * 4;
        if (pf && (k4 & 3) == 0) { /* 4 k4 steps of the next 8 rows: 128 bytes */
            _mm_prefetch((const char *)(pf + k4 * 32), _MM_HINT_T0);
            _mm_prefetch((const char *)(pf + k4 * 32 + 64), _MM_HINT_T0);
        }
        const __m512i x0 = _mm512_loadu_si512((const void *)x);
        const __m512i x1 = nv > 1 ? _mm512_loadu_si512((const void *)(x + 64)) : x0;
        for (int r = 0; r < rows; r++) {
            int32_t wq; /* one broadcast load (gcc folds the copy into vpbroadcastd from memory) */
            memcpy(&wq, (r < 4 ? w0 : w1) + k4 * 16 + 4 * (r & 3), 4);
            const __m512i b = _mm512_set1_epi32(wq);
            acc[r][0] = ec_dpbusd512(acc[r][0], x0, b);
            if (nv > 1)
                acc[r][1] = ec_dpbusd512(acc[r][1], x1, b);
        }
    }
    const size_t n = N - n0 < (size_t)(16 * nv) ? N - n0 : (size_t)(16 * nv);
    if (c4)
        q8_store_c4_avx512(rows, nv, n, acc, Y, y_stride, rq, m0, n0);
    else
        q8_store_rows_avx512(rows, nv, mr, n, acc, Y, y_stride, rq, m0, n0);
}

static inline __attribute__((always_inline)) void gemm(size_t M, size_t N, size_t K4, const int8_t *Wp,
                                                       const uint8_t *Xp, size_t np, uint8_t *Y, size_t y_stride,
                                                       const q8_rq *rq, const int32_t *koff, int c4)
{
    for (size_t m0 = 0; m0 < M; m0 += 8) {
        const size_t mr = M - m0 < 8 ? M - m0 : 8;
        const int8_t *w = Wp + (m0 / 4) * K4 * 16;
        const int8_t *pf = m0 + 8 < M ? w + 2 * K4 * 16 : NULL; /* the next panel, for the first tile */
        size_t n0 = 0;
        /* np is a multiple of 16: a 32-pixel step must not read past it */
        if (mr > 4) {
            for (; n0 < N && n0 + 32 <= np; n0 += 32, pf = NULL)
                tile(8, 2, mr, N, n0, K4, w, Xp, np, Y, y_stride, rq, m0, koff, pf, c4);
            if (n0 < N)
                tile(8, 1, mr, N, n0, K4, w, Xp, np, Y, y_stride, rq, m0, koff, pf, c4);
        } else {
            for (; n0 < N && n0 + 32 <= np; n0 += 32, pf = NULL)
                tile(4, 2, mr, N, n0, K4, w, Xp, np, Y, y_stride, rq, m0, koff, pf, c4);
            if (n0 < N)
                tile(4, 1, mr, N, n0, K4, w, Xp, np, Y, y_stride, rq, m0, koff, pf, c4);
        }
    }
}

void q8_gemm_8x32__avx512vnni(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                              size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    gemm(M, N, K4, Wp, Xp, np, Y, y_stride, rq, NULL, 0);
}

void q8_gemm_8x32__avx512vnni_c4(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp, size_t np,
                                 uint8_t *Y, size_t y_np, const q8_rq *rq)
{
    gemm(M, N, K4, Wp, Xp, np, Y, y_np, rq, NULL, 1);
}

void q8_igemm_8x32__avx512vnni(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *x, const int32_t *koff,
                               uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    gemm(M, N, K4, Wp, x, q8_pack_np(N), Y, y_stride, rq, koff, 0);
}
