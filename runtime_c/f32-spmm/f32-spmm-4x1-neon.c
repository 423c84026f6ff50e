/* Sparse x dense, BSR with 4x1 blocks (4 output x 1 input channels), NEON (ARMv8.0 and armv7 neon-fp-armv8), 4-lane vectors over pixels. */
#include "f32-spmm.h"
#include "../ec_simd_neon.h"

#define SPMM_BR 4
#define SPMM_BC 1
#define SPMM_NAME f32_spmm_4x1__neon
#include "f32-spmm-tmpl.h"
