/* Softmax / LogSoftmax, avx2 (body in f32-softmax-tmpl.h). */
#include "../ec_simd_avx2.h"
#include "f32-softmax.h"

#define FN f32_softmax__avx2
#include "f32-softmax-tmpl.h"
