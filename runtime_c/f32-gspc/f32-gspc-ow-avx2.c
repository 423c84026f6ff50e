/* GSPC row kernel vectorised along ow (groups of <= 8 output channels, stride 1), avx2;
 * body in f32-gspc-ow-tmpl.h. */
#include "../ec_simd_avx2.h"
#include "f32-gspc.h"

#define FN f32_gspc_row_ow__avx2
#include "f32-gspc-ow-tmpl.h"
