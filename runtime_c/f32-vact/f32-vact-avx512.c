/* Elementwise fp32 activations, avx512 (body in f32-vact-tmpl.h). */
#include "../ec_simd_avx512.h"
#include "f32-vact.h"

#define FN f32_vact__avx512
#include "f32-vact-tmpl.h"
