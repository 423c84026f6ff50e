/* Elementwise fp32 activations, neon (body in f32-vact-tmpl.h). */
#include "../ec_simd_neon.h"
#include "f32-vact.h"

#define FN f32_vact__neon
#include "f32-vact-tmpl.h"
