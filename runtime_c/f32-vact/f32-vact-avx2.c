/* Elementwise fp32 activations, avx2 (body in f32-vact-tmpl.h). */
#include "../ec_simd_avx2.h"
#include "f32-vact.h"

#define FN f32_vact__avx2
#include "f32-vact-tmpl.h"
