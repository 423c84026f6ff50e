/* 6x16 fp32 indirect-GEMM microkernel for avx2: B rows read in place (stride-1 convolution over
 * a padded input); body in f32-gemm/f32-gemm-tmpl.h. */
#include "../ec_simd_avx2.h"
#include "../f32-gemm/f32-gemm.h"

#define INDIRECT 1
#define MR 6
#define NV 2
#define FN f32_igemm_ukernel_6x16__avx2
#include "../f32-gemm/f32-gemm-tmpl.h"
