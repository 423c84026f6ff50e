/* 8x12 fp32 GEMM microkernel for neon (body in f32-gemm-tmpl.h). */
#include "../ec_simd_neon.h"
#include "f32-gemm.h"

#define MR 8
#define NV 3
#define FN f32_gemm_ukernel_8x12__neon
#include "f32-gemm-tmpl.h"

/* the same tile reading B in place and packing it as it goes (PACKB) */
#undef FN
#define PACKB 1
#define FN f32_gemm_packb_ukernel_8x12__neon
#include "f32-gemm-tmpl.h"
