/* GSPC row kernel vectorised along ow (groups of <= 8 output channels, stride 1), avx512;
 * body in f32-gspc-ow-tmpl.h. */
#include "../ec_simd_avx512.h"
#include "f32-gspc.h"

#define FN f32_gspc_row_ow__avx512
#include "f32-gspc-ow-tmpl.h"
