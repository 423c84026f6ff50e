/* Common definitions for edgec runtime kernels.
 * Tensors are NCHW float32 unless a kernel says otherwise. The epilogue describes what a
 * producing kernel applies in its output loop: y = act(acc + bias [+ res]) [+ res]. */
#ifndef EC_COMMON_H
#define EC_COMMON_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define EC_RESTRICT __restrict__
#define EC_INLINE static inline __attribute__((always_inline))
#define EC_NOINLINE static __attribute__((noinline))
#define EC_ALIGNED(n) __attribute__((aligned(n)))
#define EC_LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define EC_RESTRICT restrict
#define EC_INLINE static inline
#define EC_NOINLINE static
#define EC_ALIGNED(n)
#define EC_LIKELY(x) (x)
#endif

#define EC_ALIGN 64
#define EC_ROUND_UP(x, m) ((((x) + (m) - 1) / (m)) * (m))
#define EC_DIV_UP(x, m) (((x) + (m) - 1) / (m))
#define EC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define EC_MAX(a, b) ((a) > (b) ? (a) : (b))

typedef enum {
  EC_ACT_NONE,
  EC_ACT_RELU,
  EC_ACT_CLIP,
  EC_ACT_LEAKY_RELU,
  EC_ACT_SIGMOID,
  EC_ACT_HARD_SIGMOID,
  EC_ACT_HARD_SWISH,
  EC_ACT_SILU,
  EC_ACT_TANH,
  EC_ACT_GELU
} ec_act_kind;

/* clip: a=min b=max; leaky_relu: a=alpha; hard_sigmoid: a=alpha b=beta. */
typedef struct {
  ec_act_kind kind;
  float a, b;
} ec_act;

typedef struct {
  const float *bias;     /* per output channel (row), or NULL */
  const float *residual; /* same layout as the output, or NULL */
  int residual_before_act;
  ec_act act;
} ec_epilogue;

/* Epilogue of one output tile, pointers already offset to the tile:
 * bias_r[i] per row, bias_c[j] per column, res[i*ldc + j] like the output. */
typedef struct {
  const float *bias_r;
  const float *bias_c;
  const float *res;
  int res_before_act;
  ec_act act;
} ec_tile_epi;

static inline float ec_act_apply(ec_act act, float x) {
  switch (act.kind) {
  case EC_ACT_NONE: return x;
  case EC_ACT_RELU: return x > 0.0f ? x : 0.0f;
  case EC_ACT_CLIP: return x < act.a ? act.a : (x > act.b ? act.b : x);
  case EC_ACT_LEAKY_RELU: return x >= 0.0f ? x : act.a * x;
  case EC_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
  case EC_ACT_HARD_SIGMOID: {
    float y = act.a * x + act.b;
    return y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
  }
  case EC_ACT_HARD_SWISH: {
    float y = x * (1.0f / 6.0f) + 0.5f;
    return x * (y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y));
  }
  case EC_ACT_SILU: return x / (1.0f + expf(-x));
  case EC_ACT_TANH: return tanhf(x);
  case EC_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  }
  return x;
}

/* Piecewise-linear activations (no transcendental function). */
static inline int ec_act_is_piecewise_linear(ec_act act) {
  return act.kind == EC_ACT_NONE || act.kind == EC_ACT_RELU || act.kind == EC_ACT_CLIP ||
         act.kind == EC_ACT_LEAKY_RELU || act.kind == EC_ACT_HARD_SIGMOID ||
         act.kind == EC_ACT_HARD_SWISH;
}

/* Polynomial approximations of the vector activations (ec_simd_act.h) and of their scalar twins
 * below; coefficients are minimax fits of the relative error (docs/kernels.md has the measured
 * accuracy). exp: n = round(x log2e), r = x - n ln2 (two-part ln2), e^r = 1 + r + r^2 Q(r) on
 * |r| <= ln2/2, then scaled by 2^n in two factors so subnormal results stay exact. */
