/* Channel-lane q8 GEMM for AVX-512 VNNI (q8-gemm.h, q8_cgemm_fn): 32 output channels (two zmm of weights, 16
 * channels x 4 k each) x 8 pixels, each pixel's 4-byte k quad broadcast; 16 accumulators, 16 vpdpbusd per k4
 * step for 2 weight loads and 8 broadcasts, as in the 8x32 pixel-lane tile. Pixels are not lanes, so nothing is
 * padded: a 7x7 map's 49 pixels run at full width (the pixel-lane tile fills 64 lanes for them, 63 for its
 * implicit form's extended rows) and the implicit form writes compact rows, no extended ones to compact. On a
 * Zen 5 core ResNet-50's 3x3s ran 0.27-0.31 -> 0.23-0.27 ms.
 * A panel's first tile prefetches the next panel's weights (large layers' weights come from memory). The
 * requantized tile (16 channels x up to 8 pixels of bytes) is transposed into 16 rows of up to 8 bytes; the _c4 form
 * writes the blocked layout (q8-gemm.h) instead, which the packs' lane order already is. */
#include <immintrin.h>
#include <string.h>

#include "q8-gemm.h"
#include "../ec_vnni.h"
#include "../q8-requant/q8-rq-avx512.h"

/* H (1 or 2) 16-channel halves x P (1..8) pixels at byte offsets po[] (from x + koff[k]); constant after inlining */
static inline __attribute__((always_inline)) void tile(int H, int P, size_t K4, const int8_t *w, const uint8_t *x,
                                                       const int32_t *koff, const size_t *po, const int8_t *pf,
                                                       uint8_t *Y, size_t y_stride, const q8_rq *rq, size_t m0,
                                                       size_t n0, int c4)
{
    __m512i acc[2][8];
    for (int h = 0; h < H; h++) {
        const __m512i b = _mm512_loadu_si512((const void *)(rq->bias + m0 + 16 * (size_t)h));
        for (int p = 0; p < P; p++)
            acc[h][p] = b;
    }
    for (size_t k4 = 0; k4 < K4; k4++) {
        const uint8_t *xk = x + koff[k4];
        const __m512i w0 = _mm512_loadu_si512((const void *)(w + k4 * 128));
        const __m512i w1 = H > 1 ? _mm512_loadu_si512((const void *)(w + k4 * 128 + 64)) : w0;
        if (pf) { /* the next panel's 128 bytes of this step */
            _mm_prefetch((const char *)(pf + k4 * 128), _MM_HINT_T0);
            _mm_prefetch((const char *)(pf + k4 * 128 + 64), _MM_HINT_T0);
        }
        for (int p = 0; p < P; p++) {
            int32_t q;
            memcpy(&q, xk + po[p], 4);
            const __m512i b = _mm512_set1_epi32(q);
            acc[0][p] = ec_dpbusd512(acc[0][p], b, w0);
            if (H > 1)
                acc[1][p] = ec_dpbusd512(acc[1][p], b, w1);
        }
    }
    const __m512 lo = _mm512_set1_ps((float)(rq->qmin - rq->zp)), hi = _mm512_set1_ps((float)(rq->qmax - rq->zp));
    const __m512i zp = _mm512_set1_epi32(rq->zp);
    for (int h = 0; h < H; h++) {
        const __m512 sc = _mm512_loadu_ps(rq->scale + m0 + 16 * (size_t)h);
        if (c4) { /* the blocked layout: a pack sequence over 4 pixels leaves 128-bit lane L = channel group L's 4
                   * channels of those pixels, in the layout's order; lanes L of pixels 0-3 and 4-7 side by side */
            const __m512i zp16 = _mm512_set1_epi16((short)rq->zp), lo8 = _mm512_set1_epi8((char)rq->qmin);
            const __m512i hi8 = _mm512_set1_epi8((char)rq->qmax), z = _mm512_setzero_si512();
            const __m512i a = q8_rq64_packs_fp32_avx512(acc[h][0], P > 1 ? acc[h][1] : z, P > 2 ? acc[h][2] : z,
                                                        P > 3 ? acc[h][3] : z, sc, sc, zp16, lo8, hi8);
            const __m512i b = P > 4 ? q8_rq64_packs_fp32_avx512(acc[h][4], P > 5 ? acc[h][5] : z, P > 6 ? acc[h][6] : z,
                                                                P > 7 ? acc[h][7] : z, sc, sc, zp16, lo8, hi8)
                                    : z;
            const __m512i t01 = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(1, 0, 1, 0)); /* a0 a1 b0 b1 */
            const __m512i t23 = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 2, 3, 2));
            const __m512i p01 = _mm512_shuffle_i64x2(t01, t01, _MM_SHUFFLE(3, 1, 2, 0)); /* a0 b0 a1 b1 */
            const __m512i p23 = _mm512_shuffle_i64x2(t23, t23, _MM_SHUFFLE(3, 1, 2, 0));
            const __m256i o[4] = {_mm512_castsi512_si256(p01), _mm512_extracti64x4_epi64(p01, 1),
                                  _mm512_castsi512_si256(p23), _mm512_extracti64x4_epi64(p23, 1)};
            uint8_t *y = Y + ((m0 + 16 * (size_t)h) / 4 * y_stride + n0) * 4;
            for (int j = 0; j < 4; j++) {
                if (P == 8)
                    _mm256_storeu_si256((__m256i *)(void *)(y + (size_t)j * y_stride * 4), o[j]);
                else
                    _mm256_mask_storeu_epi32((void *)(y + (size_t)j * y_stride * 4), (__mmask8)((1u << P) - 1), o[j]);
            }
            continue;
        }
        __m128i q[8];
        for (int p = 0; p < 8; p++) {
            if (p >= P) {
                q[p] = _mm_setzero_si128();
                continue;
            }
            /* q8_requant1_fp32 per lane: clamp, round to nearest even (the default MXCSR), add the zero point */
            const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(acc[h][p]), sc), lo), hi);
            q[p] = _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(v), zp));
        }
        /* q[p] byte c = channel c of pixel p -> t[i] = channels 2i (low 8 bytes) and 2i + 1 (high), pixels 0..7 */
        const __m128i a0 = _mm_unpacklo_epi8(q[0], q[1]), a1 = _mm_unpackhi_epi8(q[0], q[1]);
        const __m128i a2 = _mm_unpacklo_epi8(q[2], q[3]), a3 = _mm_unpackhi_epi8(q[2], q[3]);
        const __m128i a4 = _mm_unpacklo_epi8(q[4], q[5]), a5 = _mm_unpackhi_epi8(q[4], q[5]);
        const __m128i a6 = _mm_unpacklo_epi8(q[6], q[7]), a7 = _mm_unpackhi_epi8(q[6], q[7]);
        const __m128i b0 = _mm_unpacklo_epi16(a0, a2), b1 = _mm_unpackhi_epi16(a0, a2);
        const __m128i b2 = _mm_unpacklo_epi16(a1, a3), b3 = _mm_unpackhi_epi16(a1, a3);
        const __m128i b4 = _mm_unpacklo_epi16(a4, a6), b5 = _mm_unpackhi_epi16(a4, a6);
        const __m128i b6 = _mm_unpacklo_epi16(a5, a7), b7 = _mm_unpackhi_epi16(a5, a7);
        const __m128i t[8] = {_mm_unpacklo_epi32(b0, b4), _mm_unpackhi_epi32(b0, b4), _mm_unpacklo_epi32(b1, b5),
                              _mm_unpackhi_epi32(b1, b5), _mm_unpacklo_epi32(b2, b6), _mm_unpackhi_epi32(b2, b6),
                              _mm_unpacklo_epi32(b3, b7), _mm_unpackhi_epi32(b3, b7)};
        uint8_t *y = Y + (m0 + 16 * (size_t)h) * y_stride + n0;
        const __mmask16 lo_m = (__mmask16)((1u << P) - 1);
        for (int i = 0; i < 8; i++) {
            uint8_t *r0 = y + (size_t)(2 * i) * y_stride, *r1 = r0 + y_stride;
            if (P == 8) {
                _mm_storel_epi64((__m128i *)(void *)r0, t[i]);
                _mm_storel_epi64((__m128i *)(void *)r1, _mm_unpackhi_epi64(t[i], t[i]));
            } else {
                _mm_mask_storeu_epi8(r0, lo_m, t[i]);
                _mm_mask_storeu_epi8(r1, lo_m, _mm_srli_si128(t[i], 8));
            }
        }
    }
}

