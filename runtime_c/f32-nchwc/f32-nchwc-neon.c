/* Channel-blocked kernels, neon (CB = EC_VL); bodies in f32-nchwc-tmpl.h. */
#include "../ec_simd_neon.h"
#include "f32-nchwc.h"

#define NCHWC_FN(name) name##__neon
#include "f32-nchwc-tmpl.h"
