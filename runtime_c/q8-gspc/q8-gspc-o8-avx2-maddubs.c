/* Int8 GSPC for AVX2 without VNNI (q8-gspc-o8-avx2-tmpl.h) on weights whose channel pairs fit vpmaddubsw's
 * int16 pair sums: vpmaddubsw, then vpmaddwd by ones. */
#include <immintrin.h>

#define Q8_GSPC_DOT(acc, u, w) _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u), (w)), _mm256_set1_epi16(1)))
#include "q8-gspc-o8-avx2-tmpl.h"

void q8_gspc_o8__avx2_maddubs(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch, ec_pool *pool)
{
    q8_gspc_o8_avx2_entry(p, x, y, scratch, pool);
}
