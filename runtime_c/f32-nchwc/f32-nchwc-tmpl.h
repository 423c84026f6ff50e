/* Channel-blocked kernel bodies (see f32-nchwc.h) shared by the SIMD files: the includer picks the
 * vocabulary (CB = EC_VL) and NCHWC_FN(name) the suffixed function name. The 1x1 conv tile is
 * NCHWC_PT pixels x KT (1-4) output-channel blocks: per input channel, PT broadcast input scalars times KT
 * weight vectors into KT*PT accumulators (the blocked-1x1 scheme: no packing of the input at all). */
#ifndef NCHWC_PT
#define NCHWC_PT 6
#endif

#if defined(__GNUC__) && !defined(__clang__)
#define NCHWC_UNROLL _Pragma("GCC unroll 16")
#else
#define NCHWC_UNROLL
#endif

void NCHWC_FN(f32_nchwc_to_blocked)(const f32_nchwc_reorder_shape *s, const float *x, float *y, size_t item) {
  const size_t nb = EC_DIV_UP(s->C, (size_t)EC_VL), n = item / nb, c0 = (item % nb) * EC_VL, HW = s->HW;
  const size_t nc = EC_MIN((size_t)EC_VL, s->C - c0);
  const float *src = x + (n * s->C + c0) * HW;
  float *d = y + item * HW * EC_VL;
  /* a square at a time: nc planes' pixels loaded, transposed in registers, one vector per pixel. Whole squares
   * of a whole block first, with no per-lane choice in the loop: with it the loop ran 2.2x slower (192ch@28,
   * Zen 3) */
  size_t p = 0;
  if (nc == EC_VL)
    for (; p + EC_VL <= HW; p += EC_VL) {
      ec_v t[EC_VL];
      for (size_t l = 0; l < EC_VL; l++) t[l] = ec_vld(src + l * HW + p);
      ec_vtranspose(t);
      for (size_t i = 0; i < EC_VL; i++) ec_vst(d + (p + i) * EC_VL, t[i]);
    }
  for (; p < HW; p += EC_VL) {
    const size_t m = EC_MIN((size_t)EC_VL, HW - p);
    ec_v t[EC_VL];
    for (size_t l = 0; l < EC_VL; l++)
      t[l] = l >= nc ? ec_vzero() : m == EC_VL ? ec_vld(src + l * HW + p) : ec_vld_n(src + l * HW + p, m);
    ec_vtranspose(t);
    for (size_t i = 0; i < m; i++) ec_vst(d + (p + i) * EC_VL, t[i]);
  }
}

void NCHWC_FN(f32_nchwc_from_blocked)(const f32_nchwc_reorder_shape *s, const float *x, float *y, size_t item) {
  const size_t nb = EC_DIV_UP(s->C, (size_t)EC_VL), n = item / nb, c0 = (item % nb) * EC_VL, HW = s->HW;
  const size_t nc = EC_MIN((size_t)EC_VL, s->C - c0);
  const float *src = x + item * HW * EC_VL;
  float *d = y + (n * s->C + c0) * HW;
  size_t p = 0;
  if (nc == EC_VL) /* whole squares of a whole block first (as in f32_nchwc_to_blocked) */
    for (; p + EC_VL <= HW; p += EC_VL) {
      ec_v t[EC_VL];
      for (size_t i = 0; i < EC_VL; i++) t[i] = ec_vld(src + (p + i) * EC_VL);
      ec_vtranspose(t);
      for (size_t l = 0; l < EC_VL; l++) ec_vst(d + l * HW + p, t[l]);
    }
  if (nc == EC_VL && p < HW && HW - p <= EC_VL / 2) { /* a short pixel tail: scalar copies, not nc masked stores */
    for (size_t l = 0; l < EC_VL; l++)
      for (size_t i = p; i < HW; i++) d[l * HW + i] = src[i * EC_VL + l];
    return;
  }
  for (; p < HW; p += EC_VL) {
    const size_t m = EC_MIN((size_t)EC_VL, HW - p);
    ec_v t[EC_VL];
    for (size_t i = 0; i < EC_VL; i++) t[i] = i < m ? ec_vld(src + (p + i) * EC_VL) : ec_vzero();
    ec_vtranspose(t);
    for (size_t l = 0; l < nc; l++) {
      if (m == EC_VL) ec_vst(d + l * HW + p, t[l]);
      else ec_vst_n(d + l * HW + p, t[l], m);
    }
  }
}

/* the tile's pixels NCHWC_PF_DIST blocks ahead: each block of input channels is a plane HW pixels further on,
 * a stride the hardware prefetchers do not follow across tiles (integer arithmetic: the address may lie past the
 * input's end, and a prefetch never faults) */
#ifndef NCHWC_PF_DIST
#define NCHWC_PF_DIST 2
#endif
#define NCHWC_PF_NEXT(q, n)                                                                                      \
  {                                                                                                              \
    const uintptr_t q_ = (uintptr_t)(q);                                                                         \
    NCHWC_UNROLL                                                                                                 \
    for (size_t p_ = 0; p_ < (n) * EC_VL * sizeof(float); p_ += 64) __builtin_prefetch((const void *)(q_ + p_)); \
  }

/* the epilogue over the stored pixels (n floats from y) of kt blocks ystride floats apart, after the last pass over
 * the input channels: once per row of tiles, one activation switch per row. In each tile's stores, inside the
 * accumulators' live range, the per-vector epilogue cost a dense 1x1 12-19% of its time on Zen 3. */
EC_NOINLINE void NCHWC_FN(f32_nchwc_1x1_epi)(const f32_nchwc_conv_args *a, float *y, const float *res, size_t ystride,
                                             size_t kt, size_t n) {
  for (size_t j = 0; j < kt; j++)
    ec_vepi_row(y + j * ystride, res ? res + j * ystride : NULL, n, a->res_before_act, a->act);
}

