/* Channel-blocked kernels, avx512 (CB = EC_VL); bodies in f32-nchwc-tmpl.h. */
#include "../ec_simd_avx512.h"
#include "f32-nchwc.h"

#define NCHWC_FN(name) name##__avx512
#include "f32-nchwc-tmpl.h"
