/* Register-blocked microkernel body shared by the SIMD files: each file includes its ISA's
 * ec_simd_*.h, defines MR, NV (vectors per row, NR = NV*EC_VL) and FN, then includes this.
 * acc[MR][NV] stays in registers once the constant loops are unrolled.
 * With INDIRECT defined the B rows are read in place at b + koff[k] (f32-igemm).
 * With PACKB defined B row k is read in place at b + k * ldb (whole NR columns) and also stored to the
 * packed panel bpk + k * NR, for the strips after this one (f32_conv_block_ahead, 1x1 convs): the copy's
 * stores ride along with the FMAs instead of running as a pass between tiles. */
#define NR (NV * EC_VL)
#define TMPL_CAT_(x, y) x##y
#define TMPL_CAT(x, y) TMPL_CAT_(x, y)
#define ROWS_FN TMPL_CAT(FN, _rows)

/* R rows (a constant once inlined): a tile of mr < MR rows runs R = mr rows of FMAs, not MR (the last
 * 1-row tile of a 49-pixel 7x7 map, f32-convt, did 6 rows' work). Each row's arithmetic is the same
 * whatever R, so outputs do not depend on where tiles are cut. A is still packed MR rows per k. */
/* B_PF(bk): the B row 16 k steps ahead, where a B row is whole 64-byte lines (NR = 16: AVX2 6x16, one
 * line; NR = 32: AVX-512 12x32, two). The packed B is streamed once per row strip and the next panel
 * follows it, so this also fetches the next panel's head. It pays where B comes from memory: the Winograd
 * U and the transposed GEMM's weights (ResNet-50, whole model, 1 thread, Zen 3: F(2,3) layers 0.93x, gemm-t
 * 0.94x, 1x1 0.99x; 32 and 64 steps ahead, or A as well, measured no better. Xeon Emerald Rapids, AVX-512:
 * Winograd F(4,3) at 14x14 0.77x, F(2,3) at 7x7 0.70x, gemm-t 0.82-0.87x, the model 0.89x; 24 and 32 steps
 * ahead no better). Not on the indirect path (rows in place). */
#if !defined(INDIRECT) && ((NV * EC_VL) == 16 || (NV * EC_VL) == 32) && (defined(__GNUC__) || defined(__clang__))
/* integer arithmetic: the address may lie past B's end (a prefetch never faults) */
#ifdef PACKB /* the source row 16 k steps ahead: rows a plane apart, no stream for the hardware prefetcher */
#define B_PF_AT(bk, line) __builtin_prefetch((const void *)((uintptr_t)(bk) + 16 * ldb * sizeof(float) + 64 * (line)))
#else
#define B_PF_AT(bk, line) __builtin_prefetch((const void *)((uintptr_t)(bk) + 16 * NR * sizeof(float) + 64 * (line)))
#endif
#if (NV * EC_VL) == 16
#define B_PF(bk) B_PF_AT(bk, 0)
#else
#define B_PF(bk) (B_PF_AT(bk, 0), B_PF_AT(bk, 1))
#endif
#else
#define B_PF(bk) ((void)0)
#endif
/* A panel of at most one vector of columns (nr <= EC_VL, NV > 1): a 14x14 map's last 4 of 16, the Winograd
 * driver's narrow tail of a group's output channels. One vector of FMAs a row, its own accumulators (sharing the full
 * tile's, the compiler kept these on the stack: 1.1x a 144ch g=2 F(4,3) layer, Zen 4) and its own stores: whole
 * vectors at exactly EC_VL columns, masked below. Same arithmetic per column as the full tile.
 * With half vectors (EC_HVL, AVX-512's ymm) the tail past the whole vectors (W of them: 0 or 1) of a whole strip
 * runs as one half vector when it fits: nr <= EC_HVL, or EC_VL < nr <= EC_VL + EC_HVL with NV == 2 (Kpg 72 on
 * 32-wide panels: its last 8 columns, 144ch 56x56 g=2 F(4,3); Kpg 18: 24 columns, not 32). On Zen 4, where a
 * 512-bit FMA runs as two 256-bit halves, a 12-row k step of 8 columns took 0.57x the one-vector path's time, of
 * 24 columns 0.79x the full tile's. */