/* a tile's accumulators (kt blocks, ystride floats apart): the bias on the first pass over the input channels
 * (first = 2: plus the residual the output's buffer holds, f32_nchwc_1x1_blocks), the partial sums after it */
#define NCHWC_1X1_ACC_INIT()                                                                                     \
  NCHWC_UNROLL                                                                                                   \
  for (size_t j = 0; j < kt; j++) {                                                                              \
    const ec_v b_ = ec_vld(bias + j * EC_VL);                                                                    \
    NCHWC_UNROLL                                                                                                 \
    for (size_t p = 0; p < pt; p++)                                                                              \
      acc[p][j] = !first       ? ec_vld(y + j * ystride + p * EC_VL)                                             \
                  : first == 2 ? ec_vadd(b_, ec_vld(y + j * ystride + p * EC_VL))                                \
                               : b_;                                                                             \
  }

/* ... and stored (the epilogue runs over the whole row afterwards, f32_nchwc_1x1_epi) */
#define NCHWC_1X1_ACC_STORE()                                                                                    \
  NCHWC_UNROLL                                                                                                   \
  for (size_t j = 0; j < kt; j++) {                                                                              \
    NCHWC_UNROLL                                                                                                 \
    for (size_t p = 0; p < pt; p++) ec_vst(y + j * ystride + p * EC_VL, acc[p][j]);                              \
  }

/* The same tile for a dense conv (one group: every block reads every channel of the pass [c0, c1), c0 a whole
 * block), kt <= 4 blocks wstride floats apart from w (channel 0's rows): whole blocks with the lane loop unrolled
 * (constant offsets), then a partial last block. The general tile's run and segment bookkeeping around its lane
 * loop held it to 57-66% of the FMA peak on 576->576 at 14x14 (Zen 3) where this form runs at 80-90%. */
EC_INLINE void NCHWC_FN(f32_nchwc_1x1_dense_tile)(const float *x, const float *w, size_t wstride, const float *bias,
                                                    float *y, size_t HW, size_t YHW, const size_t pt, const size_t kt,
                                                    size_t c0, size_t c1, int first, uintptr_t pf, uintptr_t pf_end,
                                                    size_t pfn) {
  const size_t ystride = YHW * EC_VL, cw = c1 / EC_VL;
  ec_v acc[NCHWC_PT][4];
  NCHWC_1X1_ACC_INIT()
  for (size_t cb = c0 / EC_VL; cb < cw; cb++) {
    const float *xb = x + cb * HW * EC_VL, *wc = w + cb * EC_VL * EC_VL;
    /* pfn lines of the next item's weights a block of channels, into L2 (f32_nchwc_1x1_dense_row) */
    for (size_t q = 0; q < pfn && pf < pf_end; q++, pf += 64) __builtin_prefetch((const void *)pf, 0, 2);
    /* NCHWC_PF_DIST blocks ahead, into the next tile's first blocks near the end */
    NCHWC_PF_NEXT(cb + NCHWC_PF_DIST < cw ? xb + NCHWC_PF_DIST * HW * EC_VL
                                           : x + (cb + NCHWC_PF_DIST - cw + c0 / EC_VL) * HW * EC_VL + pt * EC_VL, pt)
    NCHWC_UNROLL
    for (size_t l = 0; l < EC_VL; l++) {
      ec_v v[4];
      NCHWC_UNROLL
      for (size_t j = 0; j < kt; j++) v[j] = ec_vld(wc + j * wstride + l * EC_VL);
      NCHWC_UNROLL
      for (size_t p = 0; p < pt; p++) {
        const ec_v xv = ec_vset1(xb[p * EC_VL + l]);
        NCHWC_UNROLL
        for (size_t j = 0; j < kt; j++) acc[p][j] = ec_vfma(acc[p][j], xv, v[j]);
      }
    }
  }
  for (size_t c = EC_MAX(c0, cw * EC_VL); c < c1; c++) { /* C not whole blocks: the last one's real lanes */
    const float *xb = x + cw * HW * EC_VL + c % EC_VL;
    ec_v v[4];
    NCHWC_UNROLL
    for (size_t j = 0; j < kt; j++) v[j] = ec_vld(w + j * wstride + c * EC_VL);
    NCHWC_UNROLL
    for (size_t p = 0; p < pt; p++) {
      const ec_v xv = ec_vset1(xb[p * EC_VL]);
      NCHWC_UNROLL
      for (size_t j = 0; j < kt; j++) acc[p][j] = ec_vfma(acc[p][j], xv, v[j]);
    }
  }
  NCHWC_1X1_ACC_STORE()
}

#ifndef NCHWC_1X1_SEGS
#define NCHWC_1X1_SEGS
/* a segment of input channels [c0, c1) of a grouped 1x1 tile, read by its blocks [ja, ja + nb); w[j]: block
 * ja + j's weight row for channel c0 */
typedef struct {
  size_t c0, c1, ja, nb;
  const float *w[2];
} f32_nchwc_1x1_seg;
#endif

/* channel c of segment g into blocks [JA, JA + NB) of the tile: NB weight rows, pt broadcasts */
#define NCHWC_BAND_CH(g, JA, NB, c, l)                                                                            \
  {                                                                                                              \
    ec_v v_[2];                                                                                                  \
    NCHWC_UNROLL                                                                                                 \
    for (size_t j = 0; j < (NB); j++) v_[j] = ec_vld((g)->w[j] + ((c) - (g)->c0) * EC_VL);                      \
    NCHWC_UNROLL                                                                                                 \
    for (size_t p = 0; p < pt; p++) {                                                                            \
      const ec_v xv_ = ec_vset1(xb[p * EC_VL + (l)]);                                                            \
      NCHWC_UNROLL                                                                                               \
      for (size_t j = 0; j < (NB); j++) acc[p][(JA) + j] = ec_vfma(acc[p][(JA) + j], xv_, v_[j]);                \
    }                                                                                                            \
  }

/* one segment with constant JA and NB, so every accumulator index is a constant: partial blocks channel by
 * channel, whole ones with the lanes unrolled (the dense tile's form) */
