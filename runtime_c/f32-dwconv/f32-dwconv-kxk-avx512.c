/* Depthwise plane kernel, any window (generic fallback), avx512; body in f32-dwconv-tmpl.h. */
#include "../ec_simd_avx512.h"
#include "f32-dwconv.h"

#define FIXED_KH 0
#define FIXED_KW 0
#define FN f32_dwconv_kxk__avx512
#include "f32-dwconv-tmpl.h"
