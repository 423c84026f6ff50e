/* Register-blocked microkernel body shared by the SIMD files: each file includes its ISA's
 * ec_simd_*.h, defines MR, NV (vectors per row, NR = NV*EC_VL) and FN, then includes this.
 * acc[MR][NV] stays in registers once the constant loops are unrolled.
 * With INDIRECT defined the B rows are read in place at b + koff[k] (f32-igemm). */
#define NR (NV * EC_VL)

#ifdef INDIRECT
F32_IGEMM_DECL(FN) {
#define B_ROW(k) (b + koff[k])
#else
F32_GEMM_DECL(FN) {
#define B_ROW(k) (b + (k) * NR)
#endif
  ec_v acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[i][v] = ec_vzero();
  for (size_t k = 0; k < kc; k++) {
    ec_v bv[NV];
    const float *bk = B_ROW(k);
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) bv[v] = ec_vld(bk + v * EC_VL);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      const ec_v av = ec_vset1(a[i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) acc[i][v] = ec_vfma(acc[i][v], av, bv[v]);
    }
    a += MR;
  }
  if (mr == MR && nr == NR) {
    /* Full tile: each epilogue step is one branch over the whole register tile, not one per
     * vector (with short K the per-vector checks cost ~15% of the call). */
#define TILE_LOOP(stmt)                                                                           \
  _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                         \
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
      default: TILE_LOOP(acc[i][v] = ec_vact(ep->act, acc[i][v])); break;
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
  for (int i = 0; i < MR; i++)
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
#undef NR
#undef B_ROW
