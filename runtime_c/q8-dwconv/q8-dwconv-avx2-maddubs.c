/* Int8 depthwise conv for AVX2 without VNNI (q8-dwconv-avx2-tmpl.h) on weights whose tap pairs fit vpmaddubsw's
 * int16 pair sum: vpmaddubsw adds tap pairs, vpmaddwd with ones the two pairs. */
#include <immintrin.h>

#define Q8_DW_DOT(acc, u, w) _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u), (w)), _mm256_set1_epi16(1)))
#include "q8-dwconv-avx2-tmpl.h"

void q8_dwconv__avx2_maddubs(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch)
{
    q8_dw_avx2_entry(p, x, y, scratch, 0);
}

/* every consecutive tap pair exact (not only the even ones): output rows may share the interleaved taps */
void q8_dwconv__avx2_maddubs_shared(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch)
{
    q8_dw_avx2_entry(p, x, y, scratch, 1);
}
