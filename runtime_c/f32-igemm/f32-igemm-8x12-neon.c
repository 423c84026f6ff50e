/* 8x12 fp32 indirect-GEMM microkernel for neon: B rows read in place (stride-1 convolution over
 * a padded input); body in f32-gemm/f32-gemm-tmpl.h. */
#include "../ec_simd_neon.h"
#include "../f32-gemm/f32-gemm.h"

#define INDIRECT 1
#define MR 8
#define NV 3
#define FN f32_igemm_ukernel_8x12__neon
#include "../f32-gemm/f32-gemm-tmpl.h"
