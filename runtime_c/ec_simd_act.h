/* SIMD epilogue helpers written once over the ec_v vocabulary of the including ISA header.
 * Every activation stays in registers: the transcendental ones use the polynomial exp / erf below
 * (constants and their scalar twins in ec_common.h; accuracy in docs/kernels.md). */
#ifndef EC_SIMD_ACT_H
#define EC_SIMD_ACT_H

#define EC_VC(c) ec_vset1(c)

/* e^x: clamped so that n stays in [-150, 128]; the clamp keeps NaN (it is the second operand). */
EC_INLINE ec_v ec_vexp(ec_v x) {
  x = ec_vmin(EC_VC(EC_EXP_HI), ec_vmax(EC_VC(EC_EXP_LO), x));
  const ec_v n = ec_vsub(ec_vfma(EC_VC(EC_EXP_MAGIC), x, EC_VC(EC_LOG2E)), EC_VC(EC_EXP_MAGIC));
  const ec_v r = ec_vfnma(ec_vfnma(x, n, EC_VC(EC_LN2_HI)), n, EC_VC(EC_LN2_LO));
  ec_v q = ec_vfma(EC_VC(EC_EXP_Q3), EC_VC(EC_EXP_Q4), r);
  q = ec_vfma(EC_VC(EC_EXP_Q2), q, r);
  q = ec_vfma(EC_VC(EC_EXP_Q1), q, r);
  q = ec_vfma(EC_VC(EC_EXP_Q0), q, r);
  return ec_vldexp(ec_vadd(ec_vfma(r, ec_vmul(r, r), q), EC_VC(1.0f)), n);
}

/* 1 / (1 + e^-x) from e = e^-|x| (no overflow; e / (1 + e) keeps relative accuracy for x < 0). */
EC_INLINE ec_v ec_vsigmoid(ec_v x) {
  const ec_v e = ec_vexp(ec_vneg(ec_vabs(x)));
  return ec_vdiv(ec_vsel_lt(x, ec_vzero(), e, EC_VC(1.0f)), ec_vadd(EC_VC(1.0f), e));
}

EC_INLINE ec_v ec_vsilu(ec_v x) {
  const ec_v e = ec_vexp(ec_vneg(ec_vabs(x)));
  return ec_vdiv(ec_vmul(x, ec_vsel_lt(x, ec_vzero(), e, EC_VC(1.0f))), ec_vadd(EC_VC(1.0f), e));
}

/* Odd polynomial near 0 (where (1 - e) / (1 + e) would cancel), else from e = e^-2|x|. */
EC_INLINE ec_v ec_vtanh(ec_v x) {
  const ec_v ax = ec_vabs(x), x2 = ec_vmul(x, x);
  const ec_v e = ec_vexp(ec_vmul(EC_VC(-2.0f), ax));
  ec_v t = ec_vfma(EC_VC(EC_TANH_T3), EC_VC(EC_TANH_T4), x2);
  t = ec_vfma(EC_VC(EC_TANH_T2), t, x2);
  t = ec_vfma(EC_VC(EC_TANH_T1), t, x2);
  t = ec_vfma(EC_VC(EC_TANH_T0), t, x2);
  const ec_v small = ec_vfma(x, ec_vmul(x, x2), t); /* sign of x except -0 + 0 */
  const ec_v big = ec_vdiv(ec_vsub(EC_VC(1.0f), e), ec_vadd(EC_VC(1.0f), e));
  return ec_vcopysign(ec_vsel_lt(ax, EC_VC(EC_TANH_SMALL), small, big), x);
}

/* P(z^2) (erf(z) = z P near 0) and erfc(|z|), for z^2 = hi + lo (lo: rounding error of hi). */
EC_INLINE void ec_verf_parts(ec_v az, ec_v hi, ec_v lo, ec_v *p0, ec_v *w) {
  ec_v p = ec_vfma(EC_VC(EC_ERF_P4), EC_VC(EC_ERF_P5), hi);
  p = ec_vfma(EC_VC(EC_ERF_P3), p, hi);
  p = ec_vfma(EC_VC(EC_ERF_P2), p, hi);
  p = ec_vfma(EC_VC(EC_ERF_P1), p, hi);
  *p0 = ec_vfma(EC_VC(EC_ERF_P0), p, hi);
  const ec_v ac = ec_vmin(EC_VC(EC_ERFC_MAX), az);
  const ec_v t = ec_vdiv(EC_VC(2.0f), ec_vadd(EC_VC(2.0f), ac));
  ec_v r = ec_vfma(EC_VC(EC_ERFC_R6), EC_VC(EC_ERFC_R7), t);
  r = ec_vfma(EC_VC(EC_ERFC_R5), r, t);
  r = ec_vfma(EC_VC(EC_ERFC_R4), r, t);
  r = ec_vfma(EC_VC(EC_ERFC_R3), r, t);
  r = ec_vfma(EC_VC(EC_ERFC_R2), r, t);
  r = ec_vfma(EC_VC(EC_ERFC_R1), r, t);
  r = ec_vfma(EC_VC(EC_ERFC_R0), r, t);
  /* e^-(hi+lo) = e^-hi (1 - lo); past the fitted range lo may be inf - inf, and e^-hi is 0 */
  const ec_v lc = ec_vsel_lt(EC_VC(EC_ERFC_MAX), az, ec_vzero(), lo);
  *w = ec_vmul(ec_vmul(ec_vexp(ec_vneg(hi)), ec_vsub(EC_VC(1.0f), lc)), ec_vmul(t, r));
}

