/* 8x12 fp32 GEMM microkernel for neon (body in f32-gemm-tmpl.h). */
#include "../ec_simd_neon.h"
#include "f32-gemm.h"

#define MR 8
#define NV 3
#define FN f32_gemm_ukernel_8x12__neon
#include "f32-gemm-tmpl.h"
