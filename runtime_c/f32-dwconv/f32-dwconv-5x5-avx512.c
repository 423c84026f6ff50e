/* Depthwise plane kernel, 5x5 window, avx512; body in f32-dwconv-tmpl.h. */
#include "../ec_simd_avx512.h"
#include "f32-dwconv.h"

#define FIXED_KH 5
#define FIXED_KW 5
#define FN f32_dwconv_5x5__avx512
#include "f32-dwconv-tmpl.h"
