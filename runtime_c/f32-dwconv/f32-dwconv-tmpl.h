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
/* Fixed windows unroll their taps whole; a run-time window by the three partial sums only (unrolling an
 * unknown trip count 25 times multiplied the inlined row variants into minutes of compile time, for no
 * speed: the taps' offsets come from memory either way). */
#if FIXED_KH
#define DW_UNROLL _Pragma("GCC unroll 25")
#else
#define DW_UNROLL _Pragma("GCC unroll 3")
#endif

/* Bias already in acc; residual, activation and the store of n <= VL outputs. */
EC_INLINE void dw_out(const f32_dwconv_plane_args *a, ec_v acc, float *y, const float *res, size_t n,
                      const ec_act_kind KIND) {
  if (res && a->res_before_act) acc = ec_vadd(acc, n == EC_VL ? ec_vld(res) : ec_vld_n(res, n));
  acc = ec_vact_k(KIND, a->act, acc);
  if (res && !a->res_before_act) acc = ec_vadd(acc, n == EC_VL ? ec_vld(res) : ec_vld_n(res, n));
  if (n == EC_VL) ec_vst(y, acc); /* masked stores are slow on some cores (AMD's vmaskmovps) */
  else ec_vst_n(y, acc, n);
}

/* Outputs ow..ow+n-1 of row oh from input rows at r0 (and of row oh+1 from r1 when TWO): three
 * partial sums each, so 6 FMA chains are in flight; full = full-width loads stay in the rows. */
EC_INLINE void dw_vec(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, const float *r0, const float *r1,
                      size_t oh, size_t ow, size_t n, int full, const size_t *toff, const ec_v *wv,
                      const int TWO, const ec_act_kind KIND) {
  const size_t Wo = s->Wo, taps = (size_t)DW_KH * DW_KW;
  const ec_v bias = ec_vset1(a->bias);
  ec_v p0[3] = {bias, ec_vzero(), ec_vzero()}, p1[3] = {bias, ec_vzero(), ec_vzero()};
  if (full) {
DW_UNROLL
    for (size_t t = 0; t < taps; t++) {
      p0[t % 3] = ec_vfma(p0[t % 3], ec_vld(r0 + toff[t] + ow), wv[t]);
      if (TWO) p1[t % 3] = ec_vfma(p1[t % 3], ec_vld(r1 + toff[t] + ow), wv[t]);
    }
  } else {
DW_UNROLL
    for (size_t t = 0; t < taps; t++) {
      p0[t % 3] = ec_vfma(p0[t % 3], ec_vld_n(r0 + toff[t] + ow, n), wv[t]);
      if (TWO) p1[t % 3] = ec_vfma(p1[t % 3], ec_vld_n(r1 + toff[t] + ow, n), wv[t]);
    }
  }
  const size_t o0 = oh * Wo + ow;
  dw_out(a, ec_vadd(ec_vadd(p0[0], p0[1]), p0[2]), a->y + o0, a->res ? a->res + o0 : NULL, n, KIND);
  if (TWO) dw_out(a, ec_vadd(ec_vadd(p1[0], p1[1]), p1[2]), a->y + o0 + Wo, a->res ? a->res + o0 + Wo : NULL, n, KIND);
}

/* Output rows oh0..oh1-1, two at a time (independent sums to hide FMA latency). */
EC_INLINE void dw_rows(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, const float *xp, size_t pitch,
                       size_t wq, size_t oh0, size_t oh1, const size_t *toff, const ec_v *wv,
                       const ec_act_kind KIND) {
  const size_t Wo = s->Wo, room = wq - s->WOFF; /* full-width loads fit while ow + VL <= room */
  size_t oh = oh0;
  for (; oh + 2 <= oh1; oh += 2) {
    const float *r0 = xp + (oh - oh0) * pitch;
    for (size_t ow = 0; ow < Wo; ow += EC_VL)
      dw_vec(s, a, r0, r0 + pitch, oh, ow, EC_MIN((size_t)EC_VL, Wo - ow), ow + EC_VL <= room, toff, wv, 1, KIND);
  }
  if (oh < oh1) {
    const float *r0 = xp + (oh - oh0) * pitch;
    for (size_t ow = 0; ow < Wo; ow += EC_VL)
      dw_vec(s, a, r0, r0, oh, ow, EC_MIN((size_t)EC_VL, Wo - ow), ow + EC_VL <= room, toff, wv, 0, KIND);
  }
}

