/* Sparse x dense, CSR (1x1 blocks), NEON (ARMv8.0 and armv7 neon-fp-armv8), 4-lane vectors over pixels. */
#include "f32-spmm.h"
#include "../ec_simd_neon.h"

#define SPMM_BR 1
#define SPMM_BC 1
#define SPMM_NAME f32_spmm_1x1__neon
#include "f32-spmm-tmpl.h"
