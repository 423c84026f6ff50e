/* Winograd F(4,3) input/output transforms for avx2 (body in f32-winograd-tmpl.h). */
#include "../ec_simd_avx2.h"
#include "f32-winograd.h"

#define WG_M 4
#define FN_IN f32_winograd_in_f43__avx2
#define FN_OUT f32_winograd_out_f43__avx2
#define FN_OUTC f32_winograd_outc_f43__avx2
#define FN_INC f32_winograd_inc_f43__avx2
#include "f32-winograd-tmpl.h"
