/* Vector Softmax / LogSoftmax along one axis of a [outer, n, inner] float32 tensor, one kernel per
 * ISA (body in f32-softmax-tmpl.h); f32-softmax-scalar.h is the reference and the generic path. */
#ifndef F32_SOFTMAX_H
#define F32_SOFTMAX_H
#include <stddef.h>

#define F32_SOFTMAX_DECL(fn) \
  void fn(size_t outer, size_t n, size_t inner, int log_softmax, const float *x, float *y)
F32_SOFTMAX_DECL(f32_softmax__avx2);
F32_SOFTMAX_DECL(f32_softmax__avx512);
F32_SOFTMAX_DECL(f32_softmax__neon);
#endif
