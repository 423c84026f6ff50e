/* GSPC row kernel vectorised along ow (groups of <= 8 output channels, stride 1), neon;
 * body in f32-gspc-ow-tmpl.h. */
#include "../ec_simd_neon.h"
#include "f32-gspc.h"

#define FN f32_gspc_row_ow__neon
#include "f32-gspc-ow-tmpl.h"
