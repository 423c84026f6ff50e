/* Portable int8 edge / elementwise / pooling kernels (see q8-eltwise.h). */
#include <math.h>
#if defined(__AVX2__)
#include <immintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#include "q8-eltwise.h"

static inline uint8_t clamp_u8(int32_t v, int32_t lo, int32_t hi)
{
    return (uint8_t)(v < lo ? lo : v > hi ? hi : v);
}

/* x / scale correctly rounded without a division (vdivps zmm: ~10 cycles for 16 quotients; ppocr cls's input
 * quantized in 4.6 instead of 7.0 us on an AVX-512 Xeon):
 * q = x * r with r = RN(1 / scale), then two Markstein corrections q += (x - q * scale) * r, the residual
 * exact through the fma. After the first q is within an ulp of x / scale; the second, by Markstein's
 * theorem, rounds it correctly (for scales in 1e-20..1e20, so the residual never underflows where the
 * rounding matters; others divide). x is first clamped to +-1024 * scale, which only moves quotients that
 * saturate anyway, keeps the steps finite and maps NaN to -1024 (max returns its second operand), as
 * the division's NaN ends as 0. */
static inline int quotient_ok(float scale)
{
    const float r = 1.0f / scale;
    return scale >= 1e-20f && scale <= 1e20f && r >= 1e-20f && r <= 1e20f;
}

void q8_quantize(size_t n, const float *x, float scale, int32_t zp, uint8_t *y)
{
    size_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
    if (quotient_ok(scale)) {
        /* the conversion rounds to nearest even; zp is added in int16 and the packs saturate to 0..255 */
        const __m512 sv = _mm512_set1_ps(scale), rv = _mm512_set1_ps(1.0f / scale);
        const __m512 xlo = _mm512_set1_ps(-1024.0f * scale), xhi = _mm512_set1_ps(1024.0f * scale);
        const __m512i zp16 = _mm512_set1_epi16((short)zp);
        for (; i + 64 <= n; i += 64) {
            __m512i q[4];
            for (int k = 0; k < 4; k++) {
                const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_loadu_ps(x + i + 16 * k), xlo), xhi);
                __m512 d = _mm512_mul_ps(v, rv);
                d = _mm512_fmadd_ps(_mm512_fnmadd_ps(d, sv, v), rv, d);
                d = _mm512_fmadd_ps(_mm512_fnmadd_ps(d, sv, v), rv, d);
                q[k] = _mm512_cvt_roundps_epi32(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            }
            /* packs work per 128-bit lane: 4-byte units come out [0 4 8 12 | 1 5 9 13 | ...] */
            const __m512i w = _mm512_packus_epi16(_mm512_adds_epi16(_mm512_packs_epi32(q[0], q[1]), zp16),
                                                  _mm512_adds_epi16(_mm512_packs_epi32(q[2], q[3]), zp16));
            _mm512_storeu_si512(y + i, _mm512_permutexvar_epi32(
                                           _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), w));
        }
    }
#endif
#if defined(__AVX2__)
    /* the same float operations 32 at a time (nearbyintf did not vectorise: 4x slower) */
    const __m256 sv = _mm256_set1_ps(scale), zv = _mm256_set1_ps((float)zp), lo = _mm256_setzero_ps(),
                 hi = _mm256_set1_ps(255.0f);
#if defined(__FMA__)
    const int fast = quotient_ok(scale);
    const __m256 rv = _mm256_set1_ps(1.0f / scale), xlo = _mm256_set1_ps(-1024.0f * scale),
                 xhi = _mm256_set1_ps(1024.0f * scale);
#endif
    for (; i + 32 <= n; i += 32) {
        __m256i q[4];
        for (int k = 0; k < 4; k++) {
            __m256 v;
#if defined(__FMA__)
            if (fast) {
                const __m256 c = _mm256_min_ps(_mm256_max_ps(_mm256_loadu_ps(x + i + 8 * k), xlo), xhi);
                v = _mm256_mul_ps(c, rv);
                v = _mm256_fmadd_ps(_mm256_fnmadd_ps(v, sv, c), rv, v);
                v = _mm256_fmadd_ps(_mm256_fnmadd_ps(v, sv, c), rv, v);
            } else
#endif
                v = _mm256_div_ps(_mm256_loadu_ps(x + i + 8 * k), sv);
            v = _mm256_add_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zv);
            q[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi)); /* NaN -> 0 */
        }
        /* packs work per 128-bit half: [0 1 4 5 | 2 3 6 7] in 8-byte units, then put in order */
        const __m256i w = _mm256_packus_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *)(y + i), _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
