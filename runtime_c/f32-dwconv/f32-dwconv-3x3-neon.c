/* Depthwise plane kernel, 3x3 window, neon; body in f32-dwconv-tmpl.h. */
#include "../ec_simd_neon.h"
#include "f32-dwconv.h"

#define FIXED_KH 3
#define FIXED_KW 3
#define FN f32_dwconv_3x3__neon
#include "f32-dwconv-tmpl.h"
