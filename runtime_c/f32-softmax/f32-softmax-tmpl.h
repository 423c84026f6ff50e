/* Body of f32_softmax__<isa>: include after an ec_simd_<isa>.h vocabulary with FN defined.
 * inner == 1: each row is contiguous (vector max, exp + sum, scale). inner > 1: the vectors run
 * along inner, EC_VL independent rows at a time, so every load is contiguous. y may equal x. */
#include <math.h>

#define SM_CAT_(a, b) a##b
#define SM_CAT(a, b) SM_CAT_(a, b)

static void SM_CAT(FN, _row)(size_t n, int log_softmax, const float *x, float *y) {
  size_t i = 0;
  float m = x[0];
  if (n >= EC_VL) {
    ec_v mv = ec_vld(x);
    for (i = EC_VL; i + EC_VL <= n; i += EC_VL) mv = ec_vmax(mv, ec_vld(x + i));
    m = ec_vhmax(mv);
  }
  for (; i < n; i++) m = x[i] > m ? x[i] : m;
  const ec_v mv = ec_vset1(m);
  ec_v sv = ec_vzero();
  float s = 0.0f;
  for (i = 0; i + EC_VL <= n; i += EC_VL) {
    const ec_v e = ec_vexp(ec_vsub(ec_vld(x + i), mv));
    if (!log_softmax) ec_vst(y + i, e);
    sv = ec_vadd(sv, e);
  }
  if (i < n) { /* the masked-off lanes would add e^-m: sum the stored tail instead */
    float t[EC_VL];
    ec_vst(t, ec_vexp(ec_vsub(ec_vld_n(x + i, n - i), mv)));
    for (size_t k = 0; k < n - i; k++) s += t[k];
    if (!log_softmax) ec_vst_n(y + i, ec_vld(t), n - i);
  }
  s += ec_vhsum(sv);
  if (log_softmax) {
    const ec_v b = ec_vset1(m + logf(s));
    for (i = 0; i + EC_VL <= n; i += EC_VL) ec_vst(y + i, ec_vsub(ec_vld(x + i), b));
    if (i < n) ec_vst_n(y + i, ec_vsub(ec_vld_n(x + i, n - i), b), n - i);
    return;
  }
  const ec_v r = ec_vset1(1.0f / s);
  for (i = 0; i + EC_VL <= n; i += EC_VL) ec_vst(y + i, ec_vmul(ec_vld(y + i), r));
  if (i < n) ec_vst_n(y + i, ec_vmul(ec_vld_n(y + i, n - i), r), n - i);
}

/* `lanes` (<= EC_VL) neighbouring columns of a strided row block: x[i * inner + j], j < lanes. */
static void SM_CAT(FN, _cols)(size_t n, size_t inner, size_t lanes, int log_softmax, const float *x, float *y) {
#define LD(p) (lanes == EC_VL ? ec_vld(p) : ec_vld_n(p, lanes))
#define ST(p, v) (lanes == EC_VL ? ec_vst(p, v) : ec_vst_n(p, v, lanes))
  ec_v m = LD(x);
  for (size_t i = 1; i < n; i++) m = ec_vmax(m, LD(x + i * inner));
  ec_v s = ec_vzero();
  for (size_t i = 0; i < n; i++) {
    const ec_v e = ec_vexp(ec_vsub(LD(x + i * inner), m));
    if (!log_softmax) ST(y + i * inner, e);
    s = ec_vadd(s, e);
  }
  if (log_softmax) { /* one log per column */
    float t[EC_VL];
    ec_vst(t, s);
    for (size_t k = 0; k < EC_VL; k++) t[k] = logf(t[k]);
    const ec_v b = ec_vadd(m, ec_vld(t));
    for (size_t i = 0; i < n; i++) ST(y + i * inner, ec_vsub(LD(x + i * inner), b));
    return;
  }
  const ec_v r = ec_vdiv(ec_vset1(1.0f), s);
  for (size_t i = 0; i < n; i++) ST(y + i * inner, ec_vmul(LD(y + i * inner), r));
#undef LD
#undef ST
}

F32_SOFTMAX_DECL(FN) {
  if (n == 0) return;
  for (size_t o = 0; o < outer; o++) {
    const float *xo = x + o * n * inner;
    float *yo = y + o * n * inner;
    if (inner == 1) {
      SM_CAT(FN, _row)(n, log_softmax, xo, yo);
      continue;
    }
    for (size_t j = 0; j < inner; j += EC_VL)
      SM_CAT(FN, _cols)(n, inner, EC_MIN(EC_VL, inner - j), log_softmax, xo + j, yo + j);
  }
}
#undef SM_CAT
#undef SM_CAT_