#endif
    for (; i < n; i++) {
        float v = nearbyintf(x[i] / scale) + (float)zp;
        v = v >= 0.0f ? (v > 255.0f ? 255.0f : v) : 0.0f; /* clamp in float: no int overflow, NaN -> 0 */
        y[i] = (uint8_t)v;
    }
}

void q8_dequantize(size_t n, const uint8_t *x, float scale, int32_t zp, float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (float)((int32_t)x[i] - zp) * scale;
}

/* one element of q8_add_f32 */
static inline uint8_t addf1(uint8_t a, uint8_t b, const q8_addf_params *p)
{
    const float da = (float)(a - p->za) * p->sa, db = (float)(b - p->zb) * p->sb;
    float v = nearbyintf((da + db) / p->sy) + (float)p->zy;
    v = v >= (float)p->qmin ? (v > (float)p->qmax ? (float)p->qmax : v) : (float)p->qmin;
    return (uint8_t)v;
}

/* q8_add_f32 from two fused multiply-adds per element: t = a * ca + (b * cb + c0), ca = sa / sy, cb = sb / sy,
 * c0 = zy - za * ca - zb * cb, is within E of the exact path's quotient plus zy (the bound below: the exact path's
 * four roundings, each at most 2^-24 of T = 255 (sa + sb) / sy, and the fast one's), so both round to the same
 * integer unless t lies within E of a tie k + 1/2. Such lanes are found from frac(t + 1/2 + 2E) < 5E (that sum's
 * own rounding is within E too) and their vector is computed the exact way; with the residual Adds' scales that is
 * ~5% of the vectors. The exact path costs ~17 vector operations per 16 outputs, this one ~10. Off (ok = 0) for
 * scales where E is not small or the Markstein quotient cannot serve as the fallback. Defined where a vector path
 * below uses it (AVX-512 without DQ keeps the exact path alone). */
#if (defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__)) || \
    (defined(__AVX2__) && defined(__FMA__) && !(defined(__AVX512F__) && defined(__AVX512BW__))) || \
    (defined(__ARM_NEON) && defined(__ARM_FEATURE_FMA) && __ARM_ARCH >= 8) /* vrndmq, vcvtnq: ARMv8 */
#define Q8_ADDF_FAST 1
typedef struct {
    float ca, cb, c0, h, thr;
    int ok;
} addf_fast;

static addf_fast addf_fast_init(const q8_addf_params *p)
{
    addf_fast f = {0};
    if (!quotient_ok(p->sy) || !(p->sa >= 1e-30f && p->sa <= 1e30f && p->sb >= 1e-30f && p->sb <= 1e30f))
        return f;
    f.ca = p->sa / p->sy, f.cb = p->sb / p->sy;
    const double c0 = (double)p->zy - (double)p->za * f.ca - (double)p->zb * f.cb;
    const double T = 255.0 * ((double)p->sa + (double)p->sb) / (double)p->sy;
    const double E = 2.0 * 0x1p-24 * (5.0 * T + 4.0 * fabs(c0) + 256.0 * ((double)f.ca + 2.0 * (double)f.cb) + 300.0);
    if (!(E < 1.0 / 64) || !(fabs(c0) < 4096.0))
        return f;
    f.c0 = (float)c0, f.h = (float)(0.5 + 2.0 * E), f.thr = (float)(5.0 * E);
    f.ok = 1;
    return f;
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
/* the exact path on 16 lanes (a, b widened to int32): the float QDQ, the quotient by a multiply and two Markstein
 * corrections as in q8_quantize (valid where quotient_ok(sy)); returns rne(quotient) + zy in int32 */
typedef struct {
    __m512i za, zb, zy;
    __m512 sa, sb, sy, ry, vlo, vhi;
} addf_k512;

static inline addf_k512 addf_exact512_init(const q8_addf_params *p)
{
    addf_k512 k;
    k.za = _mm512_set1_epi32(p->za), k.zb = _mm512_set1_epi32(p->zb), k.zy = _mm512_set1_epi32(p->zy);
    k.sa = _mm512_set1_ps(p->sa), k.sb = _mm512_set1_ps(p->sb), k.sy = _mm512_set1_ps(p->sy);
    k.ry = _mm512_set1_ps(1.0f / p->sy), k.vlo = _mm512_set1_ps(-1024.0f * p->sy);
    k.vhi = _mm512_set1_ps(1024.0f * p->sy);
    return k;
}

static inline __m512i addf_exact512(__m512i av, __m512i bv, const addf_k512 *k)
{
    const __m512 da = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(av, k->za)), k->sa);
    const __m512 db = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(bv, k->zb)), k->sb);
    const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(da, db), k->vlo), k->vhi);
    __m512 d = _mm512_mul_ps(v, k->ry);
    d = _mm512_fmadd_ps(_mm512_fnmadd_ps(d, k->sy, v), k->ry, d);
    d = _mm512_fmadd_ps(_mm512_fnmadd_ps(d, k->sy, v), k->ry, d);
    return _mm512_add_epi32(_mm512_cvt_roundps_epi32(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), k->zy);
}

