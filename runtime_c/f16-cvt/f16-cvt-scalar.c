/* Portable half -> float conversion (bit manipulation, exact). */
#include "f16-cvt.h"

void f16_to_f32__scalar(size_t n, const uint16_t *x, float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = f16_to_f32_1(x[i]);
}
