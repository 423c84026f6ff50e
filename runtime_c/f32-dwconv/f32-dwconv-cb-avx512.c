/* Channel-blocked depthwise kernel (avx512: EC_VL channels per item); body in f32-dwconv-cb-tmpl.h. */
#include "../ec_simd_avx512.h"
#include "f32-dwconv.h"

#define FN f32_dwconv_cb__avx512
#include "f32-dwconv-cb-tmpl.h"