/* all pixel tiles of one panel: as few as 8-pixel tiles allow, of sizes differing by at most one (a map of 8 k + 1
 * pixels would end in a 1-pixel tile, whose two accumulators wait on vpdpbusd's latency each step: on 7x7 maps
 * that tile took ~60% of a full tile's time for 1/8 of its work) */
static inline int P_of(size_t t, size_t base, size_t wide) { return (int)(t < wide ? base + 1 : base); }

static inline __attribute__((always_inline)) void panel(int H, size_t n0, size_t n1, size_t Wo, size_t rs, size_t cs,
                                                        size_t K4,
                                                        const int8_t *w, const int8_t *pf, const uint8_t *x,
                                                        const int32_t *koff, uint8_t *Y, size_t y_stride,
                                                        const q8_rq *rq, size_t m0, int c4)
{
    size_t oh = n0 / Wo, ow = n0 % Wo; /* pixel n0's row and column, walked along */
    const size_t tiles = (n1 - n0 + 7) / 8, base = tiles ? (n1 - n0) / tiles : 0, wide = tiles ? (n1 - n0) % tiles : 0;
    size_t t = 0;
    for (size_t n = n0; n < n1; n += (size_t)P_of(t, base, wide), t++, pf = NULL) {
        size_t po[8];
        const int P = P_of(t, base, wide);
        for (int p = 0; p < P; p++) {
            po[p] = 4 * (oh * rs + ow * cs);
            if (++ow == Wo)
                ow = 0, oh++;
        }
        switch (P) {
        case 8: tile(H, 8, K4, w, x, koff, po, pf, Y, y_stride, rq, m0, n, c4); break;
        case 7: tile(H, 7, K4, w, x, koff, po, pf, Y, y_stride, rq, m0, n, c4); break;
        case 6: tile(H, 6, K4, w, x, koff, po, pf, Y, y_stride, rq, m0, n, c4); break;
        case 5: tile(H, 5, K4, w, x, koff, po, pf, Y, y_stride, rq, m0, n, c4); break;
        case 4: tile(H, 4, K4, w, x, koff, po, pf, Y, y_stride, rq, m0, n, c4); break;
        case 3: tile(H, 3, K4, w, x, koff, po, pf, Y, y_stride, rq, m0, n, c4); break;
        case 2: tile(H, 2, K4, w, x, koff, po, pf, Y, y_stride, rq, m0, n, c4); break;
        default: tile(H, 1, K4, w, x, koff, po, pf, Y, y_stride, rq, m0, n, c4); break;
        }
    }
}

