/* Channel-blocked depthwise kernel (neon: EC_VL channels per item); body in f32-dwconv-cb-tmpl.h. */
#include "../ec_simd_neon.h"
#include "f32-dwconv.h"

#define FN f32_dwconv_cb__neon
#include "f32-dwconv-cb-tmpl.h"