/* Stride 2 along rows (where dw_s2v below does not run: NEON, SH != 2, dilation, AVX2's wider rows): bands of
 * input rows are split into their two column phases in registers (ec_vuzp) straight from the raw plane into the
 * thread's row buffer a->rows, [row][phase][P], L1-resident and reused by every plane; dw_rows then reads it like
 * the phase-packed plane. A scalar phase pack through the plane's scratch cost more than the FMAs on small strided
 * maps. Stores are whole vectors only (masked stores are slow on some cores) and never touch the padding columns,
 * which the first plane of the layer zeroes for all. */
#define DW_S2_BUF F32_DWCONV_ROWS
typedef struct {
  size_t Q;          /* phase-row floats dw_rows reads: full-width loads never leave them */
  size_t oe, oo, pe; /* first index of the even / odd input columns; phase of the even ones */
  size_t ne, no;     /* even / odd input columns kept (those past Q are never read) */
  size_t P;          /* phase-row pitch: Q and the whole-vector stores that fill it */
} dw_s2_rows;

EC_INLINE dw_s2_rows dw_s2_layout(const f32_dwconv_shape *s) {
  /* input column c is padded column c + PL: even columns go to phase PL % 2 from index PL / 2,
   * odd ones to the other phase from (PL + 1) / 2 */
  dw_s2_rows L;
  L.Q = EC_ROUND_UP(s->Wo, (size_t)EC_VL) + s->WOFF;
  L.pe = s->PL % 2, L.oe = EC_MIN(s->PL / 2, L.Q), L.oo = EC_MIN((s->PL + 1) / 2, L.Q);
  L.ne = EC_MIN((s->W + 1) / 2, L.Q - L.oe), L.no = EC_MIN(s->W / 2, L.Q - L.oo);
  L.P = EC_ROUND_UP(EC_MAX(L.oo + EC_ROUND_UP(EC_MAX(L.ne, L.no), (size_t)EC_VL), L.Q) + EC_VL, (size_t)EC_VL);
  return L;
}
EC_INLINE int dw_s2_fits(const f32_dwconv_shape *s) {
  return s->SW == 2 && ((s->KH - 1) * s->DH + 1) * 2 * dw_s2_layout(s).P <= DW_S2_BUF;
}

/* Padded rows ih0 .. ih0+n-1 of the plane into buf as [row][phase][P]. */
EC_INLINE void dw_s2_stage(const f32_dwconv_shape *s, const dw_s2_rows *L, const float *x, float *buf,
                           size_t ih0, size_t n) {
  const size_t W = s->W, P = L->P, m_end = EC_MAX(L->ne, L->no);
  for (size_t i = 0; i < n; i++) {
    float *pr = buf + i * 2 * P;
    const ptrdiff_t r = (ptrdiff_t)(ih0 + i) - (ptrdiff_t)s->PT;
    if (r < 0 || r >= (ptrdiff_t)s->H) {
      for (size_t q = 0; q < 2 * P; q += EC_VL) ec_vst(pr + q, ec_vzero());
      continue;
    }
    float *de = pr + L->pe * P, *dod = pr + (1 - L->pe) * P;
    const float *src = x + (size_t)r * W;
    for (size_t m = 0; m < m_end; m += EC_VL) { /* lanes past the row's end load as zeros: right padding */
      ec_v lo, hi, e, o;
      if (2 * (m + EC_VL) <= W) {
        lo = ec_vld(src + 2 * m), hi = ec_vld(src + 2 * m + EC_VL);
      } else {
        const size_t left = W - 2 * m;
        lo = ec_vld_n(src + 2 * m, EC_MIN(left, (size_t)EC_VL));
        hi = left > EC_VL ? ec_vld_n(src + 2 * m + EC_VL, left - EC_VL) : ec_vzero();
      }
      ec_vuzp(lo, hi, &e, &o);
      ec_vst(de + L->oe + m, e);
      ec_vst(dod + L->oo + m, o);
    }
  }
}

