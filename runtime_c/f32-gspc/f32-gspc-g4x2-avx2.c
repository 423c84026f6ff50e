/* Multi-group GSPC row kernel, four groups of 2 channels per ymm; vbroadcastf128; body in f32-gspc-mg-tmpl.h. */
#include <string.h>

#include "../ec_simd_avx2.h"
#include "f32-gspc-mg.h"

EC_INLINE ec_v mg_bcast(const float *p) { return _mm256_broadcast_ps((const __m128 *)(const void *)p); }

#define GB 4
#define MG_BCAST mg_bcast
#define BMAX 14
#define FN f32_gspc_mg_row_g4x2__avx2
#include "f32-gspc-mg-tmpl.h"