static inline __attribute__((always_inline)) void cgemm(size_t M, size_t n0, size_t n1, size_t Wo, size_t rs,
                                                        size_t cs, size_t K4, const int8_t *Wp, const uint8_t *x,
                                                        const int32_t *koff, uint8_t *Y, size_t y_stride,
                                                        const q8_rq *rq, int c4)
{
    for (size_t m0 = 0; m0 < M; m0 += 32) {
        const int8_t *w = Wp + m0 * K4 * 4;
        const int8_t *pf = m0 + 32 < M ? w + 32 * K4 * 4 : NULL;
        if (M - m0 >= 32)
            panel(2, n0, n1, Wo, rs, cs, K4, w, pf, x, koff, Y, y_stride, rq, m0, c4);
        else
            panel(1, n0, n1, Wo, rs, cs, K4, w, pf, x, koff, Y, y_stride, rq, m0, c4);
    }
}

void q8_cgemm_32x8__avx512vnni(size_t M, size_t n0, size_t n1, size_t Wo, size_t rs, size_t cs, size_t K4,
                               const int8_t *Wp, const uint8_t *x, const int32_t *koff, uint8_t *Y, size_t y_stride,
                               const q8_rq *rq)
{
    cgemm(M, n0, n1, Wo, rs, cs, K4, Wp, x, koff, Y, y_stride, rq, 0);
}

void q8_cgemm_32x8__avx512vnni_c4(size_t M, size_t n0, size_t n1, size_t Wo, size_t rs, size_t cs, size_t K4,
                                  const int8_t *Wp, const uint8_t *x, const int32_t *koff, uint8_t *Y, size_t y_np,
                                  const q8_rq *rq)
{
    cgemm(M, n0, n1, Wo, rs, cs, K4, Wp, x, koff, Y, y_np, rq, 1);
}