EC_INLINE void dw_s2(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, const ec_v *wv,
                     const ec_act_kind KIND) {
  const dw_s2_rows L = dw_s2_layout(s);
  const size_t P = L.P, SH = s->SH, DH = s->DH, kh_n = DW_KH, kw_n = DW_KW;
  const size_t win = (kh_n - 1) * DH + 1, band = (DW_S2_BUF / (2 * P) - win) / SH + 1; /* output rows per fill */
  float *buf = a->rows;
  if (!*a->rows_zeroed) { /* the padding columns of every row the bands use */
    const size_t used = ((band - 1) * SH + win) * 2 * P;
    for (size_t q = 0; q < used; q += EC_VL) ec_vst(buf + q, ec_vzero());
    *a->rows_zeroed = 1;
  }
  size_t toff[DW_TAPS_MAX];
  for (size_t kh = 0; kh < kh_n; kh++)
    for (size_t kw = 0; kw < kw_n; kw++)
      toff[kh * kw_n + kw] = (kh * DH * 2 + (kw * s->DW) % 2) * P + (kw * s->DW) / 2;
  for (size_t oh0 = 0; oh0 < s->Ho; oh0 += band) {
    const size_t oh1 = EC_MIN(oh0 + band, s->Ho);
    dw_s2_stage(s, &L, a->x, buf, oh0 * SH, (oh1 - oh0 - 1) * SH + win);
    dw_rows(s, a, buf, SH * 2 * P, L.Q, oh0, oh1, toff, wv, KIND);
  }
}

/* Stride 1: padded rows ih0 .. ih0+n-1 of the plane into dst at `pitch` floats a row (>= the padded width), with
 * vector copies (rows are short; libc calls per row would cost more than the copy). Columns past the padded row
 * are zeroed up to the pitch. */
EC_INLINE void dw_pad_rows(const f32_dwconv_shape *s, const float *x, float *dst, size_t ih0, size_t n,
                           size_t pitch) {
  const size_t W = s->W, PL = s->PL;
  const size_t hi = EC_MIN(pitch, PL + W), w = hi > PL ? hi - PL : 0;
  for (size_t i = 0; i < n; i++) {
    float *d = dst + i * pitch;
    const ptrdiff_t r = (ptrdiff_t)(ih0 + i) - (ptrdiff_t)s->PT;
    size_t q = 0;
    if (r < 0 || r >= (ptrdiff_t)s->H) {
      for (; q + EC_VL <= pitch; q += EC_VL) ec_vst(d + q, ec_vzero());
      if (q < pitch) ec_vst_n(d + q, ec_vzero(), pitch - q);
      continue;
    }
    const float *src = x + (size_t)r * W;
    /* zeros first, in whole vectors inside the pitch (masked stores are slow on some cores), the copy over them */
    for (size_t z = 0; z < PL; z += EC_VL)
      if (z + EC_VL <= pitch) ec_vst(d + z, ec_vzero());
      else ec_vst_n(d + z, ec_vzero(), pitch - z);
    for (size_t z = hi / EC_VL * EC_VL; z < pitch; z += EC_VL)
      if (z + EC_VL <= pitch) ec_vst(d + z, ec_vzero());
      else ec_vst_n(d + z, ec_vzero(), pitch - z);
    for (; q + EC_VL <= w; q += EC_VL) ec_vst(d + PL + q, ec_vld(src + q));
    if (q < w) ec_vst_n(d + PL + q, ec_vld_n(src + q, w - q), w - q);
  }
}

EC_INLINE void dw_pad_plane(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a) {
  dw_pad_rows(s, a->x, a->xp, 0, s->Hp, s->Wq);
  for (size_t z = 0; z < F32_DWCONV_SLACK; z += EC_VL) ec_vst(a->xp + s->Hp * s->Wq + z, ec_vzero());
}

/* Stride 1 along rows, a plane larger than the row buffer: output rows per band of padded input rows that the
 * buffer holds (0: fewer than 4, the plane goes to the scratch whole). A whole padded copy of a big plane went
 * out to L2/L3 and came back; a band is read back from L1 (32ch 112x112 on these unaligned rows, Zen 5: 0.149 ->
 * 0.137 ms; the x86 kernels now take dw_s1a there). */
EC_INLINE size_t dw_s1_band(const f32_dwconv_shape *s) {
  const size_t cap = F32_DWCONV_ROWS / s->Wq, win = (s->KH - 1) * s->DH + 1;
  const size_t band = cap < win ? 0 : (cap - win) / s->SH + 1;
  return band >= 4 ? band : 0;
}