/* 4 x 16 int32 results -> 64 bytes in order, clamped to [qmin, qmax] (the packs saturate to 0..255 first) */
static inline void addf_store64(__m512i q0, __m512i q1, __m512i q2, __m512i q3, __m512i lo, __m512i hi, uint8_t *y)
{
    /* packs work per 128-bit lane: 4-byte units come out [0 4 8 12 | 1 5 9 13 | ...] */
    const __m512i w = _mm512_packus_epi16(_mm512_packs_epi32(q0, q1), _mm512_packs_epi32(q2, q3));
    const __m512i o = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), w);
    _mm512_storeu_si512(y, _mm512_min_epu8(_mm512_max_epu8(o, lo), hi));
}
#elif defined(__AVX2__) && defined(__FMA__)
/* the same on 8 lanes */
typedef struct {
    __m256i za, zb, zy;
    __m256 sa, sb, sy, ry, vlo, vhi;
} addf_k256;

static inline addf_k256 addf_exact256_init(const q8_addf_params *p)
{
    addf_k256 k;
    k.za = _mm256_set1_epi32(p->za), k.zb = _mm256_set1_epi32(p->zb), k.zy = _mm256_set1_epi32(p->zy);
    k.sa = _mm256_set1_ps(p->sa), k.sb = _mm256_set1_ps(p->sb), k.sy = _mm256_set1_ps(p->sy);
    k.ry = _mm256_set1_ps(1.0f / p->sy), k.vlo = _mm256_set1_ps(-1024.0f * p->sy);
    k.vhi = _mm256_set1_ps(1024.0f * p->sy);
    return k;
}

static inline __m256i addf_exact256(__m256i av, __m256i bv, const addf_k256 *k)
{
    const __m256 da = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(av, k->za)), k->sa);
    const __m256 db = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(bv, k->zb)), k->sb);
    const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(da, db), k->vlo), k->vhi);
    __m256 d = _mm256_mul_ps(v, k->ry);
    d = _mm256_fmadd_ps(_mm256_fnmadd_ps(d, k->sy, v), k->ry, d);
    d = _mm256_fmadd_ps(_mm256_fnmadd_ps(d, k->sy, v), k->ry, d);
    return _mm256_add_epi32(_mm256_cvtps_epi32(d), k->zy); /* round to nearest even (the default rounding mode) */
}
#endif

void q8_add_f32(size_t n, const uint8_t *a, const uint8_t *b, const q8_addf_params *p, uint8_t *y)
{
    size_t i = 0;
    const q8_addf_params lp = *p; /* y (bytes) may alias *p */
#if defined(Q8_ADDF_FAST)
    const addf_fast f = addf_fast_init(&lp);
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__)
    if (quotient_ok(lp.sy)) {
        const addf_k512 k = addf_exact512_init(&lp);
        const __m512i lo = _mm512_set1_epi8((char)lp.qmin), hi = _mm512_set1_epi8((char)lp.qmax);
#if defined(Q8_ADDF_FAST)
        if (f.ok) {
            const __m512 ca = _mm512_set1_ps(f.ca), cb = _mm512_set1_ps(f.cb), c0 = _mm512_set1_ps(f.c0);
            const __m512 h = _mm512_set1_ps(f.h), thr = _mm512_set1_ps(f.thr);
            for (; i + 64 <= n; i += 64) {
                __m512i q[4];
                for (int j = 0; j < 4; j++) {
                    const __m512i av = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(a + i + 16 * j)));
                    const __m512i bv = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b + i + 16 * j)));
                    const __m512 t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(av), ca,
                                                     _mm512_fmadd_ps(_mm512_cvtepi32_ps(bv), cb, c0));
                    /* frac(t + h) by vreduceps, rounding down */
                    const __mmask16 near = _mm512_cmp_ps_mask(
                        _mm512_reduce_ps(_mm512_add_ps(t, h), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), thr,
                        _CMP_LT_OQ);
                    q[j] = near ? addf_exact512(av, bv, &k)
                                : _mm512_cvt_roundps_epi32(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                }
                addf_store64(q[0], q[1], q[2], q[3], lo, hi, y + i);
            }
        }