#define NCHWC_BAND_SEG(JA, NB)                                                                                    \
  case (JA) * 8 + (NB): {                                                                                        \
    if ((JA) + (NB) > kt) break; /* no such run in a tile of kt blocks: the case compiles away */               \
    size_t c = g->c0;                                                                                            \
    for (; c < g->c1 && (c % EC_VL || c + EC_VL > g->c1); c++) {                                                 \
      const float *xb = x + c / EC_VL * HW * EC_VL;                                                              \
      NCHWC_BAND_CH(g, JA, NB, c, c % EC_VL)                                                                     \
    }                                                                                                            \
    for (; c + EC_VL <= g->c1; c += EC_VL) {                                                                     \
      const float *xb = x + c / EC_VL * HW * EC_VL;                                                              \
      NCHWC_UNROLL                                                                                               \
      for (size_t l = 0; l < EC_VL; l++) NCHWC_BAND_CH(g, JA, NB, c + l, l)                                      \
    }                                                                                                            \
    for (; c < g->c1; c++) {                                                                                     \
      const float *xb = x + c / EC_VL * HW * EC_VL;                                                              \
      NCHWC_BAND_CH(g, JA, NB, c, c % EC_VL)                                                                     \
    }                                                                                                            \
    break;                                                                                                       \
  }

/* pt pixels x kt (1 or 2) blocks of a grouped 1x1 over the segments its blocks' channel ranges make (a band: block
 * j reads [lo_j, hi_j), both non-decreasing in j); pt and kt constants after inlining. The tile it replaced, its
 * lanes a loop with per-run bounds, held a merged pair of 24-channel groups (the blocked Winograd's GEMMs) to
 * 0.92x the time of the dense tile computing their zeros too. */
EC_INLINE void NCHWC_FN(f32_nchwc_1x1_band_tile)(const float *x, const float *bias, float *y, size_t HW,
                                                   const size_t pt, const size_t kt, const f32_nchwc_1x1_seg *sg,
                                                   size_t ns, int first) {
  const size_t ystride = HW * EC_VL;
  ec_v acc[NCHWC_PT][2];
  NCHWC_1X1_ACC_INIT()
  for (const f32_nchwc_1x1_seg *g = sg; g < sg + ns; g++) {
    switch (g->ja * 8 + g->nb) {
      NCHWC_BAND_SEG(0, 1)
      NCHWC_BAND_SEG(0, 2)
      NCHWC_BAND_SEG(1, 1)
    default: break;
    }
  }
  NCHWC_1X1_ACC_STORE()
}

/* the pixels [p0, p1) of a band tile row */
EC_INLINE void NCHWC_FN(f32_nchwc_1x1_band_row)(const f32_nchwc_conv_args *a, const float *x, const float *bias,
                                                  float *y, const float *res, size_t HW, const size_t kt, size_t p0,
                                                  size_t p1, const f32_nchwc_1x1_seg *sg, size_t ns, int first,
                                                  int last) {
  size_t p = p0;
  for (; p + NCHWC_PT <= p1; p += NCHWC_PT)
    NCHWC_FN(f32_nchwc_1x1_band_tile)(x + p * EC_VL, bias, y + p * EC_VL, HW, NCHWC_PT, kt, sg, ns, first);
  /* the last 1-5 pixels: a tile of 3, then single pixels (fewer instances of the unrolled tile to compile) */
  if (p + 3 <= p1) {
    NCHWC_FN(f32_nchwc_1x1_band_tile)(x + p * EC_VL, bias, y + p * EC_VL, HW, 3, kt, sg, ns, first);
    p += 3;
  }
  for (; p < p1; p++) NCHWC_FN(f32_nchwc_1x1_band_tile)(x + p * EC_VL, bias, y + p * EC_VL, HW, 1, kt, sg, ns, first);
  if (last)
    NCHWC_FN(f32_nchwc_1x1_epi)(a, y + p0 * EC_VL, res ? res + p0 * EC_VL : NULL, HW * EC_VL, kt, (p1 - p0) * EC_VL);
}

/* the dense tiles of pixels [p0, p1) over the passes of KC input channels; kt a constant after inlining */
/* wn, wn_floats: the weights the next item reads. A tile row reuses its blocks' weights from L2 after the first
 * tile, which waits on them from memory; prefetched across this item's tiles, they are in L2 when the next item
 * starts (ResNet-50's 7x7 1x1 convs, weights 128-512 KB an item over 9 tiles, Zen 5: 67% of the FMA peak). */
EC_INLINE void NCHWC_FN(f32_nchwc_1x1_dense_row)(const f32_nchwc_conv_args *a, const float *x, const float *w,
                                                   size_t wstride, const float *bias, float *y, const float *res,
                                                   size_t HW, size_t YHW, const size_t kt, size_t p0, size_t p1,
                                                   size_t C, size_t KC, int acc_out, const float *wn,
                                                   size_t wn_floats) {
  const size_t steps = EC_DIV_UP(p1 - p0, NCHWC_PT) * EC_MAX(C / EC_VL, (size_t)1); /* the tiles' block steps */
  const size_t pfn = EC_DIV_UP(wn_floats * sizeof(float) / 64, steps);
  uintptr_t pf = (uintptr_t)wn;
  const uintptr_t pf_end = pf + wn_floats * sizeof(float);
  for (size_t c0 = 0; c0 < C; c0 += KC) {
    const size_t c1 = EC_MIN(C, c0 + KC), adv = (c1 / EC_VL - c0 / EC_VL) * pfn * 64;
    const int first = c0 == 0 ? 1 + acc_out : 0;
    size_t p = p0;
    for (; p + NCHWC_PT <= p1; p += NCHWC_PT, pf += adv)
      NCHWC_FN(f32_nchwc_1x1_dense_tile)(x + p * EC_VL, w, wstride, bias, y + p * EC_VL, HW, YHW, NCHWC_PT, kt, c0,
                                         c1, first, pf, pf_end, pfn);
    /* the last 1-5 pixels as one tile: one pixel at a time left each accumulator one FMA per channel, waiting
     * on the FMA latency (4 single-pixel tiles were ~8% of a 14x14 layer's time for 2% of its pixels) */
#define NCHWC_DENSE_TAIL(n)                                                                                        \
  case n:                                                                                                        \
    NCHWC_FN(f32_nchwc_1x1_dense_tile)(x + p * EC_VL, w, wstride, bias, y + p * EC_VL, HW, YHW, n, kt, c0, c1,      \
                                       first, pf, pf_end, pfn);                                                  \
    break;
    switch (p1 - p) {
      NCHWC_DENSE_TAIL(1)
      NCHWC_DENSE_TAIL(2)
      NCHWC_DENSE_TAIL(3)
      NCHWC_DENSE_TAIL(4)
      NCHWC_DENSE_TAIL(5)
    default: break;
    }
    if (p < p1) pf += adv;
#undef NCHWC_DENSE_TAIL
  }
  NCHWC_FN(f32_nchwc_1x1_epi)(a, y + p0 * EC_VL, res ? res + p0 * EC_VL : NULL, YHW * EC_VL, kt, (p1 - p0) * EC_VL);
}