EC_INLINE void dw_s1_bands(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, size_t band,
                           const size_t *toff, const ec_v *wv, const ec_act_kind KIND) {
  const size_t SH = s->SH, win = (DW_KH - 1) * s->DH + 1;
  for (size_t oh0 = 0; oh0 < s->Ho; oh0 += band) {
    const size_t oh1 = EC_MIN(oh0 + band, s->Ho);
    dw_pad_rows(s, a->x, a->rows, oh0 * SH, (oh1 - oh0 - 1) * SH + win, s->Wq);
    dw_rows(s, a, a->rows, SH * s->Wq, s->Wq, oh0, oh1, toff, wv, KIND);
  }
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
DW_UNROLL
    for (size_t t = 0; t < taps; t++) p[t % 3] = ec_vfma(p[t % 3], ec_vld(a->xp + toff[t] + j), wv[t]);
    ec_vst(tile + j, ec_vadd(ec_vadd(p[0], p[1]), p[2]));
  }
  for (size_t oh = 0; oh < s->Ho; oh++)
    ec_epi_row(tile + oh * Wq, a->y + oh * s->Wo, s->Wo, a->bias, a->res ? a->res + oh * s->Wo : NULL,
               a->res_before_act, a->act);
}

/* Stride 1 along rows, no dilation, a fixed window: bands of padded rows in the row buffer at a pitch of whole
 * vectors, so each input row gives two aligned loads per output vector and its KW taps are lane shifts of them
 * (ec_vext), not KW unaligned loads (most of which split across cache lines: 23 cycles an output vector on Zen 5,
 * 8ch 112x112, against ~10). DW_R output rows at a time share each input row's shifted vectors. x86 only: a NEON
 * load splits only where it crosses a line (3 in 16 offsets) and on Cortex-A72 `ext` issues on the FMA pipes,
 * so there the unaligned loads stay until a board measures both. */
#if FIXED_KW && !defined(EC_SIMD_NEON_H) /* x86 only: see above */
#define DW_R 4
EC_INLINE size_t dw_s1a_pitch(const f32_dwconv_shape *s) { return EC_ROUND_UP(s->Wo, (size_t)EC_VL) + EC_VL; }

/* Output rows per band (0: the path does not apply). */
EC_INLINE size_t dw_s1a_band(const f32_dwconv_shape *s) {
  if (s->SW != 1 || s->DW != 1 || s->DH != 1 || (s->SH != 1 && s->SH != 2) || s->Wo < EC_VL || DW_KW > 5)
    return 0;
  const size_t cap = F32_DWCONV_ROWS / dw_s1a_pitch(s), band = cap < DW_KH ? 0 : (cap - DW_KH) / s->SH + 1;
  return band >= EC_MIN(s->Ho, (size_t)DW_R) ? band : 0;
}

/* NR output rows from oh (DW_R, 2 at stride 2 down, 1 for a band's last rows: few bodies to compile), every
 * output vector; r: the buffer row of their first input row. */
