/* Softmax / LogSoftmax, avx512 (body in f32-softmax-tmpl.h). */
#include "../ec_simd_avx512.h"
#include "f32-softmax.h"

#define FN f32_softmax__avx512
#include "f32-softmax-tmpl.h"
