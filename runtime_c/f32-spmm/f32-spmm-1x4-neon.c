/* Sparse x dense, BSR with 1x4 blocks (1 output x 4 input channels), NEON (ARMv8.0 and armv7 neon-fp-armv8), 4-lane vectors over pixels. */
#include "f32-spmm.h"
#include "../ec_simd_neon.h"

#define SPMM_BR 1
#define SPMM_BC 4
#define SPMM_NAME f32_spmm_1x4__neon
#include "f32-spmm-tmpl.h"
