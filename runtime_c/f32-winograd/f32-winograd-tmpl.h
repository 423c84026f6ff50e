/* Winograd F(WG_M,3) input/output transforms over the ec_v vocabulary of the including file, which
 * defines WG_M (2, 4 or 6), FN_IN and FN_OUT. Input lanes are consecutive tiles of one tile row,
 * output lanes consecutive output channels of one tile, so every load and store of V and M is a
 * whole vector; the matrices are the ones of f32-winograd-scalar-tmpl.h (and
 * codegen/ops/winograd.py), written out as FMA chains. */
#define WG_A (WG_M + 2)

EC_INLINE ec_v wg_sub(ec_v a, ec_v b) { return ec_vsub(a, b); }
EC_INLINE ec_v wg_fma(ec_v acc, ec_v x, float k) { return ec_vfma(acc, x, ec_vset1(k)); }

/* o = B^T d (one dimension) */
EC_INLINE void wg_bt(const ec_v *d, ec_v *o) {
#if WG_M == 2
  o[0] = wg_sub(d[0], d[2]);
  o[1] = ec_vadd(d[1], d[2]);
  o[2] = wg_sub(d[2], d[1]);
  o[3] = wg_sub(d[1], d[3]);
#elif WG_M == 4
  o[0] = wg_fma(wg_fma(d[4], d[0], 4.0f), d[2], -5.0f);
  const ec_v s12 = ec_vadd(d[1], d[2]), s34 = ec_vadd(d[3], d[4]);
  o[1] = wg_fma(s34, s12, -4.0f);
  const ec_v m12 = wg_sub(d[1], d[2]), m43 = wg_sub(d[4], d[3]);
  o[2] = wg_fma(m43, m12, 4.0f);
  const ec_v m42 = wg_sub(d[4], d[2]), m31 = wg_sub(d[3], d[1]);
  o[3] = wg_fma(m42, m31, 2.0f);
  o[4] = wg_fma(m42, m31, -2.0f);
  o[5] = wg_fma(wg_fma(d[5], d[1], 4.0f), d[3], -5.0f);
#elif WG_M == 6
  o[0] = wg_fma(wg_sub(d[0], d[6]), wg_sub(d[4], d[2]), 5.25f);
  o[7] = wg_fma(wg_sub(d[7], d[1]), wg_sub(d[3], d[5]), 5.25f);
  ec_v p = wg_fma(ec_vadd(d[2], d[6]), d[4], -4.25f), q = wg_fma(ec_vadd(d[1], d[5]), d[3], -4.25f);
  o[1] = ec_vadd(p, q);
  o[2] = wg_sub(p, q);
  p = wg_fma(wg_fma(d[6], d[2], 0.25f), d[4], -1.25f);
  q = wg_fma(wg_fma(ec_vmul(d[1], ec_vset1(0.5f)), d[3], -2.5f), d[5], 2.0f);
  o[3] = ec_vadd(p, q);
  o[4] = wg_sub(p, q);
  p = wg_fma(wg_fma(d[6], d[2], 4.0f), d[4], -5.0f);
  q = wg_fma(wg_fma(ec_vmul(d[1], ec_vset1(2.0f)), d[3], -2.5f), d[5], 0.5f);
  o[5] = ec_vadd(p, q);
  o[6] = wg_sub(p, q);
#else
#error "WG_M must be 2, 4 or 6"
#endif
}