#endif
        for (; i + 64 <= n; i += 64) {
            __m512i q[4];
            for (int j = 0; j < 4; j++)
                q[j] = addf_exact512(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(a + i + 16 * j))),
                                     _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b + i + 16 * j))), &k);
            addf_store64(q[0], q[1], q[2], q[3], lo, hi, y + i);
        }
    }
#elif defined(__AVX2__) && defined(__FMA__)
    if (quotient_ok(lp.sy)) {
        const addf_k256 k = addf_exact256_init(&lp);
        const __m256 ca = _mm256_set1_ps(f.ca), cb = _mm256_set1_ps(f.cb), c0 = _mm256_set1_ps(f.c0);
        const __m256 h = _mm256_set1_ps(f.h), thr = _mm256_set1_ps(f.thr);
        const __m256i lo = _mm256_set1_epi8((char)lp.qmin), hi = _mm256_set1_epi8((char)lp.qmax);
        for (; i + 32 <= n; i += 32) {
            __m256i q[4];
            for (int j = 0; j < 4; j++) {
                const __m256i av = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(a + i + 8 * j)));
                const __m256i bv = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(b + i + 8 * j)));
                int near = 1;
                if (f.ok) { /* as in the AVX-512 path; frac by floor and a subtraction */
                    const __m256 t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(av), ca,
                                                     _mm256_fmadd_ps(_mm256_cvtepi32_ps(bv), cb, c0));
                    const __m256 u = _mm256_add_ps(t, h);
                    near = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_sub_ps(u, _mm256_floor_ps(u)), thr, _CMP_LT_OQ));
                    q[j] = _mm256_cvtps_epi32(t);
                }
                if (near)
                    q[j] = addf_exact256(av, bv, &k);
            }
            /* packs work per 128-bit half: [0 1 4 5 | 2 3 6 7] in 8-byte units, then put in order */
            const __m256i w = _mm256_packus_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            const __m256i o = _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(y + i), _mm256_min_epu8(_mm256_max_epu8(o, lo), hi));
        }
    }
#elif defined(Q8_ADDF_FAST) && defined(__ARM_NEON)
    if (f.ok) { /* as on x86; lanes near a tie (a quad at a time) take addf1, which divides */
        const float32x4_t ca = vdupq_n_f32(f.ca), cb = vdupq_n_f32(f.cb), c0 = vdupq_n_f32(f.c0);
        const float32x4_t h = vdupq_n_f32(f.h), thr = vdupq_n_f32(f.thr);
        const uint8x16_t lo = vdupq_n_u8((uint8_t)lp.qmin), hi = vdupq_n_u8((uint8_t)lp.qmax);
        for (; i + 16 <= n; i += 16) {
            const uint8x16_t a8 = vld1q_u8(a + i), b8 = vld1q_u8(b + i);
            const uint16x8_t a16[2] = {vmovl_u8(vget_low_u8(a8)), vmovl_u8(vget_high_u8(a8))};
            const uint16x8_t b16[2] = {vmovl_u8(vget_low_u8(b8)), vmovl_u8(vget_high_u8(b8))};
            int32x4_t q[4];
            for (int k = 0; k < 4; k++) {
                const uint16x4_t ah = k & 1 ? vget_high_u16(a16[k >> 1]) : vget_low_u16(a16[k >> 1]);
                const uint16x4_t bh = k & 1 ? vget_high_u16(b16[k >> 1]) : vget_low_u16(b16[k >> 1]);
                const float32x4_t t = vfmaq_f32(vfmaq_f32(c0, vcvtq_f32_u32(vmovl_u16(bh)), cb),
                                                vcvtq_f32_u32(vmovl_u16(ah)), ca);
                const float32x4_t u = vaddq_f32(t, h);
                const uint32x4_t near = vcltq_f32(vsubq_f32(u, vrndmq_f32(u)), thr);
                const uint32x2_t nr = vorr_u32(vget_low_u32(near), vget_high_u32(near));
#if defined(__aarch64__)
                q[k] = vcvtnq_s32_f32(t); /* to nearest, ties to even */
#else
                q[k] = vcvtq_s32_f32(vrndnq_f32(t));
#endif
                if (vget_lane_u32(nr, 0) | vget_lane_u32(nr, 1)) {
                    int32_t e[4];
                    for (int l = 0; l < 4; l++)
                        e[l] = addf1(a[i + 4 * k + l], b[i + 4 * k + l], &lp);
                    q[k] = vld1q_s32(e); /* already clamped to [qmin, qmax] */
                }
            }
            const int16x8_t w0 = vcombine_s16(vqmovn_s32(q[0]), vqmovn_s32(q[1]));
            const int16x8_t w1 = vcombine_s16(vqmovn_s32(q[2]), vqmovn_s32(q[3]));
            const uint8x16_t o = vcombine_u8(vqmovun_s16(w0), vqmovun_s16(w1));
            vst1q_u8(y + i, vminq_u8(vmaxq_u8(o, lo), hi));
        }
    }
