/* GSPC row kernel vectorised along ow instead of T_O, for groups with few output channels
 * (Kpg <= 8): T_O = Kpg (one tile), T_I = 1; strided layers read the PH column phases of the
 * packed input (tap kw: phase (kw*DW) % PH, offset (kw*DW) / PH). Each input vector (VL output
 * columns) feeds Kpg accumulators with broadcast weights, and rows are stored straight into NCHW
 * with the epilogue (no transpose). The includer picks the vocabulary and FN. */

EC_INLINE void gspc_ow_row(const f32_gspc_shape *s, const f32_gspc_row_args *a, const int KPG) {
  const size_t Wp = s->Wp, Wo = s->Wo, HoWo = s->Ho * s->Wo, cpg = s->C / s->G, PH = s->PH;
  for (size_t ow = 0; ow < Wo; ow += EC_VL) {
    const size_t n = EC_MIN((size_t)EC_VL, Wo - ow);
    ec_v acc[8];
#pragma GCC unroll 8
    for (int k = 0; k < KPG; k++) acc[k] = ec_vzero();
    const float *w = a->w;
    for (size_t c = 0; c < cpg; c++) {
      const float *xc = a->xp + (c * PH * s->Hp + a->oh * s->SH) * Wp + ow;
      for (size_t kh = 0; kh < s->KH; kh++) {
        /* tap kw reads phase (kw*DW) % PH at column offset (kw*DW) / PH: stepped, not divided per tap
         * (two divisions a tap cost more than its Kpg FMAs) */
        size_t ph = 0, q = 0;
        for (size_t kw = 0; kw < s->KW; kw++, w += KPG) {
          const float *p = xc + (ph * s->Hp + kh * s->DH) * Wp + q;
          const ec_v xv = n == EC_VL ? ec_vld(p) : ec_vld_n(p, n);
#pragma GCC unroll 8
          for (int k = 0; k < KPG; k++) acc[k] = ec_vfma(acc[k], xv, ec_vset1(w[k]));
          for (ph += s->DW; ph >= PH; ph -= PH) q++;
        }
      }
    }
#pragma GCC unroll 8
    for (int k = 0; k < KPG; k++) {
      ec_v v = a->bias ? ec_vadd(acc[k], ec_vset1(a->bias[k])) : acc[k];
      float *y = a->y + (size_t)k * HoWo + ow;
      v = ec_vepi_n_lean(v, a->res ? a->res + (size_t)k * HoWo + ow : NULL, n, a->res_before_act, a->act);
      ec_vst_n(y, v, n);
    }
  }
}

void FN(const f32_gspc_shape *s, const f32_gspc_row_args *a) {
  switch (a->nvalid) {
  case 1: gspc_ow_row(s, a, 1); break;
  case 2: gspc_ow_row(s, a, 2); break;
  case 3: gspc_ow_row(s, a, 3); break;
  case 4: gspc_ow_row(s, a, 4); break;
  case 5: gspc_ow_row(s, a, 5); break;
  case 6: gspc_ow_row(s, a, 6); break;
  case 7: gspc_ow_row(s, a, 7); break;
  default: gspc_ow_row(s, a, 8); break;
  }
}
