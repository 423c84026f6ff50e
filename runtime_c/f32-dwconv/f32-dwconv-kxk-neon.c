/* Depthwise plane kernel, any window (generic fallback), neon; body in f32-dwconv-tmpl.h. */
#include "../ec_simd_neon.h"
#include "f32-dwconv.h"

#define FIXED_KH 0
#define FIXED_KW 0
#define FN f32_dwconv_kxk__neon
#include "f32-dwconv-tmpl.h"
