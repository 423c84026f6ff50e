/* Direct few-input-channel conv body (see f32-conv-smallc.h) shared by the SIMD files: the includer picks the
 * vector vocabulary and SMALLC_FN(name) the suffixed function name. A register tile is TW output pixels of one
 * row x NV weight vectors (OB = NV * EC_VL output channels): per tap, NV weight loads and TW broadcast input
 * values feed TW * NV FMAs. A row is computed SMALLC_SEG pixels at a time into a buffer of [pixel][OB] (in L1),
 * which is then stored: blocked outputs a vector per pixel, NCHW ones through EC_VL x EC_VL transposes, so both
 * write whole vectors along their rows. Pixels whose window reads the left/right padding take a one-pixel path
 * that clips the window's columns; rows clip their window's rows before the tiles. */
#ifndef SMALLC_TW
#define SMALLC_TW 6 /* pixels per tile at NV = 2 (twice that at NV = 1): 12 accumulators */
#endif
#ifndef SMALLC_TW_S1
#define SMALLC_TW_S1 SMALLC_TW /* the same at stride 1 */
#endif
/* broadcast from memory: the includer's load-and-splat builtin */
#ifndef SMALLC_BCAST
#define SMALLC_BCAST(p) ec_vset1(*(p))
#endif
/* The input pointer made opaque at each window column: otherwise gcc sees that column kw's broadcasts are column
 * kw-1's shifted by a pixel (by half a tile at stride 2), carries them across iterations and, with 12 accumulators
 * live, spills both to the stack (0.55x the speed on the 7x7 s2 stem, 0.35x on a 5x5 s1 layer). */
#if defined(__GNUC__)
#define SMALLC_OPAQUE(p) __asm__("" : "+r"(p))
#else
#define SMALLC_OPAQUE(p) (void)0
#endif
#define SMALLC_SEG 48 /* pixels per buffered pass: a multiple of EC_VL and of either tile width */

#if defined(__GNUC__) && !defined(__clang__)
#define SMALLC_UNROLL _Pragma("GCC unroll 16")
#else
#define SMALLC_UNROLL
#endif

/* tw pixels from output column ow (whole windows inside the input columns), rows [kh0, kh1) of the window */
EC_INLINE void SMALLC_FN(smallc_tile)(const f32_conv_smallc_shape *s, const float *x, const float *w,
                                      const float *bias, float *buf, ptrdiff_t ih0, size_t kh0, size_t kh1,
                                      size_t ow, const size_t tw, const size_t nv, const size_t sw) {
  ec_v acc[2 * SMALLC_TW][2];
  const ec_v b0 = ec_vld(bias), b1 = nv > 1 ? ec_vld(bias + EC_VL) : ec_vzero();
  SMALLC_UNROLL
  for (size_t j = 0; j < tw; j++) acc[j][0] = b0, acc[j][1] = b1;
  const size_t H = s->H, W = s->W, KH = s->KH, KW = s->KW, iw0 = ow * sw - s->PL;
  for (size_t c = 0; c < s->C; c++)
    for (size_t kh = kh0; kh < kh1; kh++) {
      const float *xr = x + (c * H + (size_t)(ih0 + (ptrdiff_t)kh)) * W + iw0;
      const float *wr = w + (c * KH + kh) * KW * nv * EC_VL;
      for (size_t kw = 0; kw < KW; kw++, xr++, wr += nv * EC_VL) {
        SMALLC_OPAQUE(xr);
        const ec_v w0 = ec_vld(wr), w1 = nv > 1 ? ec_vld(wr + EC_VL) : ec_vzero();
        SMALLC_UNROLL
        for (size_t j = 0; j < tw; j++) {
          const ec_v xv = SMALLC_BCAST(xr + j * sw);
          acc[j][0] = ec_vfma(acc[j][0], xv, w0);
          if (nv > 1) acc[j][1] = ec_vfma(acc[j][1], xv, w1);
        }
      }
    }
  SMALLC_UNROLL
  for (size_t j = 0; j < tw; j++) {
    ec_vst(buf + j * nv * EC_VL, acc[j][0]);
    if (nv > 1) ec_vst(buf + j * nv * EC_VL + EC_VL, acc[j][1]);
  }
}

/* one pixel, its window's columns clipped to the input: those reaching into the side padding, and a row's last
 * few when it has fewer than a tile. Four partial sums per vector, so the FMAs do not wait on each other (one
 * chain of 100 dependent FMAs per pixel cost a 5x5 layer at 96 wide a quarter of its time). */
