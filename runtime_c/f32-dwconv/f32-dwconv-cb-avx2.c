/* Channel-blocked depthwise kernel (avx2: EC_VL channels per item); body in f32-dwconv-cb-tmpl.h. */
#include "../ec_simd_avx2.h"
#include "f32-dwconv.h"

#define FN f32_dwconv_cb__avx2
#include "f32-dwconv-cb-tmpl.h"
