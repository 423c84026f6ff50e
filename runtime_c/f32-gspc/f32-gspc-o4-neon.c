/* GSPC row kernel, T_O = 4, neon; body in f32-gspc-tmpl.h. */
#include "../ec_simd_neon.h"
#include "f32-gspc.h"

#if defined(__aarch64__)
#define BMAX 24
#else
#define BMAX 12 /* 16 q registers on armv7 */
#endif
#define FN f32_gspc_row_o4__neon
#include "f32-gspc-tmpl.h"