EC_INLINE void SMALLC_FN(smallc_edge)(const f32_conv_smallc_shape *s, const float *x, const float *w,
                                      const float *bias, float *buf, ptrdiff_t ih0, size_t kh0, size_t kh1,
                                      size_t ow, const size_t nv, const size_t sw) {
  const ptrdiff_t iw0 = (ptrdiff_t)(ow * sw) - (ptrdiff_t)s->PL, W = (ptrdiff_t)s->W;
  const size_t kw0 = iw0 < 0 ? (size_t)-iw0 : 0;
  const size_t kw1 = iw0 >= W ? 0 : EC_MIN(s->KW, (size_t)(W - iw0));
  ec_v acc[4][2];
  for (size_t i = 0; i < 4; i++) acc[i][0] = acc[i][1] = ec_vzero();
  size_t t = 0;
  for (size_t c = 0; c < s->C; c++)
    for (size_t kh = kh0; kh < kh1; kh++) {
      const float *xr = x + (c * s->H + (size_t)(ih0 + (ptrdiff_t)kh)) * s->W;
      const float *wr = w + (c * s->KH + kh) * s->KW * nv * EC_VL;
      for (size_t kw = kw0; kw < kw1; kw++, t++) {
        const ec_v xv = SMALLC_BCAST(xr + (size_t)(iw0 + (ptrdiff_t)kw));
        acc[t & 3][0] = ec_vfma(acc[t & 3][0], xv, ec_vld(wr + kw * nv * EC_VL));
        if (nv > 1) acc[t & 3][1] = ec_vfma(acc[t & 3][1], xv, ec_vld(wr + kw * nv * EC_VL + EC_VL));
      }
    }
  ec_vst(buf, ec_vadd(ec_vadd(ec_vld(bias), ec_vadd(acc[0][0], acc[1][0])), ec_vadd(acc[2][0], acc[3][0])));
  if (nv > 1)
    ec_vst(buf + EC_VL,
           ec_vadd(ec_vadd(ec_vld(bias + EC_VL), ec_vadd(acc[0][1], acc[1][1])), ec_vadd(acc[2][1], acc[3][1])));
}

/* the epilogue with the activation's kind a constant (the common kinds get their own copy of the store below:
 * a switch per vector cost 10% of the 3x3 s2 stem) */
EC_INLINE ec_v SMALLC_FN(smallc_epi)(ec_v acc, const float *res, size_t m, const f32_conv_smallc_args *a,
                                     const ec_act_kind kind) {
  if (res && a->res_before_act) acc = ec_vadd(acc, m == EC_VL ? ec_vld(res) : ec_vld_n(res, m));
  acc = ec_vact_k(kind, a->act, acc);
  if (res && !a->res_before_act) acc = ec_vadd(acc, m == EC_VL ? ec_vld(res) : ec_vld_n(res, m));
  return acc;
}

EC_INLINE void SMALLC_FN(smallc_store)(const f32_conv_smallc_shape *s, const f32_conv_smallc_args *a,
                                       const float *buf, size_t n, size_t oh, size_t ob, size_t ow0, size_t np,
                                       const size_t nv, const ec_act_kind kind) {
  const size_t OB = nv * EC_VL;
  if (s->CB) {
    const size_t kb = EC_DIV_UP(s->K, s->CB);
    for (size_t v = 0; v < nv; v++) {
      const size_t oc0 = ob * OB + v * EC_VL, blk = oc0 / s->CB;
      if (blk >= kb) continue;
      const size_t base = (((n * kb + blk) * s->Ho + oh) * s->Wo + ow0) * s->CB + oc0 % s->CB;
      for (size_t p = 0; p < np; p++) {
        const size_t o = base + p * s->CB;
        ec_vst(a->y + o, SMALLC_FN(smallc_epi)(ec_vld(buf + p * OB + v * EC_VL), a->res ? a->res + o : NULL, EC_VL,
                                               a, kind));
      }
    }
    return;
  }
  const size_t HoWo = s->Ho * s->Wo;
  for (size_t v = 0; v < nv; v++) {
    const size_t oc0 = ob * OB + v * EC_VL;
    if (oc0 >= s->K) continue;
    const size_t lanes = EC_MIN((size_t)EC_VL, s->K - oc0);
    for (size_t p = 0; p < np; p += EC_VL) {
      const size_t m = EC_MIN((size_t)EC_VL, np - p);
      ec_v r[EC_VL];
      SMALLC_UNROLL
      for (size_t i = 0; i < EC_VL; i++) r[i] = i < m ? ec_vld(buf + (p + i) * OB + v * EC_VL) : ec_vzero();
      ec_vtranspose(r); /* r[l]: channel oc0 + l at pixels p.. */
      const size_t o0 = (n * s->K + oc0) * HoWo + oh * s->Wo + ow0 + p;
      if (m == EC_VL) {
        SMALLC_UNROLL
        for (size_t l = 0; l < EC_VL; l++)
          if (l < lanes) {
            const size_t o = o0 + l * HoWo;
            ec_vst(a->y + o, SMALLC_FN(smallc_epi)(r[l], a->res ? a->res + o : NULL, EC_VL, a, kind));
          }
      } else {
        for (size_t l = 0; l < lanes; l++) {
          const size_t o = o0 + l * HoWo;
          ec_vst_n(a->y + o, SMALLC_FN(smallc_epi)(r[l], a->res ? a->res + o : NULL, m, a, kind), m);
        }
      }
    }
  }
}

/* the rarer activations (SiLU, GELU, ...) share one out-of-line store: inlined into each of the six item
 * copies, their vector exp/tanh/erf bodies made this file the slowest of the runtime to compile */
