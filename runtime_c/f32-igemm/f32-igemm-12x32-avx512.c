/* 12x32 fp32 indirect-GEMM microkernel for avx512: B rows read in place (stride-1 convolution over
 * a padded input); body in f32-gemm/f32-gemm-tmpl.h. */
#include "../ec_simd_avx512.h"
#include "../f32-gemm/f32-gemm.h"

#define INDIRECT 1
#define MR 12
#define NV 2
#define FN f32_igemm_ukernel_12x32__avx512
#include "../f32-gemm/f32-gemm-tmpl.h"
