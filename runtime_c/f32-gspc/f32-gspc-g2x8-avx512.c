/* Multi-group GSPC row kernel, two groups of 8 channels per zmm; vbroadcastsd; body in f32-gspc-mg-tmpl.h. */
#include <string.h>

#include "../ec_simd_avx512.h"
#include "f32-gspc-mg.h"

EC_INLINE ec_v mg_bcast(const float *p) {
  double d;
  memcpy(&d, p, sizeof d);
  return _mm512_castpd_ps(_mm512_set1_pd(d));
}

#define GB 2
#define MG_BCAST mg_bcast
#define BMAX 28
#define FN f32_gspc_mg_row_g2x8__avx512
#include "f32-gspc-mg-tmpl.h"
