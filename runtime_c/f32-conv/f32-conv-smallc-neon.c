/* Direct few-input-channel conv, neon: 8 output channels (two vectors) x 8 pixels, or 4 x 16, on aarch64's 32
 * registers; armv7's 16 hold 8 x 4 or 4 x 8. Body in f32-conv-smallc-tmpl.h. */
#include "../ec_simd_neon.h"
#include "f32-conv-smallc.h"

#define SMALLC_FN(name) name##__neon
#if defined(__aarch64__)
#define SMALLC_TW 8
#else
#define SMALLC_TW 4
#endif
#define SMALLC_BCAST(p) vld1q_dup_f32(p)
#include "f32-conv-smallc-tmpl.h"
