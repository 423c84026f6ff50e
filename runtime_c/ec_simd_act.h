/* SIMD epilogue helpers written once over the ec_v vocabulary of the including ISA header.
 * Piecewise-linear activations stay in registers; transcendental ones fall back to
 * ec_act_apply lane by lane (they are rare next to the MACs of a conv/GEMM output). */
#ifndef EC_SIMD_ACT_H
#define EC_SIMD_ACT_H

EC_INLINE ec_v ec_vact_scalar(ec_act act, ec_v x) {
  float t[EC_VL];
  ec_vst(t, x);
  for (int i = 0; i < EC_VL; i++) t[i] = ec_act_apply(act, t[i]);
  return ec_vld(t);
}

/* kind separate from act so that a constant kind folds the switch away in inlined callers */
EC_INLINE ec_v ec_vact_k(ec_act_kind kind, ec_act act, ec_v x) {
  switch (kind) {
  case EC_ACT_NONE: return x;
  case EC_ACT_RELU: return ec_vmax(x, ec_vzero());
  case EC_ACT_CLIP: return ec_vmin(ec_vmax(x, ec_vset1(act.a)), ec_vset1(act.b));
  case EC_ACT_LEAKY_RELU:
    return ec_vfma(ec_vmax(x, ec_vzero()), ec_vmin(x, ec_vzero()), ec_vset1(act.a));
  case EC_ACT_HARD_SIGMOID: {
    ec_v y = ec_vfma(ec_vset1(act.b), x, ec_vset1(act.a));
    return ec_vmin(ec_vmax(y, ec_vzero()), ec_vset1(1.0f));
  }
  case EC_ACT_HARD_SWISH: {
    ec_v y = ec_vfma(ec_vset1(0.5f), x, ec_vset1(1.0f / 6.0f));
    return ec_vmul(x, ec_vmin(ec_vmax(y, ec_vzero()), ec_vset1(1.0f)));
  }
  default: return ec_vact_scalar(act, x);
  }
}

EC_INLINE ec_v ec_vact(ec_act act, ec_v x) { return ec_vact_k(act.kind, act, x); }

/* acc (bias already added) -> final value; res points at the matching output lanes or NULL. */
EC_INLINE ec_v ec_vepi(ec_v acc, const float *res, int before, ec_act act) {
  if (res && before) acc = ec_vadd(acc, ec_vld(res));
  acc = ec_vact(act, acc);
  if (res && !before) acc = ec_vadd(acc, ec_vld(res));
  return acc;
}

EC_INLINE ec_v ec_vepi_n(ec_v acc, const float *res, size_t n, int before, ec_act act) {
  if (res && before) acc = ec_vadd(acc, ec_vld_n(res, n));
  acc = ec_vact(act, acc);
  if (res && !before) acc = ec_vadd(acc, ec_vld_n(res, n));
  return acc;
}
/* y[i] = epilogue(y[i]) over a row (bias already in y); one switch per row, not per vector. */
EC_INLINE void ec_vepi_row(float *y, const float *res, size_t n, int before, ec_act act) {
  size_t i = 0;
  if (res && before)
    for (i = 0; i + EC_VL <= n; i += EC_VL) ec_vst(y + i, ec_vadd(ec_vld(y + i), ec_vld(res + i)));
  if (res && before && i < n) ec_vst_n(y + i, ec_vadd(ec_vld_n(y + i, n - i), ec_vld_n(res + i, n - i)), n - i);
  switch (act.kind) {
  case EC_ACT_NONE: break;
  case EC_ACT_RELU:
    for (i = 0; i + EC_VL <= n; i += EC_VL) ec_vst(y + i, ec_vmax(ec_vld(y + i), ec_vzero()));
    if (i < n) ec_vst_n(y + i, ec_vmax(ec_vld_n(y + i, n - i), ec_vzero()), n - i);
    break;
  default:
    for (i = 0; i + EC_VL <= n; i += EC_VL) ec_vst(y + i, ec_vact(act, ec_vld(y + i)));
    if (i < n) ec_vst_n(y + i, ec_vact(act, ec_vld_n(y + i, n - i)), n - i);
  }
  if (res && !before) {
    for (i = 0; i + EC_VL <= n; i += EC_VL) ec_vst(y + i, ec_vadd(ec_vld(y + i), ec_vld(res + i)));
    if (i < n) ec_vst_n(y + i, ec_vadd(ec_vld_n(y + i, n - i), ec_vld_n(res + i, n - i)), n - i);
  }
}
#endif
