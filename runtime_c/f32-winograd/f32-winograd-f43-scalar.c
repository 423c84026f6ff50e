/* Winograd F(4,3) transforms, portable reference (body in f32-winograd-scalar-tmpl.h). */
#include "f32-winograd.h"

#define WG_M 4
#define FN_IN f32_winograd_in_f43__scalar
#define FN_OUT f32_winograd_out_f43__scalar
#define FN_INCB f32_winograd_incb_f43__scalar
#define FN_OUTCB f32_winograd_outcb_f43__scalar
#include "f32-winograd-scalar-tmpl.h"
