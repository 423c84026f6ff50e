/* Softmax / LogSoftmax, neon (body in f32-softmax-tmpl.h). */
#include "../ec_simd_neon.h"
#include "f32-softmax.h"

#define FN f32_softmax__neon
#include "f32-softmax-tmpl.h"
