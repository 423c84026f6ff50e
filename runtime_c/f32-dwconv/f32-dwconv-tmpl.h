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
      /* three partial sums per vector: a 9-tap chain would wait on FMA latency */
      ec_v p0[3] = {bias, ec_vzero(), ec_vzero()}, p1[3] = {bias, ec_vzero(), ec_vzero()};
#pragma GCC unroll 25
      for (size_t t = 0; t < taps; t++) {
        p0[t % 3] = ec_vfma(p0[t % 3], ec_vld(row + toff[t] + ow), wv[t]);
        p1[t % 3] = ec_vfma(p1[t % 3], ec_vld(row + toff[t] + ow + EC_VL), wv[t]);
      }
      ec_v acc0 = ec_vadd(ec_vadd(p0[0], p0[1]), p0[2]), acc1 = ec_vadd(ec_vadd(p1[0], p1[1]), p1[2]);
      if (res && before) acc0 = ec_vadd(acc0, ec_vld(res + ow)), acc1 = ec_vadd(acc1, ec_vld(res + ow + EC_VL));
      acc0 = ec_vact_k(KIND, a->act, acc0);
      acc1 = ec_vact_k(KIND, a->act, acc1);
      if (res && !before) acc0 = ec_vadd(acc0, ec_vld(res + ow)), acc1 = ec_vadd(acc1, ec_vld(res + ow + EC_VL));
      ec_vst(y + ow, acc0);
      ec_vst(y + ow + EC_VL, acc1);
    }
    for (; ow < Wo; ow += EC_VL) {
      const size_t n = EC_MIN((size_t)EC_VL, Wo - ow);
      ec_v p[3] = {bias, ec_vzero(), ec_vzero()};
      if (ow + EC_VL <= Wq - s->WOFF) { /* the packed row has room: full loads, masked store */
#pragma GCC unroll 25
        for (size_t t = 0; t < taps; t++) p[t % 3] = ec_vfma(p[t % 3], ec_vld(row + toff[t] + ow), wv[t]);
      } else {
#pragma GCC unroll 25
        for (size_t t = 0; t < taps; t++) p[t % 3] = ec_vfma(p[t % 3], ec_vld_n(row + toff[t] + ow, n), wv[t]);
      }
      ec_v acc = ec_vadd(ec_vadd(p[0], p[1]), p[2]);
      if (res && before) acc = ec_vadd(acc, ec_vld_n(res + ow, n));
      acc = ec_vact_k(KIND, a->act, acc);
      if (res && !before) acc = ec_vadd(acc, ec_vld_n(res + ow, n));
      ec_vst_n(y + ow, acc, n);
    }
  }
}

/* Stride 1: pad the raw plane into xp with vector copies (rows are short; libc calls per row
 * would cost more than the copy). */
EC_INLINE void dw_pad_plane(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a) {
  const size_t Hp = s->Hp, Wq = s->Wq, W = s->W, PL = s->PL;
  const size_t hi = EC_MIN(Wq, PL + W), w = hi > PL ? hi - PL : 0;
  for (size_t ih = 0; ih < Hp; ih++) {
    float *d = a->xp + ih * Wq;
    const ptrdiff_t r = (ptrdiff_t)ih - (ptrdiff_t)s->PT;
    size_t q = 0;
    if (r < 0 || r >= (ptrdiff_t)s->H) {
      for (; q + EC_VL <= Wq; q += EC_VL) ec_vst(d + q, ec_vzero());
      if (q < Wq) ec_vst_n(d + q, ec_vzero(), Wq - q);
      continue;
    }
    const float *src = a->x + (size_t)r * W;
    for (size_t z = 0; z < PL && z < Wq; z++) d[z] = 0.0f;
    for (; q + EC_VL <= w; q += EC_VL) ec_vst(d + PL + q, ec_vld(src + q));
    if (q < w) ec_vst_n(d + PL + q, ec_vld_n(src + q, w - q), w - q);
    for (size_t z = hi; z < Wq; z++) d[z] = 0.0f;
  }
  for (size_t z = 0; z < F32_DWCONV_SLACK; z += EC_VL) ec_vst(a->xp + Hp * Wq + z, ec_vzero());
}

/* Stride 1 both ways, small plane: outputs taken over the padded width (j = oh*Wq + ow), so a 7x7 plane is
 * 4 full vectors instead of 7 masked rows; the dropped columns fall out when the tile is copied
 * into NCHW by ec_epi_row (bias, residual, activation). Reads up to F32_DWCONV_SLACK floats past
 * the plane. */
#define DW_FLAT_MAX 1024
EC_INLINE void dw_flat(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, const size_t *toff,
                       const ec_v *wv) {
  const size_t Wq = s->Wq, taps = (size_t)DW_KH * DW_KW, n = (s->Ho - 1) * Wq + s->Wo;
  float tile[DW_FLAT_MAX + EC_VL];
  for (size_t j = 0; j < n; j += EC_VL) {
    ec_v p[3] = {ec_vzero(), ec_vzero(), ec_vzero()};
#pragma GCC unroll 25
    for (size_t t = 0; t < taps; t++) p[t % 3] = ec_vfma(p[t % 3], ec_vld(a->xp + toff[t] + j), wv[t]);
    ec_vst(tile + j, ec_vadd(ec_vadd(p[0], p[1]), p[2]));
  }
  for (size_t oh = 0; oh < s->Ho; oh++)
    ec_epi_row(tile + oh * Wq, a->y + oh * s->Wo, s->Wo, a->bias, a->res ? a->res + oh * s->Wo : NULL,
               a->res_before_act, a->act);
}

F32_DWCONV_DECL(FN) {
  const size_t Hp = s->Hp, Wq = s->Wq, DH = s->DH;
  if (a->x) dw_pad_plane(s, a);
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
  if (a->x && s->SH == 1 && s->Ho * Wq <= DW_FLAT_MAX && EC_VL + (kw_n - 1) * s->DW <= F32_DWCONV_SLACK) {
    dw_flat(s, a, toff, wv);
    return;
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