/* blocks [k, k + kt) of a grouped 1x1 over pixels [p0, p1) of image n's x, y, res. Block j reads [lo_j, hi_j) (the
 * groups of its first and last real lanes; lo and hi are non-decreasing in j, groups being contiguous): the
 * channel axis splits at every lo and hi into segments, each read by one block or both. With a shuffled input
 * (IS > 1: the input holds the channels of the shuffle's input, a channel c of the conv's being input channel
 * (c % IS) * (C/IS) + c / IS) each segment is IS runs of input channels, one per shuffle group, weight rows in
 * run order. */
EC_INLINE void NCHWC_FN(f32_nchwc_1x1_band)(const f32_nchwc_conv_shape *s, const f32_nchwc_conv_args *a,
                                              const float *x, const float *bias, float *y, const float *res, size_t HW,
                                              size_t k, const size_t kt, size_t p0, size_t p1) {
  size_t lo[2] = {0, 0}, hi[2] = {0, 0}, e[4], ne = 0;
  for (size_t j = 0; j < kt; j++) f32_nchwc_1x1_range(s, k + j, &lo[j], &hi[j]);
  for (size_t i = 0, j = 0; i < kt || j < kt;) { /* merge the sorted lo and hi, without repeats */
    const size_t v = j == kt || (i < kt && lo[i] <= hi[j]) ? lo[i++] : hi[j++];
    if (ne == 0 || e[ne - 1] != v) e[ne++] = v;
  }
  const float *w0 = a->w + k * s->WS * EC_VL;
  const size_t G = s->IS > 1 ? s->IS : 1, cs = s->C / G;
  /* input channels in passes of KC (codegen's pass_channels; one pass with a shuffled input), partial sums in y */
  const size_t kc = G > 1 ? hi[kt - 1] - lo[0] : s->KC;
  for (size_t c0 = lo[0]; c0 < hi[kt - 1]; c0 += kc) {
    const size_t c1 = EC_MIN(hi[kt - 1], c0 + kc);
    f32_nchwc_1x1_seg sg[3 * NCHWC_MAX_RUNS];
    size_t ns = 0, rows[2] = {0, 0}; /* weight rows used so far (shuffled input: runs in order) */
    for (size_t r = 0; r < G; r++)
      for (size_t i = 0; i + 1 < ne; i++) {
        const size_t s0 = EC_MAX(e[i], c0), s1 = EC_MIN(e[i + 1], c1);
        size_t ja = 0, jb = kt;
        while (ja < kt && hi[ja] <= e[i]) ja++; /* the first block still reading at e[i] */
        while (jb > ja && lo[jb - 1] > e[i]) jb--;
        if (s0 >= s1 || ja == jb) continue;
        /* the conv's channels c = m G + r of [s0, s1): input channels r cs + m, m in [(s0 + G-1 - r) / G, ...) */
        const size_t m0 = (s0 + G - 1 - r) / G, m1 = (s1 + G - 1 - r) / G;
        if (m0 == m1) continue;
        f32_nchwc_1x1_seg *g = &sg[ns++];
        g->c0 = G > 1 ? r * cs + m0 : s0, g->c1 = G > 1 ? r * cs + m1 : s1, g->ja = ja, g->nb = jb - ja;
        for (size_t j = ja; j < jb; j++) {
          g->w[j - ja] = w0 + ((j * s->WS) + (G > 1 ? rows[j] : s0 - lo[j])) * EC_VL;
          rows[j] += m1 - m0;
        }
      }
    if (kt > 1) /* kt a constant: the accumulators stay in registers */
      NCHWC_FN(f32_nchwc_1x1_band_row)(a, x, bias, y, res, HW, 2, p0, p1, sg, ns, c0 == lo[0], c1 == hi[1]);
    else
      NCHWC_FN(f32_nchwc_1x1_band_row)(a, x, bias, y, res, HW, 1, p0, p1, sg, ns, c0 == lo[0], c1 == hi[0]);
  }
}

/* output blocks [k, k + kt) of image n over pixels [p0, p1); a dense conv takes kt <= 4 blocks, the others kt <= 2
 * (the codegen's KT) */
