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

/* Stride 2 along rows: bands of input rows are split into their two column phases in registers
 * (ec_vuzp) straight from the raw plane into the thread's row buffer a->rows, [row][phase][P],
 * L1-resident and reused by every plane; dw_rows then reads it like the phase-packed plane. A
 * scalar phase pack through the plane's scratch cost more than the FMAs on small strided maps.
 * Stores are whole vectors only (masked stores are slow on some cores) and never touch the
 * padding columns, which the first plane of the layer zeroes for all. */
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
DW_UNROLL
    for (size_t t = 0; t < taps; t++) p[t % 3] = ec_vfma(p[t % 3], ec_vld(a->xp + toff[t] + j), wv[t]);
    ec_vst(tile + j, ec_vadd(ec_vadd(p[0], p[1]), p[2]));
  }
  for (size_t oh = 0; oh < s->Ho; oh++)
    ec_epi_row(tile + oh * Wq, a->y + oh * s->Wo, s->Wo, a->bias, a->res ? a->res + oh * s->Wo : NULL,
               a->res_before_act, a->act);
}

/* The plane's rows: stride 2 from banded phase splits (s2), else from the phase-packed plane in xp. */
EC_INLINE void dw_plane(const f32_dwconv_shape *s, const f32_dwconv_plane_args *a, int s2, const size_t *toff,
                        const ec_v *wv, const ec_act_kind KIND) {
  if (s2) dw_s2(s, a, wv, KIND);
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
  const int s2 = dw_s2_fits(s);
  if (!s2) /* (dw_s2 has its own offsets; a division per tap costs per plane) */
    for (size_t kh = 0; kh < kh_n; kh++)
      for (size_t kw = 0; kw < kw_n; kw++) {
        const size_t c = kw * s->DW, ph = s->SW == 1 ? 0 : c % s->SW, off = s->SW == 1 ? c : c / s->SW;
        toff[kh * kw_n + kw] = (ph * Hp + kh * DH) * Wq + off;
      }
  f32_dwconv_plane_args l1 = *a; /* stride 1: the padded plane in the L1-resident row buffer when it fits */
  if (s->SW == 1 && Hp * Wq + F32_DWCONV_SLACK <= F32_DWCONV_ROWS) l1.xp = a->rows, a = &l1;
  if (s->SW == 1) {
    dw_pad_plane(s, a);
    if (s->SH == 1 && s->Ho * Wq <= DW_FLAT_MAX && EC_VL + (kw_n - 1) * s->DW <= F32_DWCONV_SLACK) {
      dw_flat(s, a, toff, wv);
      return;
    }
  } else if (!s2) {
    f32_dwconv_pack_phases(s, a->x, a->xp);
  }
  switch (a->act.kind) {
  case EC_ACT_NONE: dw_plane(s, a, s2, toff, wv, EC_ACT_NONE); break;
  case EC_ACT_RELU: dw_plane(s, a, s2, toff, wv, EC_ACT_RELU); break;
  case EC_ACT_CLIP: dw_plane(s, a, s2, toff, wv, EC_ACT_CLIP); break;
  case EC_ACT_HARD_SWISH: dw_plane(s, a, s2, toff, wv, EC_ACT_HARD_SWISH); break;
  default: dw_plane(s, a, s2, toff, wv, a->act.kind);
  }
}
#undef DW_KH
#undef DW_KW
#undef DW_UNROLL
