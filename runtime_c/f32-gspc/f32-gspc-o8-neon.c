/* GSPC row kernel, T_O = 8 (2 q registers), neon; body in f32-gspc-tmpl.h. */
#include "../ec_simd_neon.h"
#include "f32-gspc.h"

#define GV 2
#if defined(__aarch64__)
#define BMAX 12
#else
#define BMAX 5 /* 16 q registers on armv7 */
#endif
#define FN f32_gspc_row_o8__neon
#include "f32-gspc-tmpl.h"
