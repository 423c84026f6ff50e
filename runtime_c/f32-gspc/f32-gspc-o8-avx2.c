/* GSPC row kernel, T_O = 8, avx2; body in f32-gspc-tmpl.h. */
#include "../ec_simd_avx2.h"
#include "f32-gspc.h"

#define BMAX 14
#define FN f32_gspc_row_o8__avx2
#include "f32-gspc-tmpl.h"