#endif
    for (; i < n; i++)
        y[i] = addf1(a[i], b[i], &lp);
}

void q8_add(size_t n, const uint8_t *a, const uint8_t *b, const q8_add_params *p, uint8_t *y)
{
    size_t i = 0;
#if defined(__AVX512BW__)
    /* the same integer steps on 16 lanes, 64 bytes a step (half the AVX2 path's instructions; vpmulld is
     * 2 uops at either width) */
    {
        const __m512i za = _mm512_set1_epi32(p->za), zb = _mm512_set1_epi32(p->zb), ma = _mm512_set1_epi32(p->ma);
        const __m512i mb = _mm512_set1_epi32(p->mb), zy = _mm512_set1_epi32(p->zy), one = _mm512_set1_epi32(1);
        const __m512i h1 = _mm512_set1_epi32(((int32_t)1 << (p->shift - 1)) - 1);
        const __m512i lo = _mm512_set1_epi8((char)p->qmin), hi = _mm512_set1_epi8((char)p->qmax);
        const __m128i cnt = _mm_cvtsi32_si128(p->shift);
        for (; i + 64 <= n; i += 64) {
            __m512i q[4];
            for (int k = 0; k < 4; k++) {
                const __m512i av = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(a + i + 16 * k)));
                const __m512i bv = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b + i + 16 * k)));
                const __m512i acc = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_sub_epi32(av, za), ma),
                                                     _mm512_mullo_epi32(_mm512_sub_epi32(bv, zb), mb));
                const __m512i odd = _mm512_and_si512(_mm512_sra_epi32(acc, cnt), one);
                q[k] = _mm512_add_epi32(_mm512_sra_epi32(_mm512_add_epi32(_mm512_add_epi32(acc, h1), odd), cnt), zy);
            }
            /* saturating packs keep out-of-range values out of range; per 128-bit lane, so dword 4L + t holds
             * bytes 16t + 4L.. : back in order, then the clamp */
            __m512i w = _mm512_packus_epi16(_mm512_packs_epi32(q[0], q[1]), _mm512_packs_epi32(q[2], q[3]));
            w = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), w);
            _mm512_storeu_si512(y + i, _mm512_min_epu8(_mm512_max_epu8(w, lo), hi));
        }
    }
#endif
#if defined(__AVX2__)
    /* the same integer steps 32 at a time (gcc's vectorisation of the loop below ran 3.4x slower) */
    const q8_add_avx2 k = q8_add_avx2_init(p); /* y (bytes) may alias *p: constants in registers first */
    for (; i + 32 <= n; i += 32) {
        const __m256i av = _mm256_loadu_si256((const __m256i *)(a + i)), bv = _mm256_loadu_si256((const __m256i *)(b + i));
        _mm256_storeu_si256((__m256i *)(y + i), q8_add32_avx2(av, bv, &k));
    }
#endif
    /* parameters in a local: y (bytes) may alias *p */
    const q8_add_params lp = *p;
    for (; i < n; i++)
        y[i] = q8_add1(a[i], b[i], &lp);
}