#if NV > 1 && !defined(PACKB)
/* epilogue and store of one row's vector x of columns off.. (n of them, at most EC_VL) */
EC_INLINE void TMPL_CAT(FN, _st1)(ec_v x, float *EC_RESTRICT p, size_t n, size_t off, size_t i, size_t ldc,
                                  int accumulate, const ec_tile_epi *ep) {
  const int whole = n == EC_VL;
  if (accumulate) x = ec_vadd(x, whole ? ec_vld(p) : ec_vld_n(p, n));
  if (ep) {
    if (ep->bias_r) x = ec_vadd(x, ec_vset1(ep->bias_r[i]));
    if (ep->bias_c) x = ec_vadd(x, whole ? ec_vld(ep->bias_c + off) : ec_vld_n(ep->bias_c + off, n));
    x = ec_vepi_n(x, ep->res ? ep->res + i * ldc + off : NULL, n, ep->res_before_act, ep->act);
  }
  if (whole)
    ec_vst(p, x);
  else
    ec_vst_n(p, x, n);
}
#ifdef INDIRECT
EC_INLINE void TMPL_CAT(FN, _vec1)(const int R, const int W, const int H, size_t nr, size_t kc,
                                   const float *EC_RESTRICT a, const float *EC_RESTRICT b,
                                   const int32_t *EC_RESTRICT koff, float *EC_RESTRICT c, size_t ldc, int accumulate,
                                   const ec_tile_epi *ep) {
#define B_ROW1(k) (b + koff[k])
#else
EC_INLINE void TMPL_CAT(FN, _vec1)(const int R, const int W, const int H, size_t nr, size_t kc,
                                   const float *EC_RESTRICT a, const float *EC_RESTRICT b, float *EC_RESTRICT c,
                                   size_t ldc, int accumulate, const ec_tile_epi *ep) {
#define B_ROW1(k) (b + (k) * NR)
#endif
  ec_v acc[MR];
#ifdef EC_HVL
  ec_hv acch[MR];
#else
  (void)H;
#endif
#pragma GCC unroll 16
  for (int i = 0; i < R; i++) {
    if (W) acc[i] = ec_vzero();
#ifdef EC_HVL
    if (H) acch[i] = ec_hv_zero();
#endif
  }
  for (size_t k = 0; k < kc; k++) {
    const float *bk = B_ROW1(k);
    const ec_v b0 = W ? ec_vld(bk) : ec_vzero();
#ifdef EC_HVL
    const ec_hv bh = H ? ec_hv_ld(bk + (W ? EC_VL : 0)) : ec_hv_zero();
#endif
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) {
#ifdef EC_HVL
      if (!W) { /* a half-width broadcast: 512-bit broadcast loads bound the loop (Zen 4: 1.14x the zmm path) */
        acch[i] = ec_hv_fma(acch[i], ec_hv_set1(a[i]), bh);
        continue;
      }
#endif
      const ec_v ai = ec_vset1(a[i]);
      acc[i] = ec_vfma(acc[i], ai, b0);
#ifdef EC_HVL
      if (H) acch[i] = ec_hv_fma(acch[i], ec_hv_lo(ai), bh);
#endif
    }
    a += MR;
  }
#undef B_ROW1
  const size_t nw = W ? EC_MIN(nr, (size_t)EC_VL) : 0;
#pragma GCC unroll 16
  for (int i = 0; i < R; i++) {
    float *p = c + (size_t)i * ldc;
    if (W) TMPL_CAT(FN, _st1)(acc[i], p, nw, 0, (size_t)i, ldc, accumulate, ep);
#ifdef EC_HVL
    if (H) TMPL_CAT(FN, _st1)(ec_hv_wide(acch[i]), p + nw, nr - nw, nw, (size_t)i, ldc, accumulate, ep);
#endif
  }
}
/* out of line, rows a constant in each case: inlined into the full tile's function it moved that one's
 * accumulators to the stack as well (1.19x the layer above) */
