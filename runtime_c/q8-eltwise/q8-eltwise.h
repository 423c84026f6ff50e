/* Int8 region edges and the cheap int8 ops, u8 domain (see q8-requant.h). Scalar C: these are
 * memory-bound passes the compiler auto-vectorises well at -O3. */
#ifndef Q8_ELTWISE_H
#define Q8_ELTWISE_H

#include "../q8-requant/q8-requant.h"

/* QuantizeLinear as onnxruntime computes it: clamp(nearbyint(x / scale) + zp), ties to even;
 * zp in the u8 domain. */
void q8_quantize(size_t n, const float *x, float scale, int32_t zp, uint8_t *y);
/* DequantizeLinear: (x - zp) * scale, exactly onnxruntime's float result. */
void q8_dequantize(size_t n, const uint8_t *x, float scale, int32_t zp, float *y);

/* QLinearAdd: y = zy + round(((a - za) * ma + (b - zb) * mb) / 2^shift), ties to even, clamped to
 * [qmin, qmax]; ma/mb < 2^22 so the int32 sum cannot overflow. Same-shape operands. */
typedef struct q8_add_params_s {
    int32_t za, zb, ma, mb, shift, zy, qmin, qmax;
} q8_add_params;
void q8_add(size_t n, const uint8_t *a, const uint8_t *b, const q8_add_params *p, uint8_t *y);

/* The same Add as the model's float arithmetic: DequantizeLinear -> Add -> QuantizeLinear in float32, i.e.
 * y = clamp(rne(((float)(a - za) * sa + (float)(b - zb) * sb) / sy) + zy, qmin, qmax), each operation rounded
 * as onnxruntime rounds it (no fused multiply-add); the int8 oracle's result bit for bit. Same-shape operands. */
typedef struct {
    int32_t za, zb, zy, qmin, qmax;
    float sa, sb, sy;
} q8_addf_params;
void q8_add_f32(size_t n, const uint8_t *a, const uint8_t *b, const q8_addf_params *p, uint8_t *y);
/* the same split over a pool's threads (q8-add-pool.c; pool may be NULL) */
struct ec_pool;
void q8_add_f32_pool(size_t n, const uint8_t *a, const uint8_t *b, const q8_addf_params *p, uint8_t *y,
                     struct ec_pool *pool);

/* one element of q8_add (ties to even; >> of a negative int is arithmetic in gcc/clang) */
static inline uint8_t q8_add1(int32_t a, int32_t b, const q8_add_params *p)
{
    const int32_t acc = (a - p->za) * p->ma + (b - p->zb) * p->mb, sh = p->shift;
    int32_t q = ((acc + ((int32_t)1 << (sh - 1)) - 1 + ((acc >> sh) & 1)) >> sh) + p->zy;
    q = q < p->qmin ? p->qmin : q;
    return (uint8_t)(q > p->qmax ? p->qmax : q);
}

#if defined(__AVX2__)
#include <immintrin.h>
/* q8_add's integer steps on 32 bytes held in registers (q8_add's loop and the GEMM kernels that
 * apply a residual Add while storing their output) */
typedef struct {
    __m256i za, zb, ma, mb, h1, one, zy, lo, hi;
    __m128i cnt;
} q8_add_avx2;

static inline q8_add_avx2 q8_add_avx2_init(const q8_add_params *p)
{
    q8_add_avx2 k;
    k.za = _mm256_set1_epi32(p->za), k.zb = _mm256_set1_epi32(p->zb);
    k.ma = _mm256_set1_epi32(p->ma), k.mb = _mm256_set1_epi32(p->mb);
    k.h1 = _mm256_set1_epi32(((int32_t)1 << (p->shift - 1)) - 1), k.one = _mm256_set1_epi32(1);
    k.zy = _mm256_set1_epi32(p->zy);
    k.lo = _mm256_set1_epi8((char)p->qmin), k.hi = _mm256_set1_epi8((char)p->qmax);
    k.cnt = _mm_cvtsi32_si128(p->shift);
    return k;
}

static inline __m256i q8_add8_avx2(__m128i a8, __m128i b8, const q8_add_avx2 *k)
{
    const __m256i av = _mm256_cvtepu8_epi32(a8), bv = _mm256_cvtepu8_epi32(b8);
    const __m256i acc = _mm256_add_epi32(_mm256_mullo_epi32(_mm256_sub_epi32(av, k->za), k->ma),
                                         _mm256_mullo_epi32(_mm256_sub_epi32(bv, k->zb), k->mb));
    const __m256i odd = _mm256_and_si256(_mm256_sra_epi32(acc, k->cnt), k->one);
    return _mm256_add_epi32(_mm256_sra_epi32(_mm256_add_epi32(_mm256_add_epi32(acc, k->h1), odd), k->cnt), k->zy);
}

/* a, b: 32 bytes each -> 32 result bytes in the same order */
static inline __m256i q8_add32_avx2(__m256i a, __m256i b, const q8_add_avx2 *k)
{
    const __m128i al = _mm256_castsi256_si128(a), ah = _mm256_extracti128_si256(a, 1);
    const __m128i bl = _mm256_castsi256_si128(b), bh = _mm256_extracti128_si256(b, 1);
    const __m256i q0 = q8_add8_avx2(al, bl, k), q1 = q8_add8_avx2(_mm_srli_si128(al, 8), _mm_srli_si128(bl, 8), k);
    const __m256i q2 = q8_add8_avx2(ah, bh, k), q3 = q8_add8_avx2(_mm_srli_si128(ah, 8), _mm_srli_si128(bh, 8), k);
    /* saturating packs keep out-of-range values out of range; then byte order and the clamp */
    __m256i w = _mm256_packus_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
    w = _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    return _mm256_min_epu8(_mm256_max_epu8(w, k->lo), k->hi);
}
#endif

