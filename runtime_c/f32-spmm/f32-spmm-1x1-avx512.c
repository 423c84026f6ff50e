/* Sparse x dense, CSR (1x1 blocks), AVX-512F, 16-lane vectors over pixels. */
#include "f32-spmm.h"
#include "../ec_simd_avx512.h"

#define SPMM_BR 1
#define SPMM_BC 1
#define SPMM_NAME f32_spmm_1x1__avx512
#include "f32-spmm-tmpl.h"
