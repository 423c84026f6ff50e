/* Sparse x dense, CSR (1x1 blocks), AVX2+FMA, 8-lane vectors over pixels. */
#include "f32-spmm.h"
#include "../ec_simd_avx2.h"

#define SPMM_BR 1
#define SPMM_BC 1
#define SPMM_NAME f32_spmm_1x1__avx2
#include "f32-spmm-tmpl.h"
