/* Int8 GSPC for AVX-VNNI (q8-gspc-o8-avx2-tmpl.h): one VEX vpdpbusd per 4 input channels x 8 output channels,
 * exact on any int8 weights. */
#include <immintrin.h>

#include "../ec_vnni.h"

#define Q8_GSPC_DOT(acc, u, w) ec_dpbusd256_vex((acc), (u), (w))
#include "q8-gspc-o8-avx2-tmpl.h"

void q8_gspc_o8__avxvnni(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch, ec_pool *pool)
{
    q8_gspc_o8_avx2_entry(p, x, y, scratch, pool);
}