#define EC_EXP_LO -104.0f          /* e^x < 2^-150: rounds to 0 */
#define EC_EXP_HI 88.8f            /* above ln(FLT_MAX) and n = 128: overflows to inf */
#define EC_EXP_MAGIC 12582912.0f   /* 1.5 * 2^23: adding it rounds to an integer */
#define EC_LOG2E 1.44269502f
#define EC_LN2_HI 0.693359375f     /* 9 bits: n * EC_LN2_HI is exact */
#define EC_LN2_LO -2.12194440e-4f
#define EC_EXP_Q0 0.49999994f
#define EC_EXP_Q1 0.166665211f
#define EC_EXP_Q2 0.041668389f
#define EC_EXP_Q3 0.00836871099f
#define EC_EXP_Q4 0.00138146046f
/* tanh(x) = x + x^3 T(x^2) for |x| < EC_TANH_SMALL, else sign(x) (1 - e) / (1 + e), e = e^(-2|x|) */
#define EC_TANH_SMALL 0.625f
#define EC_TANH_T0 -0.333332807f
#define EC_TANH_T1 0.133314416f
#define EC_TANH_T2 -0.0537397042f
#define EC_TANH_T3 0.0206390545f
#define EC_TANH_T4 -0.00570495287f
/* erf(x) = x P(x^2) for |x| < EC_ERF_SMALL; else erfc(|x|) = e^(-x^2) t R(t), t = 2 / (2 + |x|),
 * fitted on [EC_ERF_SMALL, EC_ERFC_MAX] (beyond it erfc underflows) */
#define EC_ERF_SMALL 0.9f
#define EC_ERFC_MAX 10.1f
#define EC_ERF_P0 1.12837911f
#define EC_ERF_P1 -0.376125246f
#define EC_ERF_P2 0.112821408f
#define EC_ERF_P3 -0.0267789084f
#define EC_ERF_P4 0.00501196086f
#define EC_ERF_P5 -0.000609035138f
#define EC_ERFC_R0 0.282102376f
#define EC_ERFC_R1 0.281953722f
#define EC_ERFC_R2 0.247727916f
#define EC_ERFC_R3 0.175148726f
#define EC_ERFC_R4 0.0709746927f
#define EC_ERFC_R5 0.0666122362f
#define EC_ERFC_R6 -0.212729648f
#define EC_ERFC_R7 0.0886895433f
#define EC_SQRT1_2 0.707106781f

/* Scalar twins of the vector activations for rows in code without a vector vocabulary
 * (ec_epi_row): branchless, so the compiler vectorises the loops. Only where FMA is an
 * instruction; elsewhere (the generic target) rows go through ec_act_apply and libm. */
