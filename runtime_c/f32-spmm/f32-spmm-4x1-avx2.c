/* Sparse x dense, BSR with 4x1 blocks (4 output x 1 input channels), AVX2+FMA, 8-lane vectors over pixels. */
#include "f32-spmm.h"
#include "../ec_simd_avx2.h"

#define SPMM_BR 4
#define SPMM_BC 1
#define SPMM_NAME f32_spmm_4x1__avx2
#include "f32-spmm-tmpl.h"
