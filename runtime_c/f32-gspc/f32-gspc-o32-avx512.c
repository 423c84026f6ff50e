/* GSPC row kernel, T_O = 32 (2 zmm), avx512; body in f32-gspc-tmpl.h. */
#include "../ec_simd_avx512.h"
#include "f32-gspc.h"

#define GV 2
#define BMAX 14
#define FN f32_gspc_row_o32__avx512
#include "f32-gspc-tmpl.h"
