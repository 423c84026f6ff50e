/* Int8 depthwise conv for AVX-VNNI (q8-dwconv-avx2-tmpl.h): the 4-tap step is one VEX vpdpbusd, exact on any
 * int8 weights, so output rows always share the interleaved taps. */
#include <immintrin.h>

#include "../ec_vnni.h"

#define Q8_DW_DOT(acc, u, w) ec_dpbusd256_vex((acc), (u), (w))
#include "q8-dwconv-avx2-tmpl.h"

void q8_dwconv__avxvnni(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch)
{
    q8_dw_avx2_entry(p, x, y, scratch, 1);
}
