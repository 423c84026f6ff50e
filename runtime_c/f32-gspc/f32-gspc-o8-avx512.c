/* GSPC row kernel, T_O = 8, avx512 (ymm registers; AVX-512VL gives 32 of them); body in f32-gspc-tmpl.h. */
#include "../ec_simd_avx2.h"
#include "f32-gspc.h"

#define BMAX 28
#define FN f32_gspc_row_o8__avx512
#include "f32-gspc-tmpl.h"
