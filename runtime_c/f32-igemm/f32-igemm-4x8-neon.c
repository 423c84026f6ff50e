/* 4x8 fp32 indirect-GEMM microkernel for neon: B rows read in place (stride-1 convolution over
 * a padded input); body in f32-gemm/f32-gemm-tmpl.h. */
#include "../ec_simd_neon.h"
#include "../f32-gemm/f32-gemm.h"

#define INDIRECT 1
#define MR 4
#define NV 2
#define FN f32_igemm_ukernel_4x8__neon
#include "../f32-gemm/f32-gemm-tmpl.h"