EC_INLINE void NCHWC_FN(f32_nchwc_1x1_blocks)(const f32_nchwc_conv_shape *s, const f32_nchwc_conv_args *a,
                                                size_t n, size_t k, const size_t kt, size_t p0, size_t p1) {
  const size_t HW = s->Ho * s->Wo, YHW = s->YHW, kb = EC_DIV_UP(s->K, (size_t)EC_VL);
  const float *x = a->x + n * EC_DIV_UP(s->C, (size_t)EC_VL) * HW * EC_VL, *wa = a->w + k * s->WS * EC_VL;
  const float *bias = a->bias + k * EC_VL;
  const size_t yoff = (n * kb + k) * YHW * EC_VL; /* YHW = HW but for a dense conv's rows */
  float *y = a->y + yoff;
  const float *res = a->res ? a->res + yoff : NULL;
  if (s->G == 1 && s->IS <= 1) { /* dense: every block reads [0, C) */
    /* the residual in the output's own buffer (added before the activation): the first pass starts from it */
    const int acc_out = res != NULL && a->res == a->y && a->res_before_act;
    if (acc_out) res = NULL;
    const size_t ws = s->WS * EC_VL; /* kt a constant per instance: the accumulators stay in registers */
    /* the next item's blocks (f32_nchwc_conv1x1's order: the next block group, else the first for the next pixels) */
    const size_t kn = k + s->KT < kb ? k + s->KT : 0;
    const float *wn = a->wn ? a->wn : a->w + kn * ws;
    const size_t wn_floats = (a->wn ? s->KT : EC_MIN(s->KT, kb - kn)) * ws;
#define NCHWC_DENSE_KT(n)                                                                                          \
  case n:                                                                                                        \
    NCHWC_FN(f32_nchwc_1x1_dense_row)(a, x, wa, ws, bias, y, res, HW, YHW, n, p0, p1, s->C, s->KC, acc_out, wn,    \
                                      wn_floats);                                                                \
    break;
    switch (kt) {
      NCHWC_DENSE_KT(4)
      NCHWC_DENSE_KT(3)
      NCHWC_DENSE_KT(2)
      NCHWC_DENSE_KT(1)
    default: break;
    }
#undef NCHWC_DENSE_KT
    return;
  }
  NCHWC_FN(f32_nchwc_1x1_band)(s, a, x, bias, y, res, HW, k, kt, p0, p1);
}

/* item = (n, KT output blocks, chunk of PC pixels) */
void NCHWC_FN(f32_nchwc_conv1x1)(const f32_nchwc_conv_shape *s, const f32_nchwc_conv_args *a, size_t item) {
  const size_t HW = s->Ho * s->Wo, np = EC_DIV_UP(HW, s->PC), kb = EC_DIV_UP(s->K, (size_t)EC_VL);
  /* block groups vary fastest: consecutive items reuse one pixel chunk of the input from L2 */
  const size_t kq = EC_DIV_UP(kb, s->KT), n = item / (kq * np), k = item % kq * s->KT;
  const size_t p0 = item / kq % np * s->PC, p1 = EC_MIN(HW, p0 + s->PC);
  NCHWC_FN(f32_nchwc_1x1_blocks)(s, a, n, k, EC_MIN(s->KT, kb - k), p0, p1);
}

/* T <= 8 outputs xs input floats and ys output floats apart (adjacent columns of a row, or one column of adjacent
 * rows) from taps kh in [k0, k1), kw in [kwa, kwb), all inside the input: p is the input vector of tap (k0, kwa)
 * for the first output. T is a constant after inlining, so the T accumulators stay in registers: 8 independent
 * FMA chains cover the FMA latency on 2-pipe cores (4, or a lone border column, did not on Zen 3). */
EC_INLINE void NCHWC_FN(f32_nchwc_dw_tile)(const f32_nchwc_conv_shape *s, const f32_nchwc_conv_args *a,
                                            const float *p, const float *w, ec_v bias, size_t k0, size_t k1,
                                            size_t kwa, size_t kwb, float *y, const float *res, size_t xs, size_t ys,
                                            const size_t T) {
  const size_t rstep = s->DH * s->W * EC_VL, cstep = s->DW * EC_VL;
  ec_v acc[8];
  NCHWC_UNROLL
  for (size_t t = 0; t < T; t++) acc[t] = bias;
  for (size_t kh = k0; kh < k1; kh++, p += rstep) {
    const float *wk = w + kh * s->KW * EC_VL, *q = p;
    for (size_t kw = kwa; kw < kwb; kw++, q += cstep) {
      const ec_v wv = ec_vld(wk + kw * EC_VL);
      NCHWC_UNROLL
      for (size_t t = 0; t < T; t++) acc[t] = ec_vfma(acc[t], ec_vld(q + t * xs), wv);
    }
  }
  NCHWC_UNROLL
  for (size_t t = 0; t < T; t++)
    ec_vst(y + t * ys, ec_vepi_lean(acc[t], res ? res + t * ys : NULL, a->res_before_act, a->act));
}

/* n outputs xs / ys apart in tiles of 8, 4 and 1 (same taps for all) */
EC_INLINE void NCHWC_FN(f32_nchwc_dw_run)(const f32_nchwc_conv_shape *s, const f32_nchwc_conv_args *a,
                                           const float *p, const float *w, ec_v bias, size_t k0, size_t k1,
                                           size_t kwa, size_t kwb, float *y, const float *res, size_t xs, size_t ys,
                                           size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    NCHWC_FN(f32_nchwc_dw_tile)(s, a, p + i * xs, w, bias, k0, k1, kwa, kwb, y + i * ys, res ? res + i * ys : NULL,
                                xs, ys, 8);
  if (i + 4 <= n) {
    NCHWC_FN(f32_nchwc_dw_tile)(s, a, p + i * xs, w, bias, k0, k1, kwa, kwb, y + i * ys, res ? res + i * ys : NULL,
                                xs, ys, 4);
    i += 4;
  }
  for (; i < n; i++)
    NCHWC_FN(f32_nchwc_dw_tile)(s, a, p + i * xs, w, bias, k0, k1, kwa, kwb, y + i * ys, res ? res + i * ys : NULL,
                                xs, ys, 1);
}

/* 3x3, dilation 1, every tap inside: output rows oh and oh + 1 (stride 1 down) x T <= 4 columns SW apart, from the
 * 4 input rows from p (rs floats apart). Each of the two middle rows' vectors feeds both output rows, so a pass
 * loads 4 rows' vectors for 72 FMAs where two 1-row passes load 6 (loads, not FMAs, bounded the 1-row tiles on
 * Zen 3). SW and T are constants after inlining: the taps' addresses are constants, repeated loads fold. */
