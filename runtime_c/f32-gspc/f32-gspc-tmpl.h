/* GSPC row kernel body shared by the SIMD files. The including file picks the vocabulary
 * (ec_simd_*.h), GV (vectors per output tile: T_O = GV * EC_VL, default 1), BMAX (largest ow register
 * block its register file holds next to GV weight vectors) and FN. Blocks have compile-time widths
 * (switch below) so accumulators stay in registers. GV > 1 reuses each input broadcast for GV FMAs: at
 * GV = 1 every FMA needs its own broadcast load, and the loads, not the FMAs, bound the loop. */
#include <string.h>

#ifndef GV
#define GV 1
#endif

/* Epilogue + NCHW transpose of one block, shared by every block width (kept out of line). Without a
 * residual, blocks of at least EC_VL columns run the epilogue in registers and transpose EC_VL x EC_VL
 * squares in registers, so each channel's columns are stored as whole vectors; the last square of a
 * block overlaps the one before it instead of a masked store (vmaskmovps stores are microcoded on Zen).
 * The scalar transpose cost 20-30% of the layer at 8 input channels per group. */
static __attribute__((noinline)) void gspc_finish(const f32_gspc_shape *s, const f32_gspc_row_args *a,
                                                  float *tile, size_t ow0, size_t nb) {
#ifdef EC_MASKED_STORE
  if (a->res == NULL && nb < EC_VL) { /* one square, nb columns stored with a mask (stride-2 rows: 7 or 14) */
    const size_t HoWo = s->Ho * s->Wo;
    const ec_v bias = a->bias ? ec_vld_n(a->bias, a->nvalid) : ec_vzero();
    ec_v t[EC_VL];
    for (size_t i = 0; i < EC_VL; i++)
      t[i] = i < nb ? ec_vact(a->act, ec_vadd(ec_vld(tile + i * EC_VL), bias)) : ec_vzero();
    ec_vtranspose(t);
    float *y = a->y + ow0;
    for (size_t o = 0; o < a->nvalid; o++, y += HoWo) ec_vst_n(y, t[o], nb);
    return;
  }
#endif
  if (a->res != NULL || nb < EC_VL) {
    const int fused = a->res == NULL;
    if (fused) {
      const ec_v bias = a->bias ? ec_vld_n(a->bias, a->nvalid) : ec_vzero();
      for (size_t b = 0; b < nb; b++)
        ec_vst(tile + b * EC_VL, ec_vact(a->act, ec_vadd(ec_vld(tile + b * EC_VL), bias)));
    }
    f32_gspc_store_block(s, a, tile, EC_VL, ow0, nb, fused);
    return;
  }
  const size_t HoWo = s->Ho * s->Wo;
  const ec_v bias = a->bias ? ec_vld_n(a->bias, a->nvalid) : ec_vzero();
  for (size_t c = 0; c < nb; c += EC_VL) {
    const size_t b0 = EC_MIN(c, nb - EC_VL);
    ec_v t[EC_VL];
    for (size_t i = 0; i < EC_VL; i++) t[i] = ec_vact(a->act, ec_vadd(ec_vld(tile + (b0 + i) * EC_VL), bias));
    ec_vtranspose(t);
    float *y = a->y + ow0 + b0;
    for (size_t o = 0; o < a->nvalid; o++, y += HoWo) ec_vst(y, t[o]);
  }
}

/* SW is a constant 1 or 2 in the common instantiations: the B broadcasts then read at immediate
 * offsets of one pointer (a run-time stride needed B index registers, spilled inside the FMA loop). */