#if !defined(EC_ACT_LIBM) && (defined(__FMA__) || defined(__ARM_FEATURE_FMA))
#define EC_ACT_FAST_ROW 1
#include <string.h>
EC_INLINE uint32_t ec_f2u_(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
EC_INLINE float ec_u2f_(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
/* c ? a : b without a branch: a ternary whose arms compute would be sunk into them, and with
 * trapping math the compiler then keeps the branch and does not vectorise the loop */
EC_INLINE float ec_sel_lane(int c, float a, float b) {
  const uint32_t m = 0u - (uint32_t)c;
  return ec_u2f_((ec_f2u_(a) & m) | (ec_f2u_(b) & ~m));
}
EC_INLINE float ec_exp_lane(float x) {
  x = x < EC_EXP_LO ? EC_EXP_LO : x; /* comparisons false on NaN: NaN goes through */
  x = x > EC_EXP_HI ? EC_EXP_HI : x;
  const float t = fmaf(x, EC_LOG2E, EC_EXP_MAGIC), n = t - EC_EXP_MAGIC;
  float r = fmaf(-n, EC_LN2_HI, x);
  r = fmaf(-n, EC_LN2_LO, r);
  float q = fmaf(EC_EXP_Q4, r, EC_EXP_Q3);
  q = fmaf(q, r, EC_EXP_Q2);
  q = fmaf(q, r, EC_EXP_Q1);
  q = fmaf(q, r, EC_EXP_Q0);
  const float p = fmaf(r * r, q, r) + 1.0f;
  /* n sits in the low bits of t; two's complement wrap of the uint32 difference */
  const int32_t k = (int32_t)(ec_f2u_(t) - ec_f2u_(EC_EXP_MAGIC)), h = k / 2;
  return p * ec_u2f_((uint32_t)(h + 127) << 23) * ec_u2f_((uint32_t)(k - h + 127) << 23);
}
EC_INLINE float ec_sigmoid_lane(float x) {
  const float e = ec_exp_lane(-fabsf(x));
  return ec_sel_lane(x < 0.0f, e, 1.0f) / (1.0f + e);
}
EC_INLINE float ec_silu_lane(float x) {
  const float e = ec_exp_lane(-fabsf(x));
  return x * ec_sel_lane(x < 0.0f, e, 1.0f) / (1.0f + e);
}
EC_INLINE float ec_tanh_lane(float x) {
  const float e = ec_exp_lane(-2.0f * fabsf(x)), x2 = x * x;
  float t = fmaf(EC_TANH_T4, x2, EC_TANH_T3);
  t = fmaf(t, x2, EC_TANH_T2);
  t = fmaf(t, x2, EC_TANH_T1);
  t = fmaf(t, x2, EC_TANH_T0);
  const float small = fmaf(x * x2, t, x), big = (1.0f - e) / (1.0f + e);
  return copysignf(ec_sel_lane(fabsf(x) < EC_TANH_SMALL, small, big), x);
}
/* 1 + erf(z), z2 = hi + lo = z^2 exactly: erfc(-z) without cancellation for z < 0. */
EC_INLINE float ec_erf1p_lane(float z, float hi, float lo) {
  const float az = fabsf(z), ac = ec_sel_lane(az > EC_ERFC_MAX, EC_ERFC_MAX, az);
  float p = fmaf(EC_ERF_P5, hi, EC_ERF_P4);
  p = fmaf(p, hi, EC_ERF_P3);
  p = fmaf(p, hi, EC_ERF_P2);
  p = fmaf(p, hi, EC_ERF_P1);
  p = fmaf(p, hi, EC_ERF_P0);
  const float t = 2.0f / (2.0f + ac);
  float r = fmaf(EC_ERFC_R7, t, EC_ERFC_R6);
  r = fmaf(r, t, EC_ERFC_R5);
  r = fmaf(r, t, EC_ERFC_R4);
  r = fmaf(r, t, EC_ERFC_R3);
  r = fmaf(r, t, EC_ERFC_R2);
  r = fmaf(r, t, EC_ERFC_R1);
  r = fmaf(r, t, EC_ERFC_R0);
  const float lc = ec_sel_lane(az > EC_ERFC_MAX, 0.0f, lo); /* inf - inf in lo past the fitted range */
  const float w = ec_exp_lane(-hi) * (1.0f - lc) * (t * r); /* e^-(hi+lo) = e^-hi (1 - lo) */
  return ec_sel_lane(az < EC_ERF_SMALL, fmaf(z, p, 1.0f), ec_sel_lane(z < 0.0f, w, 2.0f - w));
}
EC_INLINE float ec_gelu_lane(float x) {
  const float x2 = x * x, lo = fmaf(x, x, -x2);
  return 0.5f * x * ec_erf1p_lane(x * EC_SQRT1_2, 0.5f * x2, 0.5f * lo);
}
#endif

/* Full scalar epilogue for one value: acc already includes bias. */
static inline float ec_epi_value(float acc, const float *res, int before, ec_act act) {
  if (res && before) acc += *res;
  acc = ec_act_apply(act, acc);
  if (res && !before) acc += *res;
  return acc;
}

/* Scalar epilogue of an m x n tile stored at c (row stride ldc); reference and tail path. */
static inline void ec_tile_epi_scalar(const ec_tile_epi *ep, float *c, size_t ldc, size_t m,
                                      size_t n) {
  for (size_t i = 0; i < m; i++) {
    for (size_t j = 0; j < n; j++) {
      float v = c[i * ldc + j];
      if (ep->bias_r) v += ep->bias_r[i];
      if (ep->bias_c) v += ep->bias_c[j];
      c[i * ldc + j] = ec_epi_value(v, ep->res ? &ep->res[i * ldc + j] : NULL,
                                    ep->res_before_act, ep->act);
    }
  }
}

/* dst[i] = epilogue(src[i] + bias) for one contiguous row; the activation switch sits outside
 * the loops, and the common cases are one pass (re-reading dst right after storing it stalls). */
static inline void ec_epi_row(const float *EC_RESTRICT src, float *EC_RESTRICT dst, size_t n,
                              float bias, const float *EC_RESTRICT res, int before, ec_act act) {
  if (!res) {
    switch (act.kind) {
    case EC_ACT_NONE:
      for (size_t i = 0; i < n; i++) dst[i] = src[i] + bias;
      return;
    case EC_ACT_RELU:
      for (size_t i = 0; i < n; i++) {
        const float v = src[i] + bias;
        dst[i] = v > 0.0f ? v : 0.0f;
      }
      return;
    case EC_ACT_CLIP:
      for (size_t i = 0; i < n; i++) {
        const float v = src[i] + bias < act.a ? act.a : src[i] + bias;
        dst[i] = v > act.b ? act.b : v;
      }
      return;
#ifdef EC_ACT_FAST_ROW
    case EC_ACT_SIGMOID:
      for (size_t i = 0; i < n; i++) dst[i] = ec_sigmoid_lane(src[i] + bias);
      return;
    case EC_ACT_SILU:
      for (size_t i = 0; i < n; i++) dst[i] = ec_silu_lane(src[i] + bias);
      return;
    case EC_ACT_TANH:
      for (size_t i = 0; i < n; i++) dst[i] = ec_tanh_lane(src[i] + bias);
      return;
    case EC_ACT_GELU:
      for (size_t i = 0; i < n; i++) dst[i] = ec_gelu_lane(src[i] + bias);
      return;
#endif
    default:
      for (size_t i = 0; i < n; i++) dst[i] = ec_act_apply(act, src[i] + bias);
      return;
    }
  }
#ifdef EC_ACT_FAST_ROW
  if (act.kind == EC_ACT_SIGMOID || act.kind == EC_ACT_SILU || act.kind == EC_ACT_TANH || act.kind == EC_ACT_GELU) {
    /* with a residual (YOLO's shortcut after a SiLU conv): three passes, each a vector loop */
    if (before)
      for (size_t i = 0; i < n; i++) dst[i] = src[i] + bias + res[i];
    else
      for (size_t i = 0; i < n; i++) dst[i] = src[i] + bias;
    switch (act.kind) {
    case EC_ACT_SIGMOID:
      for (size_t i = 0; i < n; i++) dst[i] = ec_sigmoid_lane(dst[i]);
      break;
    case EC_ACT_SILU:
      for (size_t i = 0; i < n; i++) dst[i] = ec_silu_lane(dst[i]);
      break;
    case EC_ACT_TANH:
      for (size_t i = 0; i < n; i++) dst[i] = ec_tanh_lane(dst[i]);
      break;
    default:
      for (size_t i = 0; i < n; i++) dst[i] = ec_gelu_lane(dst[i]);
    }
    if (!before)
      for (size_t i = 0; i < n; i++) dst[i] += res[i];
    return;
  }
#endif
  for (size_t i = 0; i < n; i++) dst[i] = ec_epi_value(src[i] + bias, res + i, before, act);
}

#endif