void q8_lut(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = lut[x[i]];
}

void q8_mul_outer(size_t outer, size_t inner, const uint8_t *a, const uint8_t *b, int32_t za, int32_t zb,
                  float scale, int32_t zy, int32_t qmin, int32_t qmax, uint8_t *y)
{
    /* float requantization like onnxruntime's QLinearMul; vectorises (no 64-bit products) */
    const float lo = (float)qmin, hi = (float)qmax;
    for (size_t o = 0; o < outer; o++) {
        const float s = (float)((int32_t)b[o] - zb) * scale;
        size_t i = 0;
#if defined(__AVX2__)
        /* the same float operations 8 at a time (vroundps to nearest = nearbyintf in the default mode) */
        const __m256 sv = _mm256_set1_ps(s), zyv = _mm256_set1_ps((float)zy), lov = _mm256_set1_ps(lo),
                     hiv = _mm256_set1_ps(hi);
        const __m256i zav = _mm256_set1_epi32(za);
        if (qmin == 0 && qmax == 255 && zy >= 0 && zy <= 255 && fabsf(s) <= 8.0e6f) {
            /* no clamp in float: |(a - za) * s| <= 255 * 8e6 < 2^31, so vcvtps2dq rounds it to nearest even
             * (= nearbyintf) without overflow; the int16 pack, the saturating + zy and the u8 pack then
             * clamp to [0, 255] exactly as the float clamp does (4 fewer operations per 8 lanes) */
            const __m256i zy16 = _mm256_set1_epi16((short)zy);
            for (; i + 32 <= inner; i += 32) {
                __m256i q[4];
                for (int k = 0; k < 4; k++) {
                    const __m128i a8 = _mm_loadl_epi64((const __m128i *)(a + o * inner + i + 8 * k));
                    const __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(a8), zav));
                    q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v, sv));
                }
                const __m256i w = _mm256_packus_epi16(_mm256_adds_epi16(_mm256_packs_epi32(q[0], q[1]), zy16),
                                                      _mm256_adds_epi16(_mm256_packs_epi32(q[2], q[3]), zy16));
                _mm256_storeu_si256((__m256i *)(y + o * inner + i),
                                    _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
            }
        }
        for (; i + 32 <= inner; i += 32) { /* 4 x 8 lanes, packed to bytes together */
            __m256i q[4];
            for (int k = 0; k < 4; k++) {
                const __m128i a8 = _mm_loadl_epi64((const __m128i *)(a + o * inner + i + 8 * k));
                __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(a8), zav));
                v = _mm256_add_ps(_mm256_round_ps(_mm256_mul_ps(v, sv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zyv);
                q[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lov), hiv));
            }
            const __m256i w = _mm256_packus_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            _mm256_storeu_si256((__m256i *)(y + o * inner + i),
                                _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        }
        for (; i + 8 <= inner; i += 8) {
            const __m128i a8 = _mm_loadl_epi64((const __m128i *)(a + o * inner + i));
            __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(a8), zav));
            v = _mm256_add_ps(_mm256_round_ps(_mm256_mul_ps(v, sv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zyv);
            const __m256i q = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lov), hiv));
            const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
            _mm_storel_epi64((__m128i *)(y + o * inner + i), _mm_packus_epi16(w, w));
        }
#endif
        for (; i < inner; i++) {
            float v = nearbyintf((float)((int32_t)a[o * inner + i] - za) * s) + (float)zy;
            v = v < lo ? lo : v > hi ? hi : v;
            y[o * inner + i] = (uint8_t)v;
        }
    }
}