EC_INLINE void gspc_block(const f32_gspc_shape *s, const f32_gspc_row_args *a, size_t ow0, const int B,
                          const size_t SW) {
  ec_v acc[BMAX * GV];
#pragma GCC unroll 32
  for (int b = 0; b < B * GV; b++) acc[b] = ec_vzero();
  const size_t TI = s->T_I, Wp = s->Wp, ncb = s->C / s->G / TI;
  const size_t WS = s->T_O; /* the packing's tile width: GV * EC_VL, or more when this kernel runs a tail tile */
  const float *w = a->w;
  const float *xb = a->xp + a->oh * s->SH * TI * Wp + ow0 * SW;
  for (size_t icb = 0; icb < ncb; icb++, xb += s->Hp * TI * Wp) {
    for (size_t kh = 0; kh < s->KH; kh++) {
      const float *xr = xb + kh * s->DH * TI * Wp;
      for (size_t kw = 0; kw < s->KW; kw++) {
        const float *xk = xr + kw * s->DW;
        for (size_t ti = 0; ti < TI; ti++, w += WS) {
          ec_v wv[GV];
#pragma GCC unroll 4
          for (int v = 0; v < GV; v++) wv[v] = ec_vld(w + v * EC_VL);
          const float *xi = xk + ti * Wp;
#pragma GCC unroll 32
          for (int b = 0; b < B; b++) {
            const ec_v xv = ec_vset1(xi[(size_t)b * SW]);
#pragma GCC unroll 4
            for (int v = 0; v < GV; v++) acc[b * GV + v] = ec_vfma(acc[b * GV + v], xv, wv[v]);
          }
        }
      }
    }
  }
  float tile[GV][BMAX * EC_VL];
#pragma GCC unroll 32
  for (int b = 0; b < B; b++)
#pragma GCC unroll 4
    for (int v = 0; v < GV; v++) ec_vst(tile[v] + b * EC_VL, acc[b * GV + v]);
#if GV == 1
  gspc_finish(s, a, tile[0], ow0, (size_t)B);
#else
  const size_t HoWo = s->Ho * s->Wo;
  for (size_t v = 0; v < GV && v * EC_VL < a->nvalid; v++) { /* each vector is a T_O = EC_VL tile's epilogue */
    f32_gspc_row_args av = *a;
    av.y += v * EC_VL * HoWo;
    av.bias = a->bias ? a->bias + v * EC_VL : NULL;
    av.res = a->res ? a->res + v * EC_VL * HoWo : NULL;
    av.nvalid = EC_MIN((size_t)EC_VL, a->nvalid - v * EC_VL);
    gspc_finish(s, &av, tile[v], ow0, (size_t)B);
  }
#endif
}

#define GSPC_CAT2(a, b) a##b
#define GSPC_CAT(a, b) GSPC_CAT2(a, b)

/* One out-of-line function per block width: each gets its own register allocation. */
#define GSPC_BLOCK_FN(B)                                                                         \
  static __attribute__((noinline)) void gspc_block_##B(const f32_gspc_shape *s,                  \
                                                       const f32_gspc_row_args *a, size_t ow0) { \
    if (s->SW == 1)                                                                              \
      gspc_block(s, a, ow0, B, 1);                                                               \
    else if (s->SW == 2)                                                                         \
      gspc_block(s, a, ow0, B, 2);                                                               \
    else                                                                                         \
      gspc_block(s, a, ow0, B, s->SW);                                                           \
  }
GSPC_BLOCK_FN(1)
GSPC_BLOCK_FN(2)
GSPC_BLOCK_FN(3)
GSPC_BLOCK_FN(4)
#if BMAX >= 5
GSPC_BLOCK_FN(5)
#endif
#if BMAX >= 6
GSPC_BLOCK_FN(6)
#endif
#if BMAX >= 7
GSPC_BLOCK_FN(7)
#endif
#if BMAX >= 8
GSPC_BLOCK_FN(8)
#endif
#if BMAX >= 9
GSPC_BLOCK_FN(9)
#endif
#if BMAX >= 10
GSPC_BLOCK_FN(10)
#endif
#if BMAX >= 11
GSPC_BLOCK_FN(11)
#endif
#if BMAX >= 12
GSPC_BLOCK_FN(12)
#endif
#if BMAX >= 13
GSPC_BLOCK_FN(13)
#endif
#if BMAX >= 14
GSPC_BLOCK_FN(14)
#endif
#if BMAX >= 15
GSPC_BLOCK_FN(15)
#endif
#if BMAX >= 16
GSPC_BLOCK_FN(16)
#endif
#if BMAX >= 17
GSPC_BLOCK_FN(17)
#endif
#if BMAX >= 18
GSPC_BLOCK_FN(18)
#endif
#if BMAX >= 19
GSPC_BLOCK_FN(19)
#endif
#if BMAX >= 20
GSPC_BLOCK_FN(20)
#endif
#if BMAX >= 21
GSPC_BLOCK_FN(21)
#endif
#if BMAX >= 22
GSPC_BLOCK_FN(22)
#endif
#if BMAX >= 23
GSPC_BLOCK_FN(23)
#endif
#if BMAX >= 24
GSPC_BLOCK_FN(24)
#endif
#if BMAX >= 25
GSPC_BLOCK_FN(25)
#endif
#if BMAX >= 26
GSPC_BLOCK_FN(26)
#endif
#if BMAX >= 27
GSPC_BLOCK_FN(27)
#endif
#if BMAX >= 28
GSPC_BLOCK_FN(28)
#endif

