/* GSPC row kernel, T_O = 16 (2 ymm), avx2 (16 registers: 12 accumulators, 2 weights, the broadcast); body in
 * f32-gspc-tmpl.h. */
#include "../ec_simd_avx2.h"
#include "f32-gspc.h"

#define GV 2
#define BMAX 6
#define FN f32_gspc_row_o16__avx2
#include "f32-gspc-tmpl.h"
