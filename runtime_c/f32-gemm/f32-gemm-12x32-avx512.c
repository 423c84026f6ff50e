/* 12x32 fp32 GEMM microkernel for avx512 (body in f32-gemm-tmpl.h). */
#include "../ec_simd_avx512.h"
#include "f32-gemm.h"

#define MR 12
#define NV 2
#define FN f32_gemm_ukernel_12x32__avx512
#include "f32-gemm-tmpl.h"

/* the same tile reading B in place and packing it as it goes (PACKB) */
#undef FN
#define PACKB 1
#define FN f32_gemm_packb_ukernel_12x32__avx512
#include "f32-gemm-tmpl.h"