#ifdef INDIRECT
EC_NOINLINE void TMPL_CAT(FN, _v1)(size_t mr, size_t nr, size_t kc, const float *EC_RESTRICT a,
                                   const float *EC_RESTRICT b, const int32_t *EC_RESTRICT koff, float *EC_RESTRICT c,
                                   size_t ldc, int accumulate, const ec_tile_epi *ep) {
#define V1_ARGS nr, kc, a, b, koff, c, ldc, accumulate, ep
#else
EC_NOINLINE void TMPL_CAT(FN, _v1)(size_t mr, size_t nr, size_t kc, const float *EC_RESTRICT a,
                                   const float *EC_RESTRICT b, float *EC_RESTRICT c, size_t ldc, int accumulate,
                                   const ec_tile_epi *ep) {
#define V1_ARGS nr, kc, a, b, c, ldc, accumulate, ep
#endif
#ifdef EC_HVL
  /* half-vector tails on whole strips only (mr = MR): specialised by row count like the one-vector path, the object
   * was 1.7x its size; partial strips keep the one-vector path (nr <= EC_VL) or the full tile */
  if (mr == MR && nr > EC_VL) {
    TMPL_CAT(FN, _vec1)(MR, 1, 1, V1_ARGS);
    return;
  }
  if (mr == MR && nr <= EC_HVL) {
    TMPL_CAT(FN, _vec1)(MR, 0, 1, V1_ARGS);
    return;
  }
#endif
#define V1_CALL(r) TMPL_CAT(FN, _vec1)(r, 1, 0, V1_ARGS)
  switch (mr) { /* the same row cases as FN's below */
#define V1_CASE(r) \
  case r: V1_CALL(r); return;
#if MR > 1
  V1_CASE(1)
#endif
#if MR > 2
  V1_CASE(2)
#endif
#if MR > 3
  V1_CASE(3)
#endif
#if MR > 4
  V1_CASE(4)
#endif
#if MR > 5
  V1_CASE(5)
#endif
#if MR > 6
  V1_CASE(6)
#endif
#if MR > 7
  V1_CASE(7)
#endif
#if MR > 8
  V1_CASE(8)
#endif
#if MR > 9
  V1_CASE(9)
#endif
#if MR > 10
  V1_CASE(10)
#endif
#if MR > 11
  V1_CASE(11)
#endif
  default: V1_CALL(MR); return;
  }
#undef V1_CASE
#undef V1_CALL
#undef V1_ARGS
}
#endif

#ifdef INDIRECT
#define B_ROW(k) (b + koff[k])
#define ROWS_ARGS nr, kc, a, b, koff, c, ldc, accumulate, ep
EC_INLINE void ROWS_FN(const int R, size_t nr, size_t kc, const float *EC_RESTRICT a, const float *EC_RESTRICT b,
                       const int32_t *EC_RESTRICT koff, float *EC_RESTRICT c, size_t ldc, int accumulate,
                       const ec_tile_epi *ep) {
#elif defined(PACKB)
#define B_ROW(k) (b + (k) * ldb)
#define ROWS_ARGS nr, kc, a, b, ldb, bpk, c, ldc, accumulate, ep
EC_INLINE void ROWS_FN(const int R, size_t nr, size_t kc, const float *EC_RESTRICT a, const float *EC_RESTRICT b,
                       size_t ldb, float *EC_RESTRICT bpk, float *EC_RESTRICT c, size_t ldc, int accumulate,
                       const ec_tile_epi *ep) {
#else
#define B_ROW(k) (b + (k) * NR)
#define ROWS_ARGS nr, kc, a, b, c, ldc, accumulate, ep
EC_INLINE void ROWS_FN(const int R, size_t nr, size_t kc, const float *EC_RESTRICT a, const float *EC_RESTRICT b,
                       float *EC_RESTRICT c, size_t ldc, int accumulate, const ec_tile_epi *ep) {
#endif
  const size_t mr = (size_t)R;
#if NV > 1 && !defined(PACKB) /* PACKB: whole panels only */
#ifdef EC_HVL
  if (nr <= EC_VL || (NV == 2 && mr == MR && nr <= EC_VL + EC_HVL)) {
#else
  if (nr <= EC_VL) {
#endif
    TMPL_CAT(FN, _v1)(mr, ROWS_ARGS);
    return;
  }
#endif
  ec_v acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < R; i++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[i][v] = ec_vzero();
  for (size_t k = 0; k < kc; k++) {
    ec_v bv[NV];
    const float *bk = B_ROW(k);
    B_PF(bk);
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) bv[v] = ec_vld(bk + v * EC_VL);
#ifdef PACKB
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) ec_vst(bpk + k * NR + v * EC_VL, bv[v]);
#endif
#if defined(EC_VFMA_LANE) && MR % EC_VL == 0 && MR <= 2 * EC_VL
    /* the k step's MR values of A as vectors, each row's FMAs by element (A is packed MR a step, so both loads
     * stay inside it for any R) */
    const ec_v a0 = ec_vld(a);
#if MR > EC_VL
    const ec_v a1 = ec_vld(a + EC_VL);
#else
    const ec_v a1 = a0;
#endif
#define LANE_ROW(i, av, l) \
  if ((i) < R) acc[i][v] = EC_VFMA_LANE(acc[i][v], bv[v], av, l);
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) { /* a B vector's FMAs together: its register is free for the next */
      LANE_ROW(0, a0, 0) LANE_ROW(1, a0, 1) LANE_ROW(2, a0, 2) LANE_ROW(3, a0, 3)
      LANE_ROW(4, a1, 0) LANE_ROW(5, a1, 1) LANE_ROW(6, a1, 2) LANE_ROW(7, a1, 3)
    }
#undef LANE_ROW
#else
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) {
      const ec_v av = ec_vset1(a[i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) acc[i][v] = ec_vfma(acc[i][v], av, bv[v]);
    }
#endif
    a += MR;
  }
  if (nr == NR) {
    /* Full tile: each epilogue step is one branch over the whole register tile, not one per
     * vector (with short K the per-vector checks cost ~15% of the call). */
#define TILE_LOOP(stmt)                                                                           \
  _Pragma("GCC unroll 16") for (int i = 0; i < R; i++)                                          \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) stmt
    if (accumulate) TILE_LOOP(acc[i][v] = ec_vadd(acc[i][v], ec_vld(c + i * ldc + v * EC_VL)));
    if (ep) {
      if (ep->bias_r) TILE_LOOP(acc[i][v] = ec_vadd(acc[i][v], ec_vset1(ep->bias_r[i])));
      if (ep->bias_c) TILE_LOOP(acc[i][v] = ec_vadd(acc[i][v], ec_vld(ep->bias_c + v * EC_VL)));
      const float *res = ep->res;
      if (res && ep->res_before_act) TILE_LOOP(acc[i][v] = ec_vadd(acc[i][v], ec_vld(res + i * ldc + v * EC_VL)));
      switch (ep->act.kind) {
      case EC_ACT_NONE: break;
      case EC_ACT_RELU: TILE_LOOP(acc[i][v] = ec_vmax(acc[i][v], ec_vzero())); break;
#ifndef EC_ACT_VIA_OUTPUT
      default: TILE_LOOP(acc[i][v] = ec_vact(ep->act, acc[i][v])); break;
#else
      default:
        /* through the output: the activation's temporaries beside the whole live tile outgrew the register file,
         * and the compiler then kept accumulators on the stack in the K loop as well */
        TILE_LOOP(ec_vst(c + i * ldc + v * EC_VL, acc[i][v]));
        for (size_t i = 0; i < mr; i++)
          for (size_t v = 0; v < NV; v++) {
            ec_v x = ec_vact(ep->act, ec_vld(c + i * ldc + v * EC_VL));
            if (res && !ep->res_before_act) x = ec_vadd(x, ec_vld(res + i * ldc + v * EC_VL));
            ec_vst(c + i * ldc + v * EC_VL, x);
          }
        return;
#endif
      }
      if (res && !ep->res_before_act) TILE_LOOP(acc[i][v] = ec_vadd(acc[i][v], ec_vld(res + i * ldc + v * EC_VL)));
    }
    TILE_LOOP(ec_vst(c + i * ldc + v * EC_VL, acc[i][v]));
#undef TILE_LOOP
    return;
  }
  /* Edge tile: through a buffer, so acc is only ever indexed by constants and stays in registers
   * (indexed by i and v here, it lived on the stack for every tile: 10% of a K = 64 layer, 64->256 @56). */
  float tile[MR * NR] EC_ALIGNED(64);
#pragma GCC unroll 16
  for (int i = 0; i < R; i++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) ec_vst(tile + i * NR + v * EC_VL, acc[i][v]);
  for (size_t i = 0; i < mr; i++) {
    for (size_t v = 0; v < NV && v * EC_VL < nr; v++) {
      const size_t n = EC_MIN((size_t)EC_VL, nr - v * EC_VL);
      float *p = c + i * ldc + v * EC_VL;
      ec_v x = ec_vld(tile + i * NR + v * EC_VL);
      if (accumulate) x = ec_vadd(x, ec_vld_n(p, n));
      if (ep) {
        if (ep->bias_r) x = ec_vadd(x, ec_vset1(ep->bias_r[i]));
        if (ep->bias_c) x = ec_vadd(x, ec_vld_n(ep->bias_c + v * EC_VL, n));
        x = ec_vepi_n(x, ep->res ? ep->res + i * ldc + v * EC_VL : NULL, n, ep->res_before_act,
                      ep->act);
      }
      ec_vst_n(p, x, n);
    }
  }
}

