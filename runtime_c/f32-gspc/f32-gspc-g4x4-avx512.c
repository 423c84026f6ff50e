/* Multi-group GSPC row kernel, four groups of 4 channels per zmm; vbroadcastf32x4; body in f32-gspc-mg-tmpl.h. */
#include <string.h>

#include "../ec_simd_avx512.h"
#include "f32-gspc-mg.h"

EC_INLINE ec_v mg_bcast(const float *p) { return _mm512_broadcast_f32x4(_mm_loadu_ps(p)); }

#define GB 4
#define MG_BCAST mg_bcast
#define BMAX 28
#define FN f32_gspc_mg_row_g4x4__avx512
#include "f32-gspc-mg-tmpl.h"