EC_INLINE void dw_s1a_block(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, const float *r, size_t P,
                            size_t oh, const ec_v *wv, const int NR, const size_t SH) {
  const size_t Wo = s->Wo;
  const ec_v bias = ec_vset1(a->bias);
  ec_v wk[DW_KH * DW_KW]; /* a local copy: held in registers (read through wv, they were reloaded every FMA) */
#pragma GCC unroll 25
  for (int t = 0; t < DW_KH * DW_KW; t++) wk[t] = wv[t];
  float *y = a->y + oh * Wo; /* locals: through a, every store reloaded them */
  const float *res = a->res ? a->res + oh * Wo : NULL;
  const int rba = a->res_before_act;
  const ec_act act = a->act;
  for (size_t ow = 0; ow < Wo; ow += EC_VL) {
    ec_v acc[DW_R];
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) acc[i] = bias;
#pragma GCC unroll 16
    for (size_t j = 0; j < (size_t)(NR - 1) * SH + DW_KH; j++) { /* input row j feeds output row (j - kh) / SH */
      const float *rj = r + j * P + ow;
      const ec_v v0 = ec_vld(rj), v1 = ec_vld(rj + EC_VL);
      ec_v sh[5]; /* the taps of this row: shifts of v0:v1 */
      sh[0] = v0;
      if (DW_KW > 1) sh[1] = ec_vext1(v0, v1);
      if (DW_KW > 2) sh[2] = ec_vext2(v0, v1);
      if (DW_KW > 3) sh[3] = ec_vext3(v0, v1);
      if (DW_KW > 4) sh[4] = ec_vext4(v0, v1);
#pragma GCC unroll 8
      for (size_t kh = 0; kh < DW_KH; kh++) {
        if (j < kh || (j - kh) % SH || (j - kh) / SH >= (size_t)NR) continue;
        const size_t i = (j - kh) / SH;
#pragma GCC unroll 8
        for (int kw = 0; kw < DW_KW; kw++) acc[i] = ec_vfma(acc[i], sh[kw], wk[kh * DW_KW + kw]);
      }
    }
    const size_t n = EC_MIN((size_t)EC_VL, Wo - ow);
    if (!res && n == EC_VL) { /* the common case without a branch per row */
#pragma GCC unroll 4
      for (int i = 0; i < NR; i++) ec_vst(y + (size_t)i * Wo + ow, ec_vact_lean(act, acc[i]));
      continue;
    }
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) {
      ec_v v = acc[i];
      const size_t o = (size_t)i * Wo + ow;
      if (res && rba) v = ec_vadd(v, n == EC_VL ? ec_vld(res + o) : ec_vld_n(res + o, n));
      v = ec_vact_lean(act, v);
      if (res && !rba) v = ec_vadd(v, n == EC_VL ? ec_vld(res + o) : ec_vld_n(res + o, n));
      if (n == EC_VL) ec_vst(y + o, v); /* masked stores are slow on some cores */
      else ec_vst_n(y + o, v, n);
    }
  }
}

EC_INLINE void dw_s1a_rows(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, const float *buf, size_t P,
                           size_t oh0, size_t oh1, const ec_v *wv, const size_t SH) {
  size_t oh = oh0;
  if (SH == 1)
    for (; oh + DW_R <= oh1; oh += DW_R) dw_s1a_block(s, a, buf + (oh - oh0) * SH * P, P, oh, wv, DW_R, SH);
  else /* stride 2 down shares one row between two outputs: pairs (a quarter of the code of fours to compile) */
    for (; oh + 2 <= oh1; oh += 2) dw_s1a_block(s, a, buf + (oh - oh0) * SH * P, P, oh, wv, 2, SH);
  for (; oh < oh1; oh++) dw_s1a_block(s, a, buf + (oh - oh0) * SH * P, P, oh, wv, 1, SH);
}

/* The activation's kind at run time (ec_vact_lean: a predictable branch per output vector): one body per SH, not
 * one per kind as the other paths (a 3x3 / 5x5 kernel file compiled in 7.2-8.1 s, now 4.1-5.1; the same speed). */
EC_INLINE void dw_s1a(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, size_t band, const ec_v *wv) {
  const size_t P = dw_s1a_pitch(s), SH = s->SH;
  for (size_t oh0 = 0; oh0 < s->Ho; oh0 += band) {
    const size_t oh1 = EC_MIN(oh0 + band, s->Ho);
    dw_pad_rows(s, a->x, a->rows, oh0 * SH, (oh1 - oh0 - 1) * SH + DW_KH, P);
    if (SH == 1) dw_s1a_rows(s, a, a->rows, P, oh0, oh1, wv, 1); /* SH a constant: the taps' rows unroll */
    else dw_s1a_rows(s, a, a->rows, P, oh0, oh1, wv, 2);
  }
}

/* Stride 2 both ways, no dilation, a fixed window: output rows in strips of a vector. Each input row's strip is two
 * loads split into its column phases in registers (ec_vuzp); the taps are those phases or their one-lane shifts,
 * the lane shifted in read from the row. No row buffer, so no store is read back (dw_s2 staged the phases through
 * it: 11 cycles an input row, and its unaligned taps 22 an output vector, Zen 5). A column offset c = kw - PL reads
 * the even phase shifted by c / 2 lanes (c even) or the odd one by (c - 1) / 2: shifts of -1, 0, +1 only. */
