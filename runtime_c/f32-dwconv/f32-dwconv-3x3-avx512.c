/* Depthwise plane kernel, 3x3 window, avx512; body in f32-dwconv-tmpl.h. */
#include "../ec_simd_avx512.h"
#include "f32-dwconv.h"

#define FIXED_KH 3
#define FIXED_KW 3
#define FN f32_dwconv_3x3__avx512
#include "f32-dwconv-tmpl.h"
