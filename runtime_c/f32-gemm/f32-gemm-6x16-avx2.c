/* 6x16 fp32 GEMM microkernel for avx2 (body in f32-gemm-tmpl.h). */
#include "../ec_simd_avx2.h"
#include "f32-gemm.h"

#define MR 6
#define NV 2
#define FN f32_gemm_ukernel_6x16__avx2
#include "f32-gemm-tmpl.h"

/* the same tile reading B in place and packing it as it goes (PACKB) */
#undef FN
#define PACKB 1
#define FN f32_gemm_packb_ukernel_6x16__avx2
#include "f32-gemm-tmpl.h"
