/* Multi-group GSPC row kernel body (f32-gspc-mg.h) shared by the SIMD files. The including file
 * picks the vocabulary (ec_simd_*.h), GB (groups per vector; EC_VL / GB lanes per group), MG_BCAST
 * (p: GB floats broadcast to every GB-lane block, one load), BMAX (largest ow register block its
 * register file holds) and FN. Blocks have compile-time widths so accumulators stay in registers. */

/* Epilogue + NCHW transpose of one block, shared by every block width (kept out of line). */
static __attribute__((noinline)) void mg_finish(const f32_gspc_mg_shape *s, const f32_gspc_mg_row_args *a,
                                                float *tile, size_t ow0, size_t nb) {
  if (a->res != NULL) {
    f32_gspc_mg_store(s, a, tile, EC_VL, ow0, nb, 0);
    return;
  }
  /* epilogue in registers, then EC_VL columns at a time: an in-register transpose turns lanes
   * into channel rows, stored contiguously */
  const ec_v bias = ec_vld(a->bl);
  const size_t HoWo = s->Ho * s->Wo, Kpg = s->K / s->G;
  for (size_t b0 = 0; b0 < nb; b0 += EC_VL) {
    const size_t m = EC_MIN((size_t)EC_VL, nb - b0);
    ec_v t[EC_VL];
    for (size_t i = 0; i < EC_VL; i++)
      t[i] = i < m ? ec_vact(a->act, ec_vadd(ec_vld(tile + (b0 + i) * EC_VL), bias)) : ec_vzero();
    ec_vtranspose(t);
    for (size_t gb = 0; gb < a->nvalid; gb++)
      for (size_t k = 0; k < Kpg; k++) {
        float *y = a->y + (gb * Kpg + k) * HoWo + ow0 + b0;
        if (m == EC_VL) ec_vst(y, t[k * GB + gb]);
        else ec_vst_n(y, t[k * GB + gb], m);
      }
  }
}

EC_INLINE void mg_block(const f32_gspc_mg_shape *s, const f32_gspc_mg_row_args *a, size_t ow0, const int B) {
  ec_v acc[BMAX];
#pragma GCC unroll 32
  for (int b = 0; b < B; b++) acc[b] = ec_vzero();
  const size_t Wp = s->Wp, cpg = s->C / s->G, sw = s->SW * GB, dw = s->DW * GB, dh = s->DH * Wp * GB;
  const float *w = a->w;
  const float *xc = a->xp + (a->oh * s->SH * Wp + ow0 * s->SW) * GB;
  for (size_t c = 0; c < cpg; c++, xc += s->Hp * Wp * GB)
    for (size_t kh = 0; kh < s->KH; kh++) {
      const float *xr = xc + kh * dh;
      for (size_t kw = 0; kw < s->KW; kw++, w += EC_VL) {
        const ec_v wv = ec_vld(w);
        const float *xk = xr + kw * dw;
#pragma GCC unroll 32
        for (int b = 0; b < B; b++) acc[b] = ec_vfma(acc[b], MG_BCAST(xk + (size_t)b * sw), wv);
      }
    }
  float tile[BMAX * EC_VL];
#pragma GCC unroll 32
  for (int b = 0; b < B; b++) ec_vst(tile + b * EC_VL, acc[b]);
  mg_finish(s, a, tile, ow0, (size_t)B);
}

typedef void (*mg_block_fn)(const f32_gspc_mg_shape *s, const f32_gspc_mg_row_args *a, size_t ow0);

/* One out-of-line function per block width: each gets its own register allocation. */
#define MG_BLOCK_FN(B)                                                                          \
  static __attribute__((noinline)) void mg_block_##B(const f32_gspc_mg_shape *s,                \
                                                     const f32_gspc_mg_row_args *a, size_t ow0) { \
    mg_block(s, a, ow0, B);                                                                     \
  }
MG_BLOCK_FN(1)
MG_BLOCK_FN(2)
MG_BLOCK_FN(3)
MG_BLOCK_FN(4)
MG_BLOCK_FN(5)
MG_BLOCK_FN(6)
MG_BLOCK_FN(7)
MG_BLOCK_FN(8)
MG_BLOCK_FN(9)
MG_BLOCK_FN(10)
MG_BLOCK_FN(11)
MG_BLOCK_FN(12)
#if BMAX >= 13
MG_BLOCK_FN(13)
#endif
#if BMAX >= 14
MG_BLOCK_FN(14)
#endif
#if BMAX >= 15
MG_BLOCK_FN(15)
#endif
#if BMAX >= 16
MG_BLOCK_FN(16)
#endif
#if BMAX >= 17
MG_BLOCK_FN(17)
#endif
#if BMAX >= 18
MG_BLOCK_FN(18)
#endif
#if BMAX >= 19
MG_BLOCK_FN(19)
#endif
#if BMAX >= 20
MG_BLOCK_FN(20)
#endif
#if BMAX >= 21
MG_BLOCK_FN(21)
#endif
#if BMAX >= 22
MG_BLOCK_FN(22)
#endif
#if BMAX >= 23
MG_BLOCK_FN(23)
#endif
#if BMAX >= 24
MG_BLOCK_FN(24)
#endif
#if BMAX >= 25
MG_BLOCK_FN(25)
#endif
#if BMAX >= 26
MG_BLOCK_FN(26)
#endif
#if BMAX >= 27
MG_BLOCK_FN(27)
#endif
#if BMAX >= 28
MG_BLOCK_FN(28)
#endif

static const mg_block_fn mg_blocks[BMAX + 1] = {
    NULL,
    mg_block_1,
    mg_block_2,
    mg_block_3,
    mg_block_4,
    mg_block_5,
    mg_block_6,
    mg_block_7,
    mg_block_8,
    mg_block_9,
    mg_block_10,
    mg_block_11,
    mg_block_12,
#if BMAX >= 13
    mg_block_13,
#endif
#if BMAX >= 14
    mg_block_14,
#endif
#if BMAX >= 15
    mg_block_15,
#endif
#if BMAX >= 16
    mg_block_16,
#endif
#if BMAX >= 17
    mg_block_17,
#endif
#if BMAX >= 18
    mg_block_18,
#endif
#if BMAX >= 19
    mg_block_19,
#endif
#if BMAX >= 20
    mg_block_20,
#endif
#if BMAX >= 21
    mg_block_21,
#endif
#if BMAX >= 22
    mg_block_22,
#endif
#if BMAX >= 23
    mg_block_23,
#endif
#if BMAX >= 24
    mg_block_24,
#endif
#if BMAX >= 25
    mg_block_25,
#endif
#if BMAX >= 26
    mg_block_26,
#endif
#if BMAX >= 27
    mg_block_27,
#endif
#if BMAX >= 28
    mg_block_28,
#endif
};

void FN(const f32_gspc_mg_shape *s, const f32_gspc_mg_row_args *a) {
  const size_t Wo = s->Wo, B = EC_MIN(s->OWB, (size_t)BMAX);
  size_t ow0 = 0;
  for (; ow0 + B <= Wo; ow0 += B) mg_blocks[B](s, a, ow0);
  while (ow0 < Wo) {
    const size_t n = EC_MIN(Wo - ow0, (size_t)BMAX);
    mg_blocks[n](s, a, ow0);
    ow0 += n;
  }
}