void q8_mul_outer_fx(size_t outer, size_t inner, const uint8_t *a, const uint8_t *b, int32_t za, int32_t zb,
                     float scale, int32_t zy, const int16_t *fx, uint8_t *y)
{
    for (size_t o = 0; o < outer; o++) {
        const int32_t m = fx[2 * b[o]], k = fx[2 * b[o] + 1];
        const uint8_t *ao = a + o * inner;
        uint8_t *yo = y + o * inner;
        if (k < 0) {
            q8_mul_outer(1, inner, ao, b + o, za, zb, scale, zy, 0, 255, yo);
            continue;
        }
        size_t i = 0;
#if defined(__AVX512BW__)
        { /* the AVX2 steps below on 64 bytes */
            const __m512i zaw = _mm512_set1_epi16((short)za), mw = _mm512_set1_epi16((short)m),
                          zyw = _mm512_set1_epi16((short)zy), zw = _mm512_setzero_si512();
            const __m128i kw = _mm_cvtsi32_si128(k);
            for (; i + 64 <= inner; i += 64) {
                const __m512i x = _mm512_loadu_si512(ao + i);
                const __m512i lo = _mm512_sll_epi16(_mm512_sub_epi16(_mm512_unpacklo_epi8(x, zw), zaw), kw);
                const __m512i hi = _mm512_sll_epi16(_mm512_sub_epi16(_mm512_unpackhi_epi8(x, zw), zaw), kw);
                _mm512_storeu_si512(yo + i, _mm512_packus_epi16(_mm512_adds_epi16(_mm512_mulhrs_epi16(lo, mw), zyw),
                                                                _mm512_adds_epi16(_mm512_mulhrs_epi16(hi, mw), zyw)));
            }
        }
#endif
#if defined(__AVX2__)
        /* 32 bytes as two int16 halves (unpack and pack stay inside each 128-bit lane, so the order comes
         * back); |(a - za) << k| <= 32640, so vpmulhrsw cannot overflow and the saturating + zy only moves
         * values that the u8 pack clamps anyway: 9 operations per 32 bytes, the float path 27 */
        const __m256i zav = _mm256_set1_epi16((short)za), mv = _mm256_set1_epi16((short)m),
                      zyv = _mm256_set1_epi16((short)zy), zero = _mm256_setzero_si256();
        const __m128i kc = _mm_cvtsi32_si128(k);
        for (; i + 32 <= inner; i += 32) {
            const __m256i x = _mm256_loadu_si256((const __m256i *)(ao + i));
            const __m256i lo = _mm256_sll_epi16(_mm256_sub_epi16(_mm256_unpacklo_epi8(x, zero), zav), kc);
            const __m256i hi = _mm256_sll_epi16(_mm256_sub_epi16(_mm256_unpackhi_epi8(x, zero), zav), kc);
            _mm256_storeu_si256((__m256i *)(yo + i),
                                _mm256_packus_epi16(_mm256_adds_epi16(_mm256_mulhrs_epi16(lo, mv), zyv),
                                                    _mm256_adds_epi16(_mm256_mulhrs_epi16(hi, mv), zyv)));
        }
#elif defined(__ARM_NEON)
        /* vqrdmulh = (2 x * m + 2^15) >> 16, the same value as vpmulhrsw (no saturation: |x| <= 32640) */
        const int16x8_t zav = vdupq_n_s16((int16_t)za), mv = vdupq_n_s16((int16_t)m), zyv = vdupq_n_s16((int16_t)zy),
                        kv = vdupq_n_s16((int16_t)k);
        for (; i + 16 <= inner; i += 16) {
            const uint8x16_t x = vld1q_u8(ao + i);
            const int16x8_t lo = vshlq_s16(vsubq_s16(vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(x))), zav), kv);
            const int16x8_t hi = vshlq_s16(vsubq_s16(vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(x))), zav), kv);
            vst1q_u8(yo + i, vcombine_u8(vqmovun_s16(vqaddq_s16(vqrdmulhq_s16(lo, mv), zyv)),
                                         vqmovun_s16(vqaddq_s16(vqrdmulhq_s16(hi, mv), zyv))));
        }
#endif
        for (; i < inner; i++) /* vpmulhrsw: (x * m + 2^14) >> 15 on the 32-bit product */
            yo[i] = clamp_u8(((((int32_t)ao[i] - za) * (1 << k) * m + (1 << 14)) >> 15) + zy, 0, 255);
    }
}

