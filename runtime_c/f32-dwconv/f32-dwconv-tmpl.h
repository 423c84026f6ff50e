/* Depthwise plane kernel body shared by the SIMD files: the includer picks the vocabulary,
 * FN, and FIXED_KH/FIXED_KW (0 = taken from the shape at run time). Taps are hoisted into registers when
 * the window is fixed; each output row is computed in vectors along ow. */
#if FIXED_KH
#define DW_KH FIXED_KH
#define DW_KW FIXED_KW
#else
#define DW_KH s->KH
#define DW_KW s->KW
#endif
#define DW_TAPS_MAX 64

/* All rows of the plane; KIND is a constant in the specialised calls below, so the
 * activation is folded into the store path instead of a switch per vector. */
EC_INLINE void dw_rows(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, const size_t *toff,
                       const ec_v *wv, const ec_act_kind KIND) {
  const size_t Wq = s->Wq, Wo = s->Wo, SH = s->SH, taps = (size_t)DW_KH * DW_KW;
  const ec_v bias = ec_vset1(a->bias);
  const int before = a->res_before_act;
  for (size_t oh = 0; oh < s->Ho; oh++) {
    const float *row = a->xp + oh * SH * Wq;
    float *y = a->y + oh * Wo;
    const float *res = a->res ? a->res + oh * Wo : NULL;
    size_t ow = 0;
    for (; ow + 2 * EC_VL <= Wo; ow += 2 * EC_VL) {
      ec_v acc0 = bias, acc1 = bias;
#pragma GCC unroll 25
      for (size_t t = 0; t < taps; t++) {
        acc0 = ec_vfma(acc0, ec_vld(row + toff[t] + ow), wv[t]);
        acc1 = ec_vfma(acc1, ec_vld(row + toff[t] + ow + EC_VL), wv[t]);
      }
      if (res && before) acc0 = ec_vadd(acc0, ec_vld(res + ow)), acc1 = ec_vadd(acc1, ec_vld(res + ow + EC_VL));
      acc0 = ec_vact_k(KIND, a->act, acc0);
      acc1 = ec_vact_k(KIND, a->act, acc1);
      if (res && !before) acc0 = ec_vadd(acc0, ec_vld(res + ow)), acc1 = ec_vadd(acc1, ec_vld(res + ow + EC_VL));
      ec_vst(y + ow, acc0);
      ec_vst(y + ow + EC_VL, acc1);
    }
    for (; ow < Wo; ow += EC_VL) {
      const size_t n = EC_MIN((size_t)EC_VL, Wo - ow);
      ec_v acc = bias;
      if (ow + EC_VL <= Wq - s->WOFF) { /* the packed row has room: full loads, masked store */
#pragma GCC unroll 25
        for (size_t t = 0; t < taps; t++) acc = ec_vfma(acc, ec_vld(row + toff[t] + ow), wv[t]);
      } else {
#pragma GCC unroll 25
        for (size_t t = 0; t < taps; t++) acc = ec_vfma(acc, ec_vld_n(row + toff[t] + ow, n), wv[t]);
      }
      if (res && before) acc = ec_vadd(acc, ec_vld_n(res + ow, n));
      acc = ec_vact_k(KIND, a->act, acc);
      if (res && !before) acc = ec_vadd(acc, ec_vld_n(res + ow, n));
      ec_vst_n(y + ow, acc, n);
    }
  }
}

F32_DWCONV_DECL(FN) {
  const size_t Hp = s->Hp, Wq = s->Wq, DH = s->DH;
  const size_t kh_n = DW_KH, kw_n = DW_KW;
  if (kh_n * kw_n > DW_TAPS_MAX) {
    f32_dwconv_kxk__scalar(s, a);
    return;
  }
  size_t toff[DW_TAPS_MAX]; /* tap -> offset inside the packed plane, minus the row base */
  ec_v wv[DW_TAPS_MAX];
  for (size_t kh = 0; kh < kh_n; kh++)
    for (size_t kw = 0; kw < kw_n; kw++) {
      const size_t ph = (kw * s->DW) % s->SW, off = (kw * s->DW) / s->SW;
      toff[kh * kw_n + kw] = (ph * Hp + kh * DH) * Wq + off;
      wv[kh * kw_n + kw] = ec_vset1(a->w[kh * kw_n + kw]);
    }
  switch (a->act.kind) {
  case EC_ACT_NONE: dw_rows(s, a, toff, wv, EC_ACT_NONE); break;
  case EC_ACT_RELU: dw_rows(s, a, toff, wv, EC_ACT_RELU); break;
  case EC_ACT_CLIP: dw_rows(s, a, toff, wv, EC_ACT_CLIP); break;
  case EC_ACT_HARD_SWISH: dw_rows(s, a, toff, wv, EC_ACT_HARD_SWISH); break;
  default: dw_rows(s, a, toff, wv, a->act.kind);
  }
}
#undef DW_KH
#undef DW_KW