EC_INLINE int dw_s2v_ok(const f32_dwconv_shape *s) {
#if EC_VL == 8 /* AVX2: a phase split takes 4 shuffles (2 on AVX-512) and 5x5 taps and weights spill 16 registers:
                * the staged split stayed as fast on rows past 2 vectors (3x3) or 1 (5x5), Zen 5 */
  if (s->Wo > (DW_KH * DW_KW <= 9 ? 2 : 1) * (size_t)EC_VL) return 0;
#endif
  return s->SW == 2 && s->SH == 2 && s->DW == 1 && s->DH == 1 && s->PL <= 2 && (size_t)DW_KW <= s->PL + 4;
}

/* The KW taps of raw row r for the strip of outputs from column j0 (zeros where r is a padding row). PL a
 * constant, so each tap's phase and shift are. WHOLE: r is in the image and the strip's two vectors are loaded
 * whole (dw_s2v_strip says when lanes past the row's end feed no output); else checks and masked loads. */
EC_INLINE void dw_s2v_taps(const f32_dwconv_shape *s, const float *x, ptrdiff_t r, size_t j0, ec_v *t, const int PL,
                           const int WHOLE) {
  const size_t W = s->W, c0 = 2 * j0; /* the strip's first input column */
  if (!WHOLE && (r < 0 || r >= (ptrdiff_t)s->H)) {
#pragma GCC unroll 8
    for (int kw = 0; kw < DW_KW; kw++) t[kw] = ec_vzero();
    return;
  }
  const float *src = x + (size_t)r * W + c0;
  ec_v lo, hi;
  if (WHOLE) {
    lo = ec_vld(src), hi = ec_vld(src + EC_VL);
  } else {
    const size_t n = c0 < W ? W - c0 : 0;
    lo = n >= EC_VL ? ec_vld(src) : n ? ec_vld_n(src, n) : ec_vzero();
    hi = n >= 2 * EC_VL ? ec_vld(src + EC_VL) : n > EC_VL ? ec_vld_n(src + EC_VL, n - EC_VL) : ec_vzero();
  }
  ec_v ph[2];
  ec_vuzp(lo, hi, &ph[0], &ph[1]);
#pragma GCC unroll 8
  for (int kw = 0; kw < DW_KW; kw++) {
    const int c = kw - PL, p = c & 1; /* c odd: the odd phase (two's complement: -1 & 1 == 1) */
    const int sh = (c - p) / 2;
    if (sh < 0) { /* lane 0: column c0 - 2 + p, left padding in the first strip */
      const size_t col = c0 + (size_t)p - 2;
      t[kw] = ec_vup1(ph[p], c0 && col < W ? ec_vset1(src[p - 2]) : ec_vzero());
    } else if (sh > 0) { /* lane VL - 1: column c0 + 2 VL + p, right padding past the row */
      t[kw] = ec_vext1(ph[p], c0 + 2 * EC_VL + (size_t)p < W ? ec_vset1(src[2 * EC_VL + p]) : ec_vzero());
    } else {
      t[kw] = ph[p];
    }
  }
}

/* Output rows oh0 .. oh1-1 of the strip from column j0 (nv of its lanes outputs): the window's taps roll down two
 * input rows an output row. The rows read whole are those of the image whose two vectors at the strip lie in the
 * plane, and, where they run past the row's end, only when no output lane reads a column past it (whose lanes
 * then hold the next row, not the right padding's zeros). Without a residual a row of a partial strip is stored
 * whole where the vector ends in the plane: its spare lanes land on outputs stored after it (dw_s2v_pl). */
