/* Multi-group GSPC row kernel, two groups of 2 channels per q register; a d-register load doubled; body in f32-gspc-mg-tmpl.h. */
#include <string.h>

#include "../ec_simd_neon.h"
#include "f32-gspc-mg.h"

EC_INLINE ec_v mg_bcast(const float *p) {
  const float32x2_t h = vld1_f32(p);
  return vcombine_f32(h, h);
}

#define GB 2
#define MG_BCAST mg_bcast
#if defined(__aarch64__)
#define BMAX 24
#else
#define BMAX 12 /* 16 q registers on armv7 */
#endif
#define FN f32_gspc_mg_row_g2x2__neon
#include "f32-gspc-mg-tmpl.h"