EC_INLINE void NCHWC_FN(f32_nchwc_dw3_2x4)(const f32_nchwc_conv_args *a, const float *p, const float *w, ec_v bias,
                                            size_t rs, float *y, const float *res, size_t ys, const size_t SW,
                                            const size_t T) {
  ec_v acc[2][4];
  NCHWC_UNROLL
  for (size_t t = 0; t < T; t++) acc[0][t] = acc[1][t] = bias;
  NCHWC_UNROLL
  for (size_t r = 0; r < 4; r++) {
    const float *q = p + r * rs;
    NCHWC_UNROLL
    for (size_t kw = 0; kw < 3; kw++) {
      const ec_v w0 = r < 3 ? ec_vld(w + (r * 3 + kw) * EC_VL) : ec_vzero();
      const ec_v w1 = r > 0 ? ec_vld(w + ((r - 1) * 3 + kw) * EC_VL) : ec_vzero();
      NCHWC_UNROLL
      for (size_t t = 0; t < T; t++) {
        const ec_v v = ec_vld(q + (t * SW + kw) * EC_VL);
        if (r < 3) acc[0][t] = ec_vfma(acc[0][t], v, w0);
        if (r > 0) acc[1][t] = ec_vfma(acc[1][t], v, w1);
      }
    }
  }
  NCHWC_UNROLL
  for (size_t i = 0; i < 2; i++)
    NCHWC_UNROLL
    for (size_t t = 0; t < T; t++)
      ec_vst(y + i * ys + t * EC_VL,
             ec_vepi_lean(acc[i][t], res ? res + i * ys + t * EC_VL : NULL, a->res_before_act, a->act));
}

/* 3x3, dilation 1, every tap inside: one output row x T <= 8 columns SW apart (stride 2: a column's third tap is
 * the next one's first, one load for both). SW and T are constants after inlining. */
EC_INLINE void NCHWC_FN(f32_nchwc_dw3_1x8)(const f32_nchwc_conv_args *a, const float *p, const float *w, ec_v bias,
                                            size_t rs, float *y, const float *res, const size_t SW, const size_t T) {
  ec_v acc[8];
  NCHWC_UNROLL
  for (size_t t = 0; t < T; t++) acc[t] = bias;
  NCHWC_UNROLL
  for (size_t r = 0; r < 3; r++) {
    const float *q = p + r * rs;
    NCHWC_UNROLL
    for (size_t kw = 0; kw < 3; kw++) {
      const ec_v wv = ec_vld(w + (r * 3 + kw) * EC_VL);
      NCHWC_UNROLL
      for (size_t t = 0; t < T; t++) acc[t] = ec_vfma(acc[t], ec_vld(q + (t * SW + kw) * EC_VL), wv);
    }
  }
  NCHWC_UNROLL
  for (size_t t = 0; t < T; t++)
    ec_vst(y + t * EC_VL, ec_vepi_lean(acc[t], res ? res + t * EC_VL : NULL, a->res_before_act, a->act));
}

/* interior columns [lo, hi) of one interior output row, stride 2 along it: 8 at a time, then 4, then 1-3 */
EC_INLINE void NCHWC_FN(f32_nchwc_dw3_row_s2)(const f32_nchwc_conv_args *a, const float *row, const float *w,
                                               ec_v bias, size_t rs, float *y, const float *res, size_t lo, size_t hi,
                                               size_t PL) {
  size_t ow = lo;
#define NCHWC_DW3_S2(T)                                                                                          \
  NCHWC_FN(f32_nchwc_dw3_1x8)(a, row + (ow * 2 - PL) * EC_VL, w, bias, rs, y + ow * EC_VL,                       \
                              res ? res + ow * EC_VL : NULL, 2, T)
  for (; ow + 8 <= hi; ow += 8) NCHWC_DW3_S2(8);
  if (ow + 4 <= hi) NCHWC_DW3_S2(4), ow += 4;
  switch (hi - ow) {
  case 3: NCHWC_DW3_S2(3); break;
  case 2: NCHWC_DW3_S2(2); break;
  case 1: NCHWC_DW3_S2(1); break;
  default: break;
  }
#undef NCHWC_DW3_S2
}

/* interior columns [lo, hi) of two interior output rows, stride 1 down: 4 at a time, the last 1-3 as one tile
 * (a 7-wide map's 5 interior columns are one 4 and one 1, none left to run down the rows) */
EC_INLINE void NCHWC_FN(f32_nchwc_dw3_rows2)(const f32_nchwc_conv_args *a, const float *row, const float *w,
                                              ec_v bias, size_t rs, float *y, const float *res, size_t ys, size_t lo,
                                              size_t hi, size_t PL, const size_t SW) {
  size_t ow = lo;
  for (; ow + 4 <= hi; ow += 4)
    NCHWC_FN(f32_nchwc_dw3_2x4)(a, row + (ow * SW - PL) * EC_VL, w, bias, rs, y + ow * EC_VL,
                                res ? res + ow * EC_VL : NULL, ys, SW, 4);
  const float *p = row + (ow * SW - PL) * EC_VL;
  float *yo = y + ow * EC_VL;
  const float *ro = res ? res + ow * EC_VL : NULL;
  switch (hi - ow) {
  case 3: NCHWC_FN(f32_nchwc_dw3_2x4)(a, p, w, bias, rs, yo, ro, ys, SW, 3); break;
  case 2: NCHWC_FN(f32_nchwc_dw3_2x4)(a, p, w, bias, rs, yo, ro, ys, SW, 2); break;
  case 1: NCHWC_FN(f32_nchwc_dw3_2x4)(a, p, w, bias, rs, yo, ro, ys, SW, 1); break;
  default: break;
  }
}