EC_INLINE void dw_s2v_strip(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, const float *x, float *y,
                            ec_act act, size_t j0, size_t nv, size_t oh0, size_t oh1, const ec_v *wk, ec_v bias,
                            const int PL) {
  const size_t W = s->W, H = s->H, Wo = s->Wo, Ho = s->Ho, PT = s->PT, c0 = 2 * j0;
  size_t hw = 0; /* image rows 0 .. hw-1 are read whole at this strip */
  if (c0 + 2 * EC_VL <= W) hw = H;
  else if (2 * (j0 + nv - 1) + (size_t)DW_KW < W + (size_t)PL + 1 && H * W >= c0 + 2 * EC_VL)
    hw = EC_MIN(H, (H * W - c0 - 2 * EC_VL) / W + 1);
  /* output rows whose two new input rows 2oh - PT + KH - 2 and + KH - 1 are both in 0 .. hw-1 */
  const size_t lo_n = PT + 2 > (size_t)DW_KH ? PT + 2 - DW_KH : 0;
  const size_t hi_n = hw + PT + 1 > (size_t)DW_KH ? hw + PT + 1 - DW_KH : 0;
  const size_t f0 = EC_MAX(oh0, (lo_n + 1) / 2), f1 = EC_MAX(f0, EC_MIN(oh1, (hi_n + 1) / 2));
  const size_t ws = nv == EC_VL ? Ho : Ho * Wo >= j0 + EC_VL ? (Ho * Wo - j0 - EC_VL) / Wo + 1 : 0; /* whole stores */
  ec_v t[DW_KH][DW_KW];
#pragma GCC unroll 8
  for (int kh = 0; kh + 2 < DW_KH; kh++) /* moved up by the first row */
    dw_s2v_taps(s, x, 2 * (ptrdiff_t)oh0 - (ptrdiff_t)PT + kh, j0, t[kh + 2], PL, 0);
  for (size_t oh = oh0; oh < oh1; oh++) {
#pragma GCC unroll 8
    for (int kh = 0; kh + 2 < DW_KH; kh++)
#pragma GCC unroll 8
      for (int kw = 0; kw < DW_KW; kw++) t[kh][kw] = t[kh + 2][kw];
    const ptrdiff_t rb = 2 * (ptrdiff_t)oh - (ptrdiff_t)PT;
    if (oh >= f0 && oh < f1) {
      dw_s2v_taps(s, x, rb + DW_KH - 2, j0, t[DW_KH - 2], PL, 1);
      dw_s2v_taps(s, x, rb + DW_KH - 1, j0, t[DW_KH - 1], PL, 1);
    } else {
      dw_s2v_taps(s, x, rb + DW_KH - 2, j0, t[DW_KH - 2], PL, 0);
      dw_s2v_taps(s, x, rb + DW_KH - 1, j0, t[DW_KH - 1], PL, 0);
    }
    ec_v p[3] = {bias, ec_vzero(), ec_vzero()}; /* three chains: one FMA chain a row was its latency */
#pragma GCC unroll 8
    for (int kh = 0; kh < DW_KH; kh++)
#pragma GCC unroll 8
      for (int kw = 0; kw < DW_KW; kw++) p[kw % 3] = ec_vfma(p[kw % 3], t[kh][kw], wk[kh * DW_KW + kw]);
    ec_v acc = ec_vadd(ec_vadd(p[0], p[1]), p[2]);
    float *yo = y + oh * Wo + j0;
    if (!a->res) {
      acc = ec_vact_lean(act, acc);
      if (oh < ws) ec_vst(yo, acc);
      else ec_vst_n(yo, acc, nv);
      continue;
    }
    const float *res = a->res + oh * Wo + j0;
    if (a->res_before_act) acc = ec_vadd(acc, ec_vld_n(res, nv));
    acc = ec_vact_lean(act, acc);
    if (!a->res_before_act) acc = ec_vadd(acc, ec_vld_n(res, nv));
    ec_vst_n(yo, acc, nv);
  }
}

/* Bands of output rows whose input rows stay in L1 across the strips; in each the partial last strip first, so its
 * whole stores' spare lanes land on the next row's first strip, stored after it. x, y and act are locals: read
 * through a, they were reloaded after every store. */
EC_INLINE void dw_s2v_pl(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, const ec_v *wv, const int PL) {
  const size_t Wo = s->Wo, Ho = s->Ho, ns = EC_DIV_UP(Wo, (size_t)EC_VL), jl = (ns - 1) * EC_VL;
  const size_t in_rows = F32_DWCONV_ROWS / s->W; /* 16 KB of input rows a band */
  const size_t band = ns == 1 || in_rows < (size_t)DW_KH + 2 ? Ho : EC_MAX((in_rows - DW_KH) / 2 + 1, (size_t)2);
  ec_v wk[DW_KH * DW_KW];
#pragma GCC unroll 25
  for (int t = 0; t < DW_KH * DW_KW; t++) wk[t] = wv[t];
  const ec_v bias = ec_vset1(a->bias);
  const float *x = a->x;
  float *y = a->y;
  const ec_act act = a->act;
  for (size_t oh0 = 0; oh0 < Ho; oh0 += band) {
    const size_t oh1 = EC_MIN(oh0 + band, Ho);
    dw_s2v_strip(s, a, x, y, act, jl, Wo - jl, oh0, oh1, wk, bias, PL);
    for (size_t j0 = 0; j0 < jl; j0 += EC_VL) dw_s2v_strip(s, a, x, y, act, j0, EC_VL, oh0, oh1, wk, bias, PL);
  }
}