void FN(const f32_gspc_shape *s, const f32_gspc_row_args *a) {
  const size_t Wo = s->Wo;
  size_t ow0 = 0;
  switch (s->OWB) {
  case 1: for (; ow0 + 1 <= Wo; ow0 += 1) gspc_block_1(s, a, ow0); break;
  case 2: for (; ow0 + 2 <= Wo; ow0 += 2) gspc_block_2(s, a, ow0); break;
  case 3: for (; ow0 + 3 <= Wo; ow0 += 3) gspc_block_3(s, a, ow0); break;
  case 4: for (; ow0 + 4 <= Wo; ow0 += 4) gspc_block_4(s, a, ow0); break;
#if BMAX >= 5
  case 5: for (; ow0 + 5 <= Wo; ow0 += 5) gspc_block_5(s, a, ow0); break;
#endif
#if BMAX >= 6
  case 6: for (; ow0 + 6 <= Wo; ow0 += 6) gspc_block_6(s, a, ow0); break;
#endif
#if BMAX >= 7
  case 7: for (; ow0 + 7 <= Wo; ow0 += 7) gspc_block_7(s, a, ow0); break;
#endif
#if BMAX >= 8
  case 8: for (; ow0 + 8 <= Wo; ow0 += 8) gspc_block_8(s, a, ow0); break;
#endif
#if BMAX >= 9
  case 9: for (; ow0 + 9 <= Wo; ow0 += 9) gspc_block_9(s, a, ow0); break;
#endif
#if BMAX >= 10
  case 10: for (; ow0 + 10 <= Wo; ow0 += 10) gspc_block_10(s, a, ow0); break;
#endif
#if BMAX >= 11
  case 11: for (; ow0 + 11 <= Wo; ow0 += 11) gspc_block_11(s, a, ow0); break;
#endif
#if BMAX >= 12
  case 12: for (; ow0 + 12 <= Wo; ow0 += 12) gspc_block_12(s, a, ow0); break;
#endif
#if BMAX >= 13
  case 13: for (; ow0 + 13 <= Wo; ow0 += 13) gspc_block_13(s, a, ow0); break;
#endif
#if BMAX >= 14
  case 14: for (; ow0 + 14 <= Wo; ow0 += 14) gspc_block_14(s, a, ow0); break;
#endif
#if BMAX >= 15
  case 15: for (; ow0 + 15 <= Wo; ow0 += 15) gspc_block_15(s, a, ow0); break;
#endif
#if BMAX >= 16
  case 16: for (; ow0 + 16 <= Wo; ow0 += 16) gspc_block_16(s, a, ow0); break;
#endif
#if BMAX >= 17
  case 17: for (; ow0 + 17 <= Wo; ow0 += 17) gspc_block_17(s, a, ow0); break;
#endif
#if BMAX >= 18
  case 18: for (; ow0 + 18 <= Wo; ow0 += 18) gspc_block_18(s, a, ow0); break;
#endif
#if BMAX >= 19
  case 19: for (; ow0 + 19 <= Wo; ow0 += 19) gspc_block_19(s, a, ow0); break;
#endif
#if BMAX >= 20
  case 20: for (; ow0 + 20 <= Wo; ow0 += 20) gspc_block_20(s, a, ow0); break;
#endif
#if BMAX >= 21
  case 21: for (; ow0 + 21 <= Wo; ow0 += 21) gspc_block_21(s, a, ow0); break;
#endif
#if BMAX >= 22
  case 22: for (; ow0 + 22 <= Wo; ow0 += 22) gspc_block_22(s, a, ow0); break;
#endif
#if BMAX >= 23
  case 23: for (; ow0 + 23 <= Wo; ow0 += 23) gspc_block_23(s, a, ow0); break;
#endif
#if BMAX >= 24
  case 24: for (; ow0 + 24 <= Wo; ow0 += 24) gspc_block_24(s, a, ow0); break;
#endif
#if BMAX >= 25
  case 25: for (; ow0 + 25 <= Wo; ow0 += 25) gspc_block_25(s, a, ow0); break;
#endif
#if BMAX >= 26
  case 26: for (; ow0 + 26 <= Wo; ow0 += 26) gspc_block_26(s, a, ow0); break;
#endif
#if BMAX >= 27
  case 27: for (; ow0 + 27 <= Wo; ow0 += 27) gspc_block_27(s, a, ow0); break;
#endif
#if BMAX >= 28
  case 28: for (; ow0 + 28 <= Wo; ow0 += 28) gspc_block_28(s, a, ow0); break;
#endif
  default: break;
  }
  while (ow0 < Wo) {
    const size_t left = Wo - ow0, n = left < BMAX ? left : BMAX;
    switch (n) {
    case 1: gspc_block_1(s, a, ow0); break;
    case 2: gspc_block_2(s, a, ow0); break;
    case 3: gspc_block_3(s, a, ow0); break;
    case 4: gspc_block_4(s, a, ow0); break;
#if BMAX > 5
    case 5: gspc_block_5(s, a, ow0); break;
#endif
#if BMAX > 6
    case 6: gspc_block_6(s, a, ow0); break;
#endif
#if BMAX > 7
    case 7: gspc_block_7(s, a, ow0); break;
#endif
#if BMAX > 8
    case 8: gspc_block_8(s, a, ow0); break;
#endif
#if BMAX > 9
    case 9: gspc_block_9(s, a, ow0); break;
#endif
#if BMAX > 10
    case 10: gspc_block_10(s, a, ow0); break;
#endif
#if BMAX > 11
    case 11: gspc_block_11(s, a, ow0); break;
#endif
#if BMAX > 12
    case 12: gspc_block_12(s, a, ow0); break;
#endif
#if BMAX > 13
    case 13: gspc_block_13(s, a, ow0); break;
#endif
#if BMAX > 14
    case 14: gspc_block_14(s, a, ow0); break;
#endif
#if BMAX > 15
    case 15: gspc_block_15(s, a, ow0); break;
#endif
#if BMAX > 16
    case 16: gspc_block_16(s, a, ow0); break;
#endif
#if BMAX > 17
    case 17: gspc_block_17(s, a, ow0); break;
#endif
#if BMAX > 18
    case 18: gspc_block_18(s, a, ow0); break;
#endif
#if BMAX > 19
    case 19: gspc_block_19(s, a, ow0); break;
#endif
#if BMAX > 20
    case 20: gspc_block_20(s, a, ow0); break;
#endif
#if BMAX > 21
    case 21: gspc_block_21(s, a, ow0); break;
#endif
#if BMAX > 22
    case 22: gspc_block_22(s, a, ow0); break;
#endif
#if BMAX > 23
    case 23: gspc_block_23(s, a, ow0); break;
#endif
#if BMAX > 24
    case 24: gspc_block_24(s, a, ow0); break;
#endif
#if BMAX > 25
    case 25: gspc_block_25(s, a, ow0); break;
#endif
#if BMAX > 26
    case 26: gspc_block_26(s, a, ow0); break;
#endif
#if BMAX > 27
    case 27: gspc_block_27(s, a, ow0); break;
#endif
    default: GSPC_CAT(gspc_block_, BMAX)(s, a, ow0);
    }
    ow0 += n;
  }
}