/* item = (n, channel block, PC output rows). A row's interior columns (every kw inside the row) run in tiles of
 * 8 and 4 along the row; the rest (border columns, a short interior tail) run down the interior rows (every kh
 * inside) in tiles of 8 and 4, so short rows (7x7 maps) keep 8 chains too; what is left (the corners) runs
 * one output at a time. Taps outside the input are dropped by computing each output's kh / kw range, never by
 * testing each tap. */
void NCHWC_FN(f32_nchwc_dwconv)(const f32_nchwc_conv_shape *s, const f32_nchwc_conv_args *a, size_t item) {
  const size_t nr = EC_DIV_UP(s->Ho, s->PC), cbn = EC_DIV_UP(s->C, (size_t)EC_VL), blk = item / nr;
  const size_t h0 = item % nr * s->PC, h1 = EC_MIN(s->Ho, h0 + s->PC), cb = blk % cbn, taps = s->KH * s->KW;
  const size_t H = s->H, W = s->W, Wo = s->Wo, SW = s->SW, DW = s->DW, KW = s->KW, KH = s->KH;
  const float *x = a->x + blk * H * W * EC_VL, *w = a->w + cb * taps * EC_VL;
  const ec_v bias = ec_vld(a->bias + cb * EC_VL);
  /* ow in [lo, hi): iw = ow*SW - PL + kw*DW inside [0, W) for every kw; likewise oh in [rlo, rhi) for kh */
  size_t lo = EC_DIV_UP(s->PL, SW), hi = 0, rlo = EC_DIV_UP(s->PT, s->SH), rhi = 0;
  if (W + s->PL >= (KW - 1) * DW + 1) hi = EC_MIN(Wo, (W + s->PL - (KW - 1) * DW - 1) / SW + 1);
  if (hi < lo) hi = lo;
  if (lo > Wo) lo = hi = Wo;
  if (H + s->PT >= (KH - 1) * s->DH + 1) rhi = EC_MIN(s->Ho, (H + s->PT - (KH - 1) * s->DH - 1) / s->SH + 1);
  rlo = EC_MAX(rlo, h0), rhi = EC_MIN(rhi, h1);
  if (rhi < rlo) rhi = rlo;
  /* 3x3 stride 1 undilated: interior rows two at a time (f32_nchwc_dw3_2x4), all their interior columns along
   * the rows */
  const int two = KH == 3 && KW == 3 && s->DH == 1 && DW == 1 && s->SH == 1 && SW == 1;
  /* 3x3 stride 2 undilated: interior rows' interior columns in constant-tap tiles (f32_nchwc_dw3_1x8) */
  const int s2 = KH == 3 && KW == 3 && s->DH == 1 && DW == 1 && s->SH == 2 && SW == 2;
  const size_t tile_hi = two || s2 ? hi : lo + (hi - lo) / 4 * 4; /* interior columns run along rows up to here */
  const size_t ys = Wo * EC_VL, yb = blk * s->Ho * ys;
  float *const y0 = a->y + yb;
  const float *const res0 = a->res ? a->res + yb : NULL;
  for (size_t oh = h0; oh < h1; oh++) {
    const long ih0 = (long)(oh * s->SH) - (long)s->PT;
    size_t k0 = 0, k1 = KH; /* taps rows inside the input */
    while (k0 < k1 && ih0 + (long)(k0 * s->DH) < 0) k0++;
    while (k1 > k0 && ih0 + (long)((k1 - 1) * s->DH) >= (long)H) k1--;
    float *y = y0 + oh * ys;
    const float *res = res0 ? res0 + oh * ys : NULL;
    const float *row = k0 < k1 ? x + (size_t)(ih0 + (long)(k0 * s->DH)) * W * EC_VL : x;
    const int inner = oh >= rlo && oh < rhi; /* its other columns run down the rows below */
    const size_t c1 = inner ? tile_hi : hi;
    if (inner && two && oh + 1 < rhi) { /* this row and the next, interior columns */
      NCHWC_FN(f32_nchwc_dw3_rows2)(a, row, w, bias, W * EC_VL, y, res, ys, lo, c1, s->PL, 1);
      oh++;
      continue;
    }
    if (inner && s2) {
      NCHWC_FN(f32_nchwc_dw3_row_s2)(a, row, w, bias, W * EC_VL, y, res, lo, c1, s->PL);
      continue;
    }
    if (c1 > lo)
      NCHWC_FN(f32_nchwc_dw_run)(s, a, row + (lo * SW - s->PL) * EC_VL, w, bias, k0, k1, 0, KW, y + lo * EC_VL,
                                 res ? res + lo * EC_VL : NULL, SW * EC_VL, EC_VL, c1 - lo);
    if (inner)
      continue;
    for (size_t ow = 0; ow < Wo; ow++) {
      if (ow == lo && c1 > lo) ow = c1;
      if (ow >= Wo) break;
      const long iw0 = (long)(ow * SW) - (long)s->PL;
      size_t kwa = iw0 < 0 ? (size_t)EC_DIV_UP((size_t)-iw0, DW) : 0, kwb = 0; /* iw0 + kw*DW inside [0, W) */
      if (iw0 < (long)W) kwb = EC_MIN(KW, (size_t)((long)W - 1 - iw0) / DW + 1);
      if (kwa >= kwb) kwa = kwb = 0; /* no tap inside: bias only */
      const float *p = kwa < kwb ? row + (size_t)((long)(kwa * DW) + iw0) * EC_VL : row;
      NCHWC_FN(f32_nchwc_dw_tile)(s, a, p, w, bias, k0, k1, kwa, kwb, y + ow * EC_VL, res ? res + ow * EC_VL : NULL,
                                  0, 0, 1);
    }
  }
  if (rhi == rlo)
    return;
  /* the interior rows' remaining columns, each down the rows [rlo, rhi) */
  const float *rows = x + (size_t)((long)(rlo * s->SH) - (long)s->PT) * W * EC_VL;
  for (size_t ow = 0; ow < Wo; ow++) {
    if (ow == lo && tile_hi > lo) ow = tile_hi;
    if (ow >= Wo) break;
    const long iw0 = (long)(ow * SW) - (long)s->PL;
    size_t kwa = iw0 < 0 ? (size_t)EC_DIV_UP((size_t)-iw0, DW) : 0, kwb = 0;
    if (iw0 < (long)W) kwb = EC_MIN(KW, (size_t)((long)W - 1 - iw0) / DW + 1);
    if (kwa >= kwb) kwa = kwb = 0;
    const float *p = kwa < kwb ? rows + (size_t)((long)(kwa * DW) + iw0) * EC_VL : rows;
    NCHWC_FN(f32_nchwc_dw_run)(s, a, p, w, bias, 0, KH, kwa, kwb, y0 + rlo * ys + ow * EC_VL,
                               res0 ? res0 + rlo * ys + ow * EC_VL : NULL, s->SH * W * EC_VL, ys, rhi - rlo);
  }
}