EC_INLINE void dw_s2v(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, const ec_v *wv) {
  if (s->PL == 0) dw_s2v_pl(s, a, wv, 0);
  else if (s->PL == 1) dw_s2v_pl(s, a, wv, 1);
  else dw_s2v_pl(s, a, wv, 2);
}
#else
EC_INLINE size_t dw_s1a_band(const f32_dwconv_shape *s) {
  (void)s;
  return 0;
}
EC_INLINE void dw_s1a(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, size_t band, const ec_v *wv) {
  (void)s, (void)a, (void)band, (void)wv;
}
EC_INLINE int dw_s2v_ok(const f32_dwconv_shape *s) {
  (void)s;
  return 0;
}
EC_INLINE void dw_s2v(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, const ec_v *wv) {
  (void)s, (void)a, (void)wv;
}
#endif

/* The plane's rows: stride 2 from banded phase splits (s2), stride 1 from bands of padded rows (band > 0), else
 * from the phase-packed plane in xp (the aligned stride-1 path, dw_s1a, is taken before). */
EC_INLINE void dw_plane(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, int s2, size_t band,
                        const size_t *toff, const ec_v *wv, const ec_act_kind KIND) {
  if (s2) dw_s2(s, a, wv, KIND);
  else if (band) dw_s1_bands(s, a, band, toff, wv, KIND);
  else dw_rows(s, a, a->xp, s->SH * s->Wq, s->Wq, 0, s->Ho, toff, wv, KIND);
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
  for (size_t t = 0; t < kh_n * kw_n; t++) wv[t] = ec_vset1(a->w[t]);
  const size_t aband = dw_s1a_band(s);
  if (aband) {
    dw_s1a(s, a, aband, wv);
    return;
  }
  if (dw_s2v_ok(s)) {
    dw_s2v(s, a, wv);
    return;
  }
  const int s2 = dw_s2_fits(s);
  if (!s2) /* (dw_s2 has its own offsets; a division per tap costs per plane) */
    for (size_t kh = 0; kh < kh_n; kh++)
      for (size_t kw = 0; kw < kw_n; kw++) {
        const size_t c = kw * s->DW, ph = s->SW == 1 ? 0 : c % s->SW, off = s->SW == 1 ? c : c / s->SW;
        toff[kh * kw_n + kw] = (ph * Hp + kh * DH) * Wq + off;
      }
  f32_dwconv_plane_args l1 = *a; /* stride 1: the padded plane in the L1-resident row buffer when it fits */
  size_t band = 0;
  if (s->SW == 1) {
    if (Hp * Wq + F32_DWCONV_SLACK <= F32_DWCONV_ROWS) l1.xp = a->rows, a = &l1;
    else band = dw_s1_band(s); /* else bands, padded into the row buffer as the rows go */
    if (!band) dw_pad_plane(s, a);
    if (!band && s->SH == 1 && s->Ho * Wq <= DW_FLAT_MAX && EC_VL + (kw_n - 1) * s->DW <= F32_DWCONV_SLACK) {
      dw_flat(s, a, toff, wv);
      return;
    }
  } else if (!s2) {
    f32_dwconv_pack_phases(s, a->x, a->xp);
  }
  switch (a->act.kind) {
  case EC_ACT_NONE: dw_plane(s, a, s2, band, toff, wv, EC_ACT_NONE); break;
  case EC_ACT_RELU: dw_plane(s, a, s2, band, toff, wv, EC_ACT_RELU); break;
  case EC_ACT_CLIP: dw_plane(s, a, s2, band, toff, wv, EC_ACT_CLIP); break;
  case EC_ACT_HARD_SWISH: dw_plane(s, a, s2, band, toff, wv, EC_ACT_HARD_SWISH); break;
  default: dw_plane(s, a, s2, band, toff, wv, a->act.kind);
  }
}
#undef DW_KH
#undef DW_KW
#undef DW_UNROLL