/* o = A^T d (one dimension): WG_A values -> WG_M */
EC_INLINE void wg_at(const ec_v *d, ec_v *o) {
#if WG_M == 2
  o[0] = ec_vadd(ec_vadd(d[0], d[1]), d[2]);
  o[1] = wg_sub(wg_sub(d[1], d[2]), d[3]);
#elif WG_M == 4
  const ec_v a = ec_vadd(d[1], d[2]), b = wg_sub(d[1], d[2]), c = ec_vadd(d[3], d[4]), e = wg_sub(d[3], d[4]);
  o[0] = ec_vadd(ec_vadd(d[0], a), c);
  o[1] = wg_fma(b, e, 2.0f);
  o[2] = wg_fma(a, c, 4.0f);
  o[3] = wg_fma(ec_vadd(b, d[5]), e, 8.0f);
#else
  const ec_v a1 = ec_vadd(d[1], d[2]), b1 = wg_sub(d[1], d[2]), a2 = ec_vadd(d[3], d[4]), b2 = wg_sub(d[3], d[4]);
  const ec_v a3 = ec_vadd(d[5], d[6]), b3 = wg_sub(d[5], d[6]);
  o[0] = ec_vadd(ec_vadd(d[0], a1), ec_vadd(a2, a3));
  o[1] = wg_fma(wg_fma(b1, b2, 2.0f), b3, 0.5f);
  o[2] = wg_fma(wg_fma(a1, a2, 4.0f), a3, 0.25f);
  o[3] = wg_fma(wg_fma(b1, b2, 8.0f), b3, 0.125f);
  o[4] = wg_fma(wg_fma(a1, a2, 16.0f), a3, 0.0625f);
  o[5] = wg_fma(wg_fma(ec_vadd(b1, d[7]), b2, 32.0f), b3, 0.03125f);
#endif
}

/* The row pass of an input chunk: t[r][j] = (B^T d)[r][j] -> B^T t B, WG_A outputs vs apart a row. */
EC_INLINE void wg_in_rows(ec_v t[WG_A][WG_A], float *v, size_t vs) {
#pragma GCC unroll 8
  for (int r = 0; r < WG_A; r++) {
    ec_v o[WG_A];
    wg_bt(t[r], o);
    float *vr = v + (size_t)(r * WG_A) * vs;
#pragma GCC unroll 8
    for (int c = 0; c < WG_A; c++) ec_vst(vr + (size_t)c * vs, o[c]); /* whole vectors, see F32_WINOGRAD_IN_DECL */
  }
}

/* EC_VL tiles (the lanes past a row's tail are discarded: see F32_WINOGRAD_IN_DECL). Columns first:
 * column j's WG_A values are one phase row apart (two base pointers and the row stride address
 * them all), then rows, whose WG_A outputs are vs apart; loading row by row (a pointer per
 * (i, j)) ran ~3x slower. */
EC_INLINE void wg_in_chunk(const float *p, size_t ps, size_t q, float *v, size_t vs) {
  ec_v t[WG_A][WG_A]; /* t[r][j] = (B^T d)[r][j] */
#pragma GCC unroll 8
  for (int j = 0; j < WG_A; j++) {
    const float *s = p + (size_t)(j % WG_M) * ps + (size_t)(j / WG_M);
    ec_v d[WG_A], o[WG_A];
#pragma GCC unroll 8
    for (int i = 0; i < WG_A; i++) d[i] = ec_vld(s + (size_t)i * q);
    wg_bt(d, o);
#pragma GCC unroll 8
    for (int r = 0; r < WG_A; r++) t[r][j] = o[r];
  }
  wg_in_rows(t, v, vs);
}

/* One chunk per call where runs are at most a GEMM strip (MR <= EC_VL on x86): a loop here made the
 * compiler hoist all 2*WG_A^2 addresses to the stack before the first chunk (~1.6x the time). */
static void wg_in_chunk_call(const float *p, size_t ps, size_t q, float *v, size_t vs) { wg_in_chunk(p, ps, q, v, vs); }

