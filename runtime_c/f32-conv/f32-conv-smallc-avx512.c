/* Direct few-input-channel conv, avx512: 32 output channels (two vectors) x 6 pixels, or 16 x 12, in registers;
 * 5 / 10 pixels at stride 1 as on AVX2. 12 / 10 pixels a tile (24 of the 32 zmm) measured 6% slower on
 * ResNet-50's 7x7 s2 stem (Xeon Emerald Rapids). Body in f32-conv-smallc-tmpl.h. */
#include "../ec_simd_avx512.h"
#include "f32-conv-smallc.h"

#define SMALLC_FN(name) name##__avx512
#define SMALLC_TW 6
#define SMALLC_TW_S1 5
#define SMALLC_BCAST(p) _mm512_set1_ps(*(p))
#include "f32-conv-smallc-tmpl.h"