void NCHWC_FN(f32_nchwc_pool)(const f32_nchwc_pool_shape *s, const float *x, float *y, size_t item) {
  const size_t nr = EC_DIV_UP(s->Ho, s->RC), blk = item / nr;
  const size_t h0 = item % nr * s->RC, h1 = EC_MIN(s->Ho, h0 + s->RC), H = s->H, W = s->W;
  const float *xb = x + blk * H * W * EC_VL;
  for (size_t oh = h0; oh < h1; oh++) {
    const long ih0 = (long)(oh * s->SH) - (long)s->PT;
    size_t k0 = 0, k1 = s->KH, kp = 0;
    while (k0 < k1 && ih0 + (long)(k0 * s->DH) < 0) k0++;
    while (k1 > k0 && ih0 + (long)((k1 - 1) * s->DH) >= (long)H) k1--;
    for (size_t kh = 0; kh < s->KH; kh++) { /* rows counted with padding: inside the declared pads */
      const long ih = ih0 + (long)(kh * s->DH);
      kp += ih >= -(long)s->PT && ih < (long)(H + s->PB);
    }
    for (size_t ow = 0; ow < s->Wo; ow++) {
      const long iw0 = (long)(ow * s->SW) - (long)s->PL;
      ec_v acc = s->max ? ec_vset1(-INFINITY) : ec_vzero();
      size_t cnt = 0, cp = 0;
      for (size_t kw = 0; kw < s->KW; kw++) {
        const long iw = iw0 + (long)(kw * s->DW);
        cp += iw >= -(long)s->PL && iw < (long)(W + s->PR);
        if (iw < 0 || iw >= (long)W) continue;
        cnt += k1 - k0;
        for (size_t kh = k0; kh < k1; kh++) {
          const ec_v v = ec_vld(xb + ((size_t)(ih0 + (long)(kh * s->DH)) * W + (size_t)iw) * EC_VL);
          acc = s->max ? ec_vmax(acc, v) : ec_vadd(acc, v);
        }
      }
      if (!s->max) {
        const size_t div = s->count_pad ? kp * cp : cnt;
        acc = div ? ec_vmul(acc, ec_vset1(1.0f / (float)div)) : ec_vzero();
      }
      ec_vst(y + ((blk * s->Ho + oh) * s->Wo + ow) * EC_VL, acc);
    }
  }
}

void NCHWC_FN(f32_nchwc_gavgpool)(const f32_nchwc_pool_shape *s, const float *x, float *y, size_t item) {
  const size_t HW = s->H * s->W;
  const float *xb = x + item * HW * EC_VL;
  ec_v acc = ec_vzero();
  for (size_t p = 0; p < HW; p++) acc = ec_vadd(acc, ec_vld(xb + p * EC_VL));
  ec_vst(y + item * EC_VL, ec_vmul(acc, ec_vset1(1.0f / (float)HW)));
}

void NCHWC_FN(f32_nchwc_scale)(const f32_nchwc_scale_shape *s, const float *x, const float *sc, float *y,
                               size_t item) {
  const ec_v k = ec_vld(sc + item * EC_VL);
  const float *xb = x + item * s->HW * EC_VL;
  float *yb = y + item * s->HW * EC_VL;
  for (size_t p = 0; p < s->HW; p++) ec_vst(yb + p * EC_VL, ec_vmul(ec_vld(xb + p * EC_VL), k));
}

/* GCC's -O3 vectorizer turns the lane copies into strided gathers, 3x slower on Zen 3 */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-vectorize")))
#endif
void NCHWC_FN(f32_nchwc_shuffle)(const f32_nchwc_shuffle_shape *s, const float *x, float *y, size_t item) {
  const size_t nb = EC_DIV_UP(s->C, (size_t)EC_VL), n = item / nb, c0 = item % nb * EC_VL, HW = s->HW;
  const size_t cg = s->C / s->G, nc = EC_MIN((size_t)EC_VL, s->C - c0);
  /* each lane's source: a channel of another block (a permutation across blocks, no two lanes alike) */
  const float *src[EC_VL] = {0}; /* lanes past nc stay unread (gcc -O3 -Wall warns otherwise) */
  for (size_t l = 0; l < nc; l++) {
    const size_t c = c0 + l, sc = c % s->G * cg + c / s->G;
    src[l] = x + (n * nb + sc / EC_VL) * HW * EC_VL + sc % EC_VL;
  }
  float *d = y + item * HW * EC_VL;
  if (nc == EC_VL) { /* lane by lane into the output (a vector built in memory would stall its load) */
    for (size_t p = 0; p < HW; p++, d += EC_VL) {
      NCHWC_UNROLL
      for (size_t l = 0; l < EC_VL; l++) d[l] = src[l][p * EC_VL];
    }
    return;
  }
  for (size_t p = 0; p < HW; p++, d += EC_VL) {
    ec_vst(d, ec_vzero());
    for (size_t l = 0; l < nc; l++) d[l] = src[l][p * EC_VL];
  }
}