/* lane numbers: a vector spanning runs takes lane l from the last run whose first lane is <= l */
static const float wg_lane[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

/* EC_VL tiles from NS runs: run s's load starts at sp[s] (lane 0's position in that run's row, before
 * the run for s > 0) and fills lanes lo[s].. . One transform for the vector instead of one per run: a
 * 6-tile strip across two tile rows cost two whole transforms, its loads now twice and a blend each. */
EC_INLINE void wg_in_chunk_runs(int NS, const float *const *sp, const size_t *lo, size_t ps, size_t q, float *v,
                                size_t vs) {
  const ec_v lane = ec_vld(wg_lane);
  ec_v first[3];
#pragma GCC unroll 3
  for (int s = 1; s < NS; s++) first[s] = ec_vset1((float)lo[s]);
  ec_v t[WG_A][WG_A];
#pragma GCC unroll 8
  for (int j = 0; j < WG_A; j++) {
    const size_t o = (size_t)(j % WG_M) * ps + (size_t)(j / WG_M);
    ec_v d[WG_A], e[WG_A];
#pragma GCC unroll 8
    for (int i = 0; i < WG_A; i++) {
      d[i] = ec_vld(sp[0] + o + (size_t)i * q);
#pragma GCC unroll 3
      for (int s = 1; s < NS; s++) d[i] = ec_vsel_lt(lane, first[s], d[i], ec_vld(sp[s] + o + (size_t)i * q));
    }
    wg_bt(d, e);
#pragma GCC unroll 8
    for (int r = 0; r < WG_A; r++) t[r][j] = e[r];
  }
  wg_in_rows(t, v, vs);
}
static void wg_in_chunk2(const float *const *sp, const size_t *lo, size_t ps, size_t q, float *v, size_t vs) {
  wg_in_chunk_runs(2, sp, lo, ps, q, v, vs);
}
static void wg_in_chunk3(const float *const *sp, const size_t *lo, size_t ps, size_t q, float *v, size_t vs) {
  wg_in_chunk_runs(3, sp, lo, ps, q, v, vs);
}

F32_WINOGRAD_IN_DECL(FN_IN) {
  if (nr == 1 && len[0] <= EC_VL) {
    wg_in_chunk(p + src[0], ps, q, v, vs);
    return;
  }
  size_t n = 0;
  for (size_t r = 0; r < nr; r++) n += len[r];
  size_t r = 0, r0 = 0; /* the run holding tile k0, and its first tile's index */
  for (size_t k0 = 0; k0 < n; k0 += EC_VL) {
    while (r0 + len[r] <= k0) r0 += len[r++];
    const float *rp[EC_VL], *bp[EC_VL]; /* where each run's tiles in the vector start; its blended load */
    size_t lo[EC_VL], ns = 1, st = r0 + len[r];
    int safe = 1;
    rp[0] = bp[0] = p + src[r] + (k0 - r0), lo[0] = 0;
    for (size_t rr = r + 1; rr < nr && st < k0 + EC_VL; st += len[rr++], ns++) {
      lo[ns] = st - k0, rp[ns] = p + src[rr];
      safe &= src[rr] >= lo[ns]; /* the load starting lo lanes early stays inside the plane */
      bp[ns] = safe ? rp[ns] - lo[ns] : rp[ns];
    }
    if (ns == 1)
      wg_in_chunk_call(rp[0], ps, q, v + k0, vs);
    else if (ns == 2 && safe)
      wg_in_chunk2(bp, lo, ps, q, v + k0, vs);
    else if (ns == 3 && safe)
      wg_in_chunk3(bp, lo, ps, q, v + k0, vs);
    else /* run by run, in order: each vector's overhang is rewritten by the next */
      for (size_t s = 0; s < ns; s++) wg_in_chunk_call(rp[s], ps, q, v + k0 + lo[s], vs);
  }
}

/* one output row of a tile: A^T over its WG_A partial rows, bias, and the activation unless a residual
 * comes first (then the epilogue pass applies both) */
EC_INLINE void wg_out_row(const ec_v *ta, ec_v vb, int act_now, ec_act_kind kind, ec_act act, ec_v *o) {
  wg_at(ta, o);
#pragma GCC unroll 8
  for (int b = 0; b < WG_M; b++) {
    o[b] = ec_vadd(o[b], vb);
    if (act_now) o[b] = ec_vact_k(kind, act, o[b]);
  }
}

#if WG_M == 4 && defined(EC_SIMD_AVX512_H)
/* one output row (4 vectors: outputs b of 16 channels) transposed so each 128-bit chunk q of tb[l] is channel
 * 4q+l's row, copied out a channel at a time */
EC_INLINE void wg_store_rows4_zmm(const ec_v *o, float *ya, size_t ys, size_t nl, float tb[4][EC_VL]) {
  const __m512 u0 = _mm512_unpacklo_ps(o[0], o[1]), u1 = _mm512_unpackhi_ps(o[0], o[1]);
  const __m512 u2 = _mm512_unpacklo_ps(o[2], o[3]), u3 = _mm512_unpackhi_ps(o[2], o[3]);
  _mm512_store_ps(tb[0], _mm512_shuffle_ps(u0, u2, 0x44)), _mm512_store_ps(tb[1], _mm512_shuffle_ps(u0, u2, 0xEE));
  _mm512_store_ps(tb[2], _mm512_shuffle_ps(u1, u3, 0x44)), _mm512_store_ps(tb[3], _mm512_shuffle_ps(u1, u3, 0xEE));
  for (size_t l = 0; l < nl; l++) _mm_storeu_ps(ya + l * ys, _mm_load_ps(&tb[l % 4][l / 4 * 4]));
}

/* row r of a tile's M (WG_A vectors xi = r * WG_A + c apart by ms) through A^T: o[b] = (M_r A)[b] */
EC_INLINE void wg_mrow(const float *mm, size_t ms, int r, ec_v *o) {
  ec_v d[WG_A];
#pragma GCC unroll 8
  for (int c = 0; c < WG_A; c++) d[c] = ec_vld(mm + (size_t)(r * WG_A + c) * ms);
  wg_at(d, o);
}

/* A whole F(4,3) tile's A^T M A, rows of M first and the column pass folded in as rows arrive (rows 1, 2 and 3, 4
 * summed and differenced as wg_at does): 16 output vectors and two rows' 8 live at most, not the columns-first
 * order's 24-vector intermediate, which gcc kept on the stack on AVX-512 */
EC_INLINE void wg_out_tile_rows(const float *mm, size_t ms, ec_v o[4][4]) {
  ec_v u[4], v[4];
  wg_mrow(mm, ms, 0, o[0]);
  wg_mrow(mm, ms, 1, u);
  wg_mrow(mm, ms, 2, v);
#pragma GCC unroll 4
  for (int b = 0; b < 4; b++) {
    const ec_v sum = ec_vadd(u[b], v[b]), dif = wg_sub(u[b], v[b]);
    o[0][b] = ec_vadd(o[0][b], sum), o[2][b] = sum, o[1][b] = dif, o[3][b] = dif;
  }
  wg_mrow(mm, ms, 3, u);
  wg_mrow(mm, ms, 4, v);
#pragma GCC unroll 4
  for (int b = 0; b < 4; b++) {
    const ec_v sum = ec_vadd(u[b], v[b]), dif = wg_sub(u[b], v[b]);
    o[0][b] = ec_vadd(o[0][b], sum), o[2][b] = wg_fma(o[2][b], sum, 4.0f);
    o[1][b] = wg_fma(o[1][b], dif, 2.0f), o[3][b] = wg_fma(o[3][b], dif, 8.0f);
  }
  wg_mrow(mm, ms, 5, u);
#pragma GCC unroll 4
  for (int b = 0; b < 4; b++) o[3][b] = ec_vadd(o[3][b], u[b]);
}
#endif

/* nl output channels (lanes) of one tile into y (channel l's plane at y + l*ys) */
EC_INLINE void wg_out_chunk(const float *mm, size_t ms, float *y, size_t ldy, size_t ys, size_t rows, size_t cols,
                            const float *bias, const float *res, int before, ec_act_kind kind, ec_act act,
                            size_t nl) {
#if WG_M == 4 && defined(EC_SIMD_AVX512_H)
  if (rows == WG_M && cols == WG_M) {
    ec_v o[4][4];
    wg_out_tile_rows(mm, ms, o);
    const ec_v vb4 = bias ? (nl == EC_VL ? ec_vld(bias) : ec_vld_n(bias, nl)) : ec_vzero();
    float tb[4][EC_VL] EC_ALIGNED(64);
#pragma GCC unroll 4
    for (int a = 0; a < 4; a++) {
#pragma GCC unroll 4
      for (int b = 0; b < 4; b++) {
        o[a][b] = ec_vadd(o[a][b], vb4);
        if (!res) o[a][b] = ec_vact_k(kind, act, o[a][b]);
      }
      wg_store_rows4_zmm(o[a], y + (size_t)a * ldy, ys, nl, tb);
    }
    if (res)
      for (size_t l = 0; l < nl; l++)
        for (size_t a = 0; a < WG_M; a++) ec_vepi_row(y + l * ys + a * ldy, res + l * ys + a * ldy, WG_M, before, act);
    return;
  }
#endif
  ec_v t[WG_M][WG_A];
#pragma GCC unroll 8
  for (int c = 0; c < WG_A; c++) {
    ec_v d[WG_A], o[WG_M];
#pragma GCC unroll 8
    for (int r = 0; r < WG_A; r++) d[r] = ec_vld(mm + (size_t)(r * WG_A + c) * ms); /* see F32_WINOGRAD_OUT_DECL */
    wg_at(d, o);
#pragma GCC unroll 8
    for (int a = 0; a < WG_M; a++) t[a][c] = o[a];
  }
  const ec_v vb = bias ? (nl == EC_VL ? ec_vld(bias) : ec_vld_n(bias, nl)) : ec_vzero();
#if (WG_M == 4 || WG_M == 2) && defined(EC_SIMD_AVX2_H)
  if (rows == WG_M && cols == WG_M) {
    /* a row of WG_M outputs per channel is 16 (8) bytes: transposing each output row's WG_M vectors in
     * registers gives one 128-bit (64-bit) store per channel and row (a lane-by-lane copy through a
     * buffer cost ~2x the transform arithmetic at 9 channels a group) */
#pragma GCC unroll 4
    for (int a = 0; a < WG_M; a++) {
      ec_v o[WG_M];
      wg_out_row(t[a], vb, !res, kind, act, o);
      float *ya = y + (size_t)a * ldy;
#if WG_M == 2
      /* channel pairs (0 1), (2 3) in the low halves, (4 5), (6 7) in the high ones */
      const __m256 u0 = _mm256_unpacklo_ps(o[0], o[1]), u1 = _mm256_unpackhi_ps(o[0], o[1]);
      const __m128 h[4] = {_mm256_castps256_ps128(u0), _mm256_castps256_ps128(u1), _mm256_extractf128_ps(u0, 1),
                           _mm256_extractf128_ps(u1, 1)};
#pragma GCC unroll 8
      for (size_t l = 0; l < nl; l++) {
        if (l % 2 == 0)
          _mm_storel_pi((__m64 *)(void *)(ya + l * ys), h[l / 2]);
        else
          _mm_storeh_pi((__m64 *)(void *)(ya + l * ys), h[l / 2]);
      }
#else
      const __m256 u0 = _mm256_unpacklo_ps(o[0], o[1]), u1 = _mm256_unpackhi_ps(o[0], o[1]);
      const __m256 u2 = _mm256_unpacklo_ps(o[2], o[3]), u3 = _mm256_unpackhi_ps(o[2], o[3]);
      const __m256 r[4] = {_mm256_shuffle_ps(u0, u2, 0x44), _mm256_shuffle_ps(u0, u2, 0xEE),
                           _mm256_shuffle_ps(u1, u3, 0x44), _mm256_shuffle_ps(u1, u3, 0xEE)};
      if (nl == EC_VL) {
#pragma GCC unroll 4
        for (int l = 0; l < 4; l++) {
          _mm_storeu_ps(ya + (size_t)l * ys, _mm256_castps256_ps128(r[l]));
          _mm_storeu_ps(ya + (size_t)(l + 4) * ys, _mm256_extractf128_ps(r[l], 1));
        }
      } else {
        for (size_t l = 0; l < nl; l++)
          _mm_storeu_ps(ya + l * ys, l < 4 ? _mm256_castps256_ps128(r[l]) : _mm256_extractf128_ps(r[l - 4], 1));
      }
#endif
    }
    if (res)
      for (size_t l = 0; l < nl; l++)
        for (size_t a = 0; a < WG_M; a++) ec_vepi_row(y + l * ys + a * ldy, res + l * ys + a * ldy, WG_M, before, act);
    return;
  }
#endif
#if WG_M == 2 && defined(EC_SIMD_AVX512_H)
  if (rows == WG_M && cols == WG_M) {
    /* as on AVX2: chunk q of u[h] holds channels 4q+2h and 4q+2h+1's output rows, copied out of a buffer a row a
     * channel (F(4,3) whole tiles: wg_store_rows4_zmm above); against the lane-by-lane copy below, 576ch 14x14
     * g=16 F(2,3) 0.95x (Zen 4) */
    float tb[2][EC_VL] EC_ALIGNED(64);
#pragma GCC unroll 2
    for (int a = 0; a < WG_M; a++) {
      ec_v o[WG_M];
      wg_out_row(t[a], vb, !res, kind, act, o);
      float *ya = y + (size_t)a * ldy;
      _mm512_store_ps(tb[0], _mm512_unpacklo_ps(o[0], o[1])), _mm512_store_ps(tb[1], _mm512_unpackhi_ps(o[0], o[1]));
      for (size_t l = 0; l < nl; l++) memcpy(ya + l * ys, &tb[l % 4 / 2][l / 4 * 4 + l % 2 * 2], 2 * sizeof(float));
    }
    if (res)
      for (size_t l = 0; l < nl; l++)
        for (size_t a = 0; a < WG_M; a++) ec_vepi_row(y + l * ys + a * ldy, res + l * ys + a * ldy, WG_M, before, act);
    return;
  }
#endif
  float buf[WG_M][WG_M][EC_VL];
#pragma GCC unroll 8
  for (int a = 0; a < WG_M; a++) {
    ec_v o[WG_M];
    wg_out_row(t[a], vb, !res, kind, act, o);
#pragma GCC unroll 8
    for (int b = 0; b < WG_M; b++) ec_vst(buf[a][b], o[b]);
  }
  /* lanes are channels: each channel's m x m block into its plane */
  if (rows == WG_M && cols == WG_M) {
    for (size_t l = 0; l < nl; l++)
#pragma GCC unroll 8
      for (int a = 0; a < WG_M; a++)
#pragma GCC unroll 8
        for (int b = 0; b < WG_M; b++) y[l * ys + (size_t)a * ldy + (size_t)b] = buf[a][b][l];
  } else {
    for (size_t l = 0; l < nl; l++)
      for (size_t a = 0; a < rows; a++)
        for (size_t b = 0; b < cols; b++) y[l * ys + a * ldy + b] = buf[a][b][l];
  }
  if (res)
    for (size_t l = 0; l < nl; l++)
      for (size_t a = 0; a < rows; a++) ec_vepi_row(y + l * ys + a * ldy, res + l * ys + a * ldy, cols, before, act);
}

/* one copy per common activation kind: a run-time kind's switch on each of the 16 output vectors made
 * the compiler keep the transform's intermediates on the stack (~1.3x the time a tile) */
#define WG_OUT_LOOP(kind)                                                                                   \
  for (size_t k = 0; k < nk; k += EC_VL)                                                                   \
  wg_out_chunk(mm + k, ms, y + k * ys, ldy, ys, rows, cols, bias ? bias + k : NULL, res ? res + k * ys : NULL, \
               before, kind, act, EC_MIN((size_t)EC_VL, nk - k))

F32_WINOGRAD_OUT_DECL(FN_OUT) {
  switch (res ? EC_ACT_NONE : act.kind) { /* with res the activation is applied by ec_vepi_row */
  case EC_ACT_NONE: WG_OUT_LOOP(EC_ACT_NONE); break;
  case EC_ACT_RELU: WG_OUT_LOOP(EC_ACT_RELU); break;
  case EC_ACT_CLIP: WG_OUT_LOOP(EC_ACT_CLIP); break;
  default: WG_OUT_LOOP(act.kind); break;
  }
}
#undef WG_OUT_LOOP

#ifdef FN_OUTC
/* EC_VL output channels of one tile into a channel-blocked output: each output pixel's channels are one vector,
 * so the tile is WG_M x WG_M whole stores (no transpose: the NCHW stores' lane scatter is the bulk of that
 * transform on AVX-512), the epilogue applied in registers */
EC_INLINE void wg_outc_px(float *y, const float *res, ec_v v, int before, ec_act_kind kind, ec_act act) {
  if (res && before) v = ec_vadd(v, ec_vld(res));
  v = ec_vact_k(kind, act, v);
  if (res && !before) v = ec_vadd(v, ec_vld(res));
  ec_vst(y, v);
}

EC_INLINE void wg_outc_chunk(const float *mm, size_t ms, float *y, size_t ldy, size_t rows, size_t cols,
                             const float *bias, const float *res, int before, ec_act_kind kind, ec_act act) {
  ec_v t[WG_M][WG_A];
#pragma GCC unroll 8
  for (int c = 0; c < WG_A; c++) {
    ec_v d[WG_A], o[WG_M];
#pragma GCC unroll 8
    for (int r = 0; r < WG_A; r++) d[r] = ec_vld(mm + (size_t)(r * WG_A + c) * ms);
    wg_at(d, o);
#pragma GCC unroll 8
    for (int a = 0; a < WG_M; a++) t[a][c] = o[a];
  }
  const ec_v vb = bias ? ec_vld(bias) : ec_vzero();
  if (rows == WG_M && cols == WG_M) {
#pragma GCC unroll 8
    for (int a = 0; a < WG_M; a++) {
      ec_v o[WG_M];
      wg_at(t[a], o);
#pragma GCC unroll 8
      for (int b = 0; b < WG_M; b++) {
        const size_t px = ((size_t)a * ldy + (size_t)b) * EC_VL;
        wg_outc_px(y + px, res ? res + px : NULL, ec_vadd(o[b], vb), before, kind, act);
      }
    }
    return;
  }
  for (size_t a = 0; a < rows; a++) {
    ec_v o[WG_M];
    wg_at(t[a], o);
    for (size_t b = 0; b < cols; b++) {
      const size_t px = (a * ldy + b) * EC_VL;
      wg_outc_px(y + px, res ? res + px : NULL, ec_vadd(o[b], vb), before, kind, act);
    }
  }
}

#define WG_OUTC_LOOP(kind)                                                                                  \
  for (size_t k = 0; k < nk; k += EC_VL)                                                                   \
  wg_outc_chunk(mm + k, ms, y + k / EC_VL * ys, ldy, rows, cols, bias ? bias + k : NULL,                    \
                res ? res + k / EC_VL * ys : NULL, before, kind, act)

F32_WINOGRAD_OUT_DECL(FN_OUTC) {
  switch (act.kind) {
  case EC_ACT_NONE: WG_OUTC_LOOP(EC_ACT_NONE); break;
  case EC_ACT_RELU: WG_OUTC_LOOP(EC_ACT_RELU); break;
  case EC_ACT_CLIP: WG_OUTC_LOOP(EC_ACT_CLIP); break;
  default: WG_OUTC_LOOP(act.kind); break;
  }
}
#undef WG_OUTC_LOOP
#endif

#ifdef FN_INC
/* one pixel vector of an NCHWc block, zero outside the map */
EC_INLINE ec_v wg_px(const float *x, ptrdiff_t H, ptrdiff_t W, ptrdiff_t i, ptrdiff_t j) {
  return i < 0 || j < 0 || i >= H || j >= W ? ec_vzero() : ec_vld(x + (size_t)(i * W + j) * EC_VL);
}

/* B^T d B of one tile with its pixels' channels in the lanes: columns, then rows (wg_in_rows) */
F32_WINOGRAD_INC_DECL(FN_INC) {
  for (size_t k = 0; k < nt; k++) {
    const size_t t = t0 + k;
    const ptrdiff_t i0 = (ptrdiff_t)(t / TW * WG_M) - (ptrdiff_t)PT, j0 = (ptrdiff_t)(t % TW * WG_M) - (ptrdiff_t)PL;
    const int inside = i0 >= 0 && j0 >= 0 && i0 + WG_A <= (ptrdiff_t)H && j0 + WG_A <= (ptrdiff_t)W;
    ec_v tt[WG_A][WG_A];
    if (inside) {
      const float *p = x + (size_t)(i0 * (ptrdiff_t)W + j0) * EC_VL;
#pragma GCC unroll 8
      for (int j = 0; j < WG_A; j++) {
        ec_v d[WG_A], o[WG_A];
#pragma GCC unroll 8
        for (int i = 0; i < WG_A; i++) d[i] = ec_vld(p + ((size_t)i * W + (size_t)j) * EC_VL);
        wg_bt(d, o);
#pragma GCC unroll 8
        for (int r = 0; r < WG_A; r++) tt[r][j] = o[r];
      }
    } else {
      for (int j = 0; j < WG_A; j++) {
        ec_v d[WG_A], o[WG_A];
        for (int i = 0; i < WG_A; i++) d[i] = wg_px(x, (ptrdiff_t)H, (ptrdiff_t)W, i0 + i, j0 + j);
        wg_bt(d, o);
        for (int r = 0; r < WG_A; r++) tt[r][j] = o[r];
      }
    }
    wg_in_rows(tt, v + k * EC_VL, vs);
  }
}
#endif

#undef WG_A