#ifdef INDIRECT
F32_IGEMM_DECL(FN) {
#elif defined(PACKB)
F32_GEMM_PACKB_DECL(FN) {
#else
F32_GEMM_DECL(FN) {
#endif
  switch (mr) {
#if MR > 1
  case 1: ROWS_FN(1, ROWS_ARGS); return;
#endif
#if MR > 2
  case 2: ROWS_FN(2, ROWS_ARGS); return;
#endif
#if MR > 3
  case 3: ROWS_FN(3, ROWS_ARGS); return;
#endif
#if MR > 4
  case 4: ROWS_FN(4, ROWS_ARGS); return;
#endif
#if MR > 5
  case 5: ROWS_FN(5, ROWS_ARGS); return;
#endif
#if MR > 6
  case 6: ROWS_FN(6, ROWS_ARGS); return;
#endif
#if MR > 7
  case 7: ROWS_FN(7, ROWS_ARGS); return;
#endif
#if MR > 8
  case 8: ROWS_FN(8, ROWS_ARGS); return;
#endif
#if MR > 9
  case 9: ROWS_FN(9, ROWS_ARGS); return;
#endif
#if MR > 10
  case 10: ROWS_FN(10, ROWS_ARGS); return;
#endif
#if MR > 11
  case 11: ROWS_FN(11, ROWS_ARGS); return;
#endif
#if MR > 12
#error "f32-gemm-tmpl.h: row cases go up to MR = 12"
#endif
  default: ROWS_FN(MR, ROWS_ARGS); return;
  }
}
#undef NR
#undef B_ROW
#undef B_PF
#undef B_PF_AT
#undef ROWS_ARGS
#undef ROWS_FN
