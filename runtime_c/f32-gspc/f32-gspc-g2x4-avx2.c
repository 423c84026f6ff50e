/* Multi-group GSPC row kernel, two groups of 4 channels per ymm; vbroadcastsd; body in f32-gspc-mg-tmpl.h. */
#include <string.h>

#include "../ec_simd_avx2.h"
#include "f32-gspc-mg.h"

EC_INLINE ec_v mg_bcast(const float *p) {
  double d;
  memcpy(&d, p, sizeof d);
  return _mm256_castpd_ps(_mm256_set1_pd(d));
}

#define GB 2
#define MG_BCAST mg_bcast
#define BMAX 14
#define FN f32_gspc_mg_row_g2x4__avx2
#include "f32-gspc-mg-tmpl.h"