EC_INLINE ec_v ec_verf(ec_v x) {
  const ec_v az = ec_vabs(x), hi = ec_vmul(x, x), lo = ec_vfma(ec_vneg(hi), x, x);
  ec_v p, w;
  ec_verf_parts(az, hi, lo, &p, &w);
  return ec_vsel_lt(az, EC_VC(EC_ERF_SMALL), ec_vmul(x, p), ec_vcopysign(ec_vsub(EC_VC(1.0f), w), x));
}

/* x/2 (1 + erf(x / sqrt 2)); for x < 0 the bracket is erfc(|z|), computed without cancellation. */
EC_INLINE ec_v ec_vgelu(ec_v x) {
  const ec_v x2 = ec_vmul(x, x), lo = ec_vfma(ec_vneg(x2), x, x), z = ec_vmul(x, EC_VC(EC_SQRT1_2));
  const ec_v az = ec_vabs(z), hi = ec_vmul(EC_VC(0.5f), x2);
  ec_v p, w;
  ec_verf_parts(az, hi, ec_vmul(EC_VC(0.5f), lo), &p, &w);
  const ec_v big = ec_vsel_lt(z, ec_vzero(), w, ec_vsub(EC_VC(2.0f), w));
  const ec_v b = ec_vsel_lt(az, EC_VC(EC_ERF_SMALL), ec_vfma(EC_VC(1.0f), z, p), big);
  return ec_vmul(ec_vmul(EC_VC(0.5f), x), b);
}

/* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): ONNX Gelu with approximate="tanh". */
EC_INLINE ec_v ec_vgelu_tanh(ec_v x) {
  const ec_v u = ec_vmul(ec_vmul(EC_VC(0.797884561f), x), ec_vfma(EC_VC(1.0f), EC_VC(0.044715f), ec_vmul(x, x)));
  return ec_vmul(ec_vmul(EC_VC(0.5f), x), ec_vadd(EC_VC(1.0f), ec_vtanh(u)));
}

/* Lane by lane through the scalar reference. */
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
#ifndef EC_ACT_LIBM /* -DEC_ACT_LIBM: fused activations through libm (reference, before/after timing) */
  case EC_ACT_SIGMOID: return ec_vsigmoid(x);
  case EC_ACT_SILU: return ec_vsilu(x);
  case EC_ACT_TANH: return ec_vtanh(x);
  case EC_ACT_GELU: return ec_vgelu(x);
#endif
  default: return ec_vact_scalar(act, x); /* kinds without a vector form */
  }
}

EC_INLINE ec_v ec_vact(ec_act act, ec_v x) { return ec_vact_k(act.kind, act, x); }

/* The transcendental activations (Sigmoid, SiLU, Tanh, GELU, the scalar fallbacks) out of line, the cheap ones
 * inline: a kernel that unrolls its stores over many tile shapes inlined their vector exp/tanh/erf bodies into
 * every store, which made most of its compile time (f32-nchwc-avx2.c 14.7 -> 7.0 s at -O3). A call per vector
 * (and the spills of the accumulators still live) is small beside those functions' own work. */
#if defined(__GNUC__) || defined(__clang__)
static __attribute__((noinline, unused)) ec_v ec_vact_call(ec_act act, ec_v x) { return ec_vact(act, x); }
#else
static ec_v ec_vact_call(ec_act act, ec_v x) { return ec_vact(act, x); }
#endif

EC_INLINE ec_v ec_vact_lean(ec_act act, ec_v x) {
  switch (act.kind) {
  case EC_ACT_NONE: return x;
  case EC_ACT_RELU: return ec_vact_k(EC_ACT_RELU, act, x);
  case EC_ACT_CLIP: return ec_vact_k(EC_ACT_CLIP, act, x);
  case EC_ACT_LEAKY_RELU: return ec_vact_k(EC_ACT_LEAKY_RELU, act, x);
  case EC_ACT_HARD_SIGMOID: return ec_vact_k(EC_ACT_HARD_SIGMOID, act, x);
  case EC_ACT_HARD_SWISH: return ec_vact_k(EC_ACT_HARD_SWISH, act, x);
  default: return ec_vact_call(act, x);
  }
}

/* acc (bias already added) -> final value; res points at the matching output lanes (n of them) or NULL; lean:
 * ec_vact_lean instead of ec_vact (a constant after inlining) */
EC_INLINE ec_v ec_vepi_any(ec_v acc, const float *res, size_t n, int before, ec_act act, const int lean) {
  if (res && before) acc = ec_vadd(acc, n < EC_VL ? ec_vld_n(res, n) : ec_vld(res));
  acc = lean ? ec_vact_lean(act, acc) : ec_vact(act, acc);
  if (res && !before) acc = ec_vadd(acc, n < EC_VL ? ec_vld_n(res, n) : ec_vld(res));
  return acc;
}
EC_INLINE ec_v ec_vepi(ec_v acc, const float *res, int before, ec_act act) {
  return ec_vepi_any(acc, res, EC_VL, before, act, 0);
}
EC_INLINE ec_v ec_vepi_n(ec_v acc, const float *res, size_t n, int before, ec_act act) {
  return ec_vepi_any(acc, res, n, before, act, 0);
}
EC_INLINE ec_v ec_vepi_lean(ec_v acc, const float *res, int before, ec_act act) {
  return ec_vepi_any(acc, res, EC_VL, before, act, 1);
}
EC_INLINE ec_v ec_vepi_n_lean(ec_v acc, const float *res, size_t n, int before, ec_act act) {
  return ec_vepi_any(acc, res, n, before, act, 1);
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