/* Any elementwise function of one int8 tensor (HardSwish, Sigmoid, requantization...) as a
 * 256-entry table computed at compile time. */
void q8_lut(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y);
void q8_lut__avx512vbmi(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y);
void q8_lut__neon(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y);
void q8_lut__avx2(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y);
/* fn (one of the above) over a pool's threads in 4 KB blocks (q8-lut-pool.c): a table fused into a conv whose
 * driver applies none itself, run right after it */
struct ec_pool;
void q8_lut_pool(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y,
                 void (*fn)(size_t, const uint8_t *, const uint8_t *, uint8_t *), struct ec_pool *pool);

/* QLinearMul with b broadcast per outer index (SE blocks: [N,C,H,W] x [N,C,1,1]; inner = 1 for
 * same shape): y = clamp(nearbyint((a - za) * (b - zb) * scale) + zy), scale = a_s * b_s / y_s,
 * in float as onnxruntime does (ties to even). */
void q8_mul_outer(size_t outer, size_t inner, const uint8_t *a, const uint8_t *b, int32_t za, int32_t zb,
                  float scale, int32_t zy, int32_t qmin, int32_t qmax, uint8_t *y);

/* q8_mul_outer with outputs in [0, 255] and the gate's factor in fixed point where that is exact: for
 * gate byte g, fx[2g] = M and fx[2g + 1] = k give y = clamp(((((a - za) << k) * M + 2^14) >> 15) + zy, 0, 255)
 * (vpmulhrsw / vqrdmulh on int16), which the compiler checked equal to the float formula for every byte a
 * (codegen/ops/qops.py mul_fixed_point); k < 0: no such factor, that plane takes q8_mul_outer. */
void q8_mul_outer_fx(size_t outer, size_t inner, const uint8_t *a, const uint8_t *b, int32_t za, int32_t zb,
                     float scale, int32_t zy, const int16_t *fx, uint8_t *y);

/* GlobalAveragePool: y[c] = requant(sum(x[c]) - hw * zx) with scale x_s / (y_s * hw). */
void q8_gavgpool(size_t channels, size_t hw, const uint8_t *x, int32_t zx, int32_t mult, int32_t shift,
                 int32_t zy, uint8_t *y);

/* MaxPool on u8 with input and output sharing scale and zero point: exact. Padding never wins. */
typedef struct {
    int batch, C, H, W, kh, kw, sh, sw, dh, dw, pt, pl, Ho, Wo;
} q8_pool_shape;
void q8_maxpool(const q8_pool_shape *s, const uint8_t *x, uint8_t *y);
/* 2x2 windows, stride 2, no dilation, every window inside the image: the SIMD variants' case (they
 * call q8_maxpool for anything else) */
static inline int q8_maxpool_is_2x2s2(const q8_pool_shape *s)
{
    return s->kh == 2 && s->kw == 2 && s->sh == 2 && s->sw == 2 && s->dh == 1 && s->dw == 1 && s->pt == 0 &&
           s->pl == 0 && 2 * s->Ho <= s->H && 2 * s->Wo <= s->W;
}
/* one output of plane xc, the window clipped to the image (padding never wins a max of u8 values) */
static inline uint8_t q8_maxpool1(const q8_pool_shape *s, const uint8_t *xc, int oh, int ow)
{
    int m = 0;
    for (int i = 0; i < s->kh; i++) {
        const int ih = oh * s->sh + i * s->dh - s->pt;
        if (ih < 0 || ih >= s->H)
            continue;
        for (int j = 0; j < s->kw; j++) {
            const int iw = ow * s->sw + j * s->dw - s->pl;
            if (iw >= 0 && iw < s->W && xc[(size_t)ih * s->W + iw] > m)
                m = xc[(size_t)ih * s->W + iw];
        }
    }
    return (uint8_t)m;
}
/* the output columns [*lo, *hi) whose windows lie inside the image's columns */
static inline void q8_maxpool_cols(const q8_pool_shape *s, int *lo, int *hi)
{
    const int span = (s->kw - 1) * s->dw;
    int l = (s->pl + s->sw - 1) / s->sw, h = s->W - span + s->pl > 0 ? (s->W - span + s->pl - 1) / s->sw + 1 : 0;
    h = h < s->Wo ? h : s->Wo;
    *lo = l < h ? l : h;
    *hi = h;
}
void q8_maxpool__avx512(const q8_pool_shape *s, const uint8_t *x, uint8_t *y); /* AVX-512BW */
/* the same in the blocked layout (q8-gemm.h), C counting 4-channel planes (q8-maxpool-c4.c); the AVX-512BW form
 * runs the portable one for shapes it does not take */
void q8_maxpool_c4(const q8_pool_shape *s, const uint8_t *x, uint8_t *y);
void q8_maxpool_c4__avx512(const q8_pool_shape *s, const uint8_t *x, uint8_t *y);
void q8_maxpool__avx2(const q8_pool_shape *s, const uint8_t *x, uint8_t *y);

#endif
