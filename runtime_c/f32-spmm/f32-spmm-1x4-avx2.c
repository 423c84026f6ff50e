/* Sparse x dense, BSR with 1x4 blocks (1 output x 4 input channels), AVX2+FMA, 8-lane vectors over pixels. */
#include "f32-spmm.h"
#include "../ec_simd_avx2.h"

#define SPMM_BR 1
#define SPMM_BC 4
#define SPMM_NAME f32_spmm_1x4__avx2
#include "f32-spmm-tmpl.h"
