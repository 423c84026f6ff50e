/* What the one-ISA kernel tests share: the kernel-name macro (SIMD(f32_x) -> f32_x__avx2 for -DISA=avx2), a
 * fixed pseudo-random fill, and the relative error that counts NaN as a mismatch. */
#ifndef EC_KTEST_H
#define EC_KTEST_H
#include <math.h>
#include <stdlib.h>

#define CAT_(a, b) a##__##b
#define CAT(a, b) CAT_(a, b)
#define SIMD(name) CAT(name, ISA)
#define STR_(a) #a
#define STR(a) STR_(a)

static unsigned rng = 12345u;
static float frand(void) {
  rng = rng * 1103515245u + 12345u;
  return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}
static float *falloc(size_t n) {
  float *p = malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; i < n; i++) p[i] = frand();
  return p;
}
static double err(const float *a, const float *b, size_t n) {
  double e = 0;
  for (size_t i = 0; i < n; i++) {
    const double d = a[i] == b[i] ? 0.0 : fabs((double)a[i] - (double)b[i]) / (1.0 + fabs((double)b[i]));
    if (!(d <= e)) e = d; /* NaN counts */
  }
  return e;
}
#endif
