/* GSPC row kernel, T_O = 16, avx512; body in f32-gspc-tmpl.h. */
#include "../ec_simd_avx512.h"
#include "f32-gspc.h"

#define BMAX 28
#define FN f32_gspc_row_o16__avx512
#include "f32-gspc-tmpl.h"