static __attribute__((noinline)) void SMALLC_FN(smallc_store_any)(const f32_conv_smallc_shape *s,
                                                                  const f32_conv_smallc_args *a, const float *buf,
                                                                  size_t n, size_t oh, size_t ob, size_t ow0,
                                                                  size_t np, const size_t nv) {
  SMALLC_FN(smallc_store)(s, a, buf, n, oh, ob, ow0, np, nv, a->act.kind);
}

EC_INLINE void SMALLC_FN(smallc_item)(const f32_conv_smallc_shape *s, const f32_conv_smallc_args *a, size_t item,
                                      const size_t nv, const size_t sw) {
  size_t n, oh0, ob;
  f32_conv_smallc_item(s, item, &n, &oh0, &ob);
  const size_t OB = nv * EC_VL, tw = (sw == 1 ? SMALLC_TW_S1 : SMALLC_TW) * (nv > 1 ? 1 : 2);
  const float *x = a->x + n * s->C * s->H * s->W, *w = a->w + ob * s->C * s->KH * s->KW * OB;
  const float *bias = a->bias + ob * OB;
  size_t lo, hi;
  f32_conv_smallc_interior(s, &lo, &hi);
  EC_ALIGNED(64) float buf[SMALLC_SEG * 2 * EC_VL];
  for (size_t oh = oh0; oh < EC_MIN(s->Ho, oh0 + s->RC); oh++) {
    const ptrdiff_t ih0 = (ptrdiff_t)(oh * s->SH) - (ptrdiff_t)s->PT, H = (ptrdiff_t)s->H;
    const size_t kh0 = ih0 < 0 ? EC_MIN(s->KH, (size_t)-ih0) : 0;
    const size_t kh1 = ih0 >= H ? kh0 : EC_MAX(kh0, EC_MIN(s->KH, (size_t)(H - ih0)));
    for (size_t ow0 = 0; ow0 < s->Wo; ow0 += SMALLC_SEG) {
      const size_t ow1 = EC_MIN(s->Wo, ow0 + SMALLC_SEG);
      size_t ow = ow0;
      while (ow < ow1) {
        if (ow < lo || ow >= hi) {
          SMALLC_FN(smallc_edge)(s, x, w, bias, buf + (ow - ow0) * OB, ih0, kh0, kh1, ow, nv, sw);
          ow++;
          continue;
        }
        const size_t e = EC_MIN(ow1, hi), b = ow;
        for (; ow + tw <= e; ow += tw)
          SMALLC_FN(smallc_tile)(s, x, w, bias, buf + (ow - ow0) * OB, ih0, kh0, kh1, ow, tw, nv, sw);
        if (ow < e && e - b >= tw) { /* the tail as one more tile ending at e, its first pixels computed again */
          SMALLC_FN(smallc_tile)(s, x, w, bias, buf + (e - tw - ow0) * OB, ih0, kh0, kh1, e - tw, tw, nv, sw);
          ow = e;
        }
        for (; ow < e; ow++)
          SMALLC_FN(smallc_edge)(s, x, w, bias, buf + (ow - ow0) * OB, ih0, kh0, kh1, ow, nv, sw);
      }
      switch (a->act.kind) {
      case EC_ACT_NONE: SMALLC_FN(smallc_store)(s, a, buf, n, oh, ob, ow0, ow1 - ow0, nv, EC_ACT_NONE); break;
      case EC_ACT_RELU: SMALLC_FN(smallc_store)(s, a, buf, n, oh, ob, ow0, ow1 - ow0, nv, EC_ACT_RELU); break;
      case EC_ACT_CLIP: SMALLC_FN(smallc_store)(s, a, buf, n, oh, ob, ow0, ow1 - ow0, nv, EC_ACT_CLIP); break;
      default: SMALLC_FN(smallc_store_any)(s, a, buf, n, oh, ob, ow0, ow1 - ow0, nv); break;
      }
    }
  }
}

/* the tile shapes and the common strides as constants, so each copy's inner loops fold them. (The window width
 * stays a variable: with 3 or 7 constant, gcc unrolled kw, merged the overlapping stride-2 broadcasts and spilled
 * them: 1.5x the time.) */
void SMALLC_FN(f32_conv_smallc)(const f32_conv_smallc_shape *s, const f32_conv_smallc_args *a, size_t item) {
  if (s->OB == 2 * EC_VL) {
    if (s->SW == 2) SMALLC_FN(smallc_item)(s, a, item, 2, 2);
    else if (s->SW == 1) SMALLC_FN(smallc_item)(s, a, item, 2, 1);
    else SMALLC_FN(smallc_item)(s, a, item, 2, s->SW);
  } else {
    if (s->SW == 2) SMALLC_FN(smallc_item)(s, a, item, 1, 2);
    else if (s->SW == 1) SMALLC_FN(smallc_item)(s, a, item, 1, 1);
    else SMALLC_FN(smallc_item)(s, a, item, 1, s->SW);
  }
}
