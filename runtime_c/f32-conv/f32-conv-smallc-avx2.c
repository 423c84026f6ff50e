/* Direct few-input-channel conv, avx2: 16 output channels (two vectors) x 6 pixels, or 8 x 12, in registers;
 * 5 / 10 pixels at stride 1, where gcc 12 spilled one of the 12 accumulators (a 5x5 s1 layer: 0.58x the time
 * at 5). Body in f32-conv-smallc-tmpl.h. */
#include "../ec_simd_avx2.h"
#include "f32-conv-smallc.h"

#define SMALLC_FN(name) name##__avx2
#define SMALLC_TW 6
#define SMALLC_TW_S1 5
#define SMALLC_BCAST(p) _mm256_broadcast_ss(p)
#include "f32-conv-smallc-tmpl.h"
