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
#define EC_ALIGNED(n) __attribute__((aligned(n)))
#define EC_LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define EC_RESTRICT restrict
#define EC_INLINE static inline
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

/* Activations the SIMD helpers do in registers; the others go through ec_act_apply. */
static inline int ec_act_is_piecewise_linear(ec_act act) {
  return act.kind == EC_ACT_NONE || act.kind == EC_ACT_RELU || act.kind == EC_ACT_CLIP ||
         act.kind == EC_ACT_LEAKY_RELU || act.kind == EC_ACT_HARD_SIGMOID ||
         act.kind == EC_ACT_HARD_SWISH;
}

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
    default:
      for (size_t i = 0; i < n; i++) dst[i] = ec_act_apply(act, src[i] + bias);
      return;
    }
  }
  for (size_t i = 0; i < n; i++) dst[i] = ec_epi_value(src[i] + bias, res + i, before, act);
}

#endif