void q8_gavgpool(size_t channels, size_t hw, const uint8_t *x, int32_t zx, int32_t mult, int32_t shift,
                 int32_t zy, uint8_t *y)
{
#if defined(__AVX2__)
    if (hw % 8 == 0 && hw < 32) {
        /* short planes (4x4, 2x4 maps): vpsadbw over the whole [C][hw] block, 32 bytes (whole 8-byte groups
         * of hw / 8 channels' planes) a step; one channel a step left those sums scalar (~1 us for 64 4x4 planes) */
        const size_t g = hw / 8, n = channels * g; /* 8-byte groups, g per channel */
        int32_t sum = 0;
        size_t k = 0, c = 0, left = g; /* groups left in channel c (a % g per group was a division each) */
        for (; k + 4 <= n; k += 4) {
            int64_t s4[4];
            _mm256_storeu_si256((__m256i *)s4, _mm256_sad_epu8(_mm256_loadu_si256((const __m256i *)(x + 8 * k)),
                                                               _mm256_setzero_si256()));
            for (int t = 0; t < 4; t++) {
                sum += (int32_t)s4[t];
                if (--left == 0) {
                    y[c] = q8_requant1(sum - (int32_t)hw * zx, mult, shift, zy, 0, 255);
                    c++, sum = 0, left = g;
                }
            }
        }
        for (; k < n; k++) {
            for (size_t i = 0; i < 8; i++)
                sum += x[8 * k + i];
            if (--left == 0) {
                y[c] = q8_requant1(sum - (int32_t)hw * zx, mult, shift, zy, 0, 255);
                c++, sum = 0, left = g;
            }
        }
        return;
    }
#endif
    for (size_t c = 0; c < channels; c++) {
        int32_t sum = 0;
        size_t i = 0;
#if defined(__AVX512BW__)
        /* 64 bytes -> 8 partial sums per step, then the AVX2 step for a last 32 */
        __m512i acc5 = _mm512_setzero_si512();
        for (; i + 64 <= hw; i += 64)
            acc5 = _mm512_add_epi64(acc5, _mm512_sad_epu8(_mm512_loadu_si512(x + c * hw + i), _mm512_setzero_si512()));
        sum = (int32_t)_mm512_reduce_add_epi64(acc5);
#endif
#if defined(__AVX2__)
        /* vpsadbw against zero: 32 bytes -> 4 partial sums per step */
        __m256i acc = _mm256_setzero_si256();
        for (; i + 32 <= hw; i += 32)
            acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_loadu_si256((const __m256i *)(x + c * hw + i)),
                                                        _mm256_setzero_si256()));
        __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
        sum += (int32_t)(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1));
#endif
        for (; i < hw; i++)
            sum += x[c * hw + i];
        y[c] = q8_requant1(sum - (int32_t)hw * zx, mult, shift, zy, 0, 255);
    }
}

/* every window inside the image (no padding reached): no bounds checks. Shape in locals: the byte
 * stores to y may alias *s, which would force a reload of every field in the inner loop. */
static void maxpool_inside(const q8_pool_shape *s, const uint8_t *x, uint8_t *y)
{
    const int planes = s->batch * s->C, H = s->H, W = s->W, kh = s->kh, kw = s->kw, sh = s->sh, sw = s->sw;
    const int dh = s->dh, dw = s->dw, Ho = s->Ho, Wo = s->Wo;
    for (int p = 0; p < planes; p++) {
        const uint8_t *xc = x + (size_t)p * H * W;
        uint8_t *yc = y + (size_t)p * Ho * Wo;
        for (int oh = 0; oh < Ho; oh++) {
            uint8_t *yr = yc + (size_t)oh * Wo;
            for (int ow = 0; ow < Wo; ow++)
                yr[ow] = 0;
            for (int i = 0; i < kh; i++) {
                const uint8_t *xr = xc + (size_t)(oh * sh + i * dh) * W;
                for (int j = 0; j < kw; j++) {
                    const uint8_t *xj = xr + j * dw;
                    for (int ow = 0; ow < Wo; ow++) /* runs along the output row */
                        yr[ow] = xj[ow * sw] > yr[ow] ? xj[ow * sw] : yr[ow];
                }
            }
        }
    }
}

void q8_maxpool(const q8_pool_shape *s, const uint8_t *x, uint8_t *y)
{
    if (s->pt == 0 && s->pl == 0 && (s->Ho - 1) * s->sh + (s->kh - 1) * s->dh < s->H &&
        (s->Wo - 1) * s->sw + (s->kw - 1) * s->dw < s->W) {
        maxpool_inside(s, x, y);
        return;
    }
    for (int p = 0; p < s->batch * s->C; p++) {
        const uint8_t *xc = x + (size_t)p * s->H * s->W;
        for (int oh = 0; oh < s->Ho; oh++)
            for (int ow = 0; ow < s->Wo; ow++)
                y[((size_t)p * s->Ho + oh) * s->Wo + ow] = q8_maxpool1(s, xc, oh, ow);
    }
}
