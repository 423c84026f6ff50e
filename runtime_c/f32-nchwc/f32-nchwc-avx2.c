/* Channel-blocked kernels, avx2 (CB = EC_VL); bodies in f32-nchwc-tmpl.h. */
#include "../ec_simd_avx2.h"
#include "f32-nchwc.h"

#define NCHWC_FN(name) name##__avx2
#include "f32-nchwc-tmpl.h"
