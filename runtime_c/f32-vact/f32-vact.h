/* Elementwise fp32 activations and transcendental functions over a contiguous array, one kernel per
 * ISA (body in f32-vact-tmpl.h over that ISA's ec_v vocabulary). y may equal x. */
#ifndef F32_VACT_H
#define F32_VACT_H
#include <stddef.h>
#include "../ec_common.h"

typedef enum {
  F32_VACT_ACT,       /* the ec_act activation (sigmoid, silu, tanh, gelu, clip, ...) */
  F32_VACT_EXP,
  F32_VACT_ERF,
  F32_VACT_GELU_TANH  /* Gelu approximate="tanh" */
} f32_vact_op;

#define F32_VACT_DECL(fn) void fn(f32_vact_op op, ec_act act, size_t n, const float *x, float *y)
F32_VACT_DECL(f32_vact__avx2);
F32_VACT_DECL(f32_vact__avx512);
F32_VACT_DECL(f32_vact__neon);
#endif
