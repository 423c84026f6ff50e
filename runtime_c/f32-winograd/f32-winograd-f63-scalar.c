/* Winograd F(6,3) transforms, portable reference (body in f32-winograd-scalar-tmpl.h). */
#include "f32-winograd.h"

#define WG_M 6
#define FN_IN f32_winograd_in_f63__scalar
#define FN_OUT f32_winograd_out_f63__scalar
#define FN_INCB f32_winograd_incb_f63__scalar
#define FN_OUTCB f32_winograd_outcb_f63__scalar
#include "f32-winograd-scalar-tmpl.h"
