/* Sparse x dense, BSR with 4x4 blocks (4 output x 4 input channels), AVX-512F, 16-lane vectors over pixels. */
#include "f32-spmm.h"
#include "../ec_simd_avx512.h"

#define SPMM_BR 4
#define SPMM_BC 4
#define SPMM_NAME f32_spmm_4x4__avx512
#include "f32-spmm-tmpl.h"
