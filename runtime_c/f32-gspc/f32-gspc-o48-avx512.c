/* GSPC row kernel, T_O = 48 (3 zmm), avx512; body in f32-gspc-tmpl.h. */
#include "../ec_simd_avx512.h"
#include "f32-gspc.h"

#define GV 3
#define BMAX 9
#define FN f32_gspc_row_o48__avx512
#include "f32-gspc-tmpl.h"
