/* Channel-blocked depthwise body (see f32-dwconv.h) shared by the SIMD files: the includer picks
 * the vocabulary and FN. */
#define DWCB_TAPS_MAX 64
#define DWCB_WO_MAX 256

void FN(const f32_dwconv_cb_shape *s, const f32_dwconv_args *a, size_t item) {
  const size_t nb = EC_DIV_UP(s->C, (size_t)EC_VL), n = item / nb, c0 = (item % nb) * EC_VL;
  const size_t nc = EC_MIN((size_t)EC_VL, s->C - c0), H = s->H, W = s->W, Hp = s->Hp, Wp = s->Wp;
  const size_t taps = s->KH * s->KW, Wo = s->Wo, HoWo = s->Ho * Wo;
  float *xp = a->xp + item * Hp * Wp * EC_VL;
  const float *x = a->x + (n * s->C + c0) * H * W;
  if (taps > DWCB_TAPS_MAX || Wo > DWCB_WO_MAX) return; /* the emitter never picks this kernel then */
  /* pack: the nc planes interleaved, zeros only where padding is (lanes past nc too) */
  const size_t r0 = s->PT, c0w = s->PL;
  const size_t rows = EC_MIN(H, Hp - r0), cols = EC_MIN(W, Wp - c0w);
  for (size_t ih = 0; ih < Hp; ih++) {
    const int inside = ih >= r0 && ih < r0 + rows && nc == EC_VL;
    for (size_t q = 0; q < Wp; q++)
      if (!inside || q < c0w || q >= c0w + cols) ec_vst(xp + (ih * Wp + q) * EC_VL, ec_vzero());
  }
  for (size_t r = 0; r < rows; r++) {
    float *d = xp + ((r + r0) * Wp + c0w) * EC_VL;
    if (nc < EC_VL) { /* channel tail: gather across the nc planes */
      for (size_t q = 0; q < cols; q++)
        for (size_t l = 0; l < nc; l++) d[q * EC_VL + l] = x[(l * H + r) * W + q];
      continue;
    }
    /* EC_VL planes' rows interleaved a square at a time: loads, an in-register transpose, stores */
    const float *src = x + r * W;
    size_t q0 = 0;
    for (; q0 + EC_VL <= cols; q0 += EC_VL) { /* whole squares: no per-square choice in the loop */
      ec_v t[EC_VL];
      for (size_t l = 0; l < EC_VL; l++) t[l] = ec_vld(src + l * H * W + q0);
      ec_vtranspose(t);
      for (size_t i = 0; i < EC_VL; i++) ec_vst(d + (q0 + i) * EC_VL, t[i]);
    }
    for (size_t q = q0; q < cols; q += EC_VL) {
      const size_t m = EC_MIN((size_t)EC_VL, cols - q);
      ec_v t[EC_VL];
      for (size_t l = 0; l < EC_VL; l++) t[l] = m == EC_VL ? ec_vld(src + l * H * W + q) : ec_vld_n(src + l * H * W + q, m);
      ec_vtranspose(t);
      for (size_t i = 0; i < m; i++) ec_vst(d + (q + i) * EC_VL, t[i]);
    }
  }
  /* taps and bias as vectors over the block's channels */
  ec_v wv[DWCB_TAPS_MAX];
  float lane[EC_VL];
  for (size_t t = 0; t < taps; t++) {
    for (size_t l = 0; l < EC_VL; l++) lane[l] = l < nc ? a->w[(c0 + l) * taps + t] : 0.0f;
    wv[t] = ec_vld(lane);
  }
  for (size_t l = 0; l < EC_VL; l++) lane[l] = (a->bias && l < nc) ? a->bias[c0 + l] : 0.0f;
  const ec_v bias = ec_vld(lane);
  size_t toff[DWCB_TAPS_MAX];
  for (size_t kh = 0; kh < s->KH; kh++)
    for (size_t kw = 0; kw < s->KW; kw++) toff[kh * s->KW + kw] = (kh * s->DH * Wp + kw * s->DW) * EC_VL;
  const int fused = a->res == NULL;
  float tile[DWCB_WO_MAX * EC_VL];
  const size_t step = s->SW * EC_VL;
  for (size_t oh = 0; oh < s->Ho; oh++) {
    const float *rowp = xp + oh * s->SH * Wp * EC_VL;
    size_t ow = 0;
    for (; ow + 4 <= Wo; ow += 4) { /* four independent FMA chains */
      const float *p = rowp + ow * step;
      ec_v a0 = bias, a1 = bias, a2 = bias, a3 = bias;
      for (size_t t = 0; t < taps; t++) {
        const float *q = p + toff[t];
        a0 = ec_vfma(a0, ec_vld(q), wv[t]);
        a1 = ec_vfma(a1, ec_vld(q + step), wv[t]);
        a2 = ec_vfma(a2, ec_vld(q + 2 * step), wv[t]);
        a3 = ec_vfma(a3, ec_vld(q + 3 * step), wv[t]);
      }
      if (fused) a0 = ec_vact(a->act, a0), a1 = ec_vact(a->act, a1), a2 = ec_vact(a->act, a2), a3 = ec_vact(a->act, a3);
      ec_vst(tile + ow * EC_VL, a0);
      ec_vst(tile + (ow + 1) * EC_VL, a1);
      ec_vst(tile + (ow + 2) * EC_VL, a2);
      ec_vst(tile + (ow + 3) * EC_VL, a3);
    }
    for (; ow < Wo; ow++) {
      const float *p = rowp + ow * step;
      ec_v a0 = bias;
      for (size_t t = 0; t < taps; t++) a0 = ec_vfma(a0, ec_vld(p + toff[t]), wv[t]);
      ec_vst(tile + ow * EC_VL, fused ? ec_vact(a->act, a0) : a0);
    }
    /* transpose the row back to NCHW */
    if (fused) { /* a square at a time: loads, an in-register transpose, one store per plane */
      float *y = a->y + (n * s->C + c0) * HoWo + oh * Wo;
      size_t w0 = 0;
      if (nc == EC_VL)
        for (; w0 + EC_VL <= Wo; w0 += EC_VL) { /* whole squares first, as in the pack */
          ec_v t[EC_VL];
          for (size_t i = 0; i < EC_VL; i++) t[i] = ec_vld(tile + (w0 + i) * EC_VL);
          ec_vtranspose(t);
          for (size_t l = 0; l < EC_VL; l++) ec_vst(y + l * HoWo + w0, t[l]);
        }
      for (size_t w = w0; w < Wo; w += EC_VL) {
        const size_t m = EC_MIN((size_t)EC_VL, Wo - w);
        ec_v t[EC_VL];
        for (size_t i = 0; i < EC_VL; i++) t[i] = i < m ? ec_vld(tile + (w + i) * EC_VL) : ec_vzero();
        ec_vtranspose(t);
        for (size_t l = 0; l < nc; l++) {
          if (m == EC_VL) ec_vst(y + l * HoWo + w, t[l]);
          else ec_vst_n(y + l * HoWo + w, t[l], m);
        }
      }
      continue;
    }
    for (size_t l = 0; l < nc; l++) {
      float *y = a->y + (n * s->C + c0 + l) * HoWo + oh * Wo;
      {
        const float *res = a->res + (n * s->C + c0 + l) * HoWo + oh * Wo;
        for (size_t w = 0; w < Wo; w++) y[w] = ec_epi_value(tile[w * EC_VL + l], res + w, a->res_before_act, a->act);
      }
    }
  }
}
