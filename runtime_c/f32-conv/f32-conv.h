/* Dense (and per-group dense) convolution as packed GEMM, NCHW fp32.
 * Per group g: Y_g[Kpg][Ho*Wo] = W_g[Kpg][Cpg*KH*KW] x B_g, where B_g is the im2col matrix of
 * the group's input channels, produced directly in packed-panel form one column block at a
 * time (spatial pack), so it never exists whole. 1x1/stride 1/no pad packs by plain copies.
 *
 * Weights (packed offline, codegen/ops/conv.py): [G][ceil(Kpg/MR)][Cpg*KH*KW][MR].
 * Work items: (n, g, column block of NC, M chunk); each packs its block into its thread's
 * scratch slice of f32_conv_gemm_scratch_bytes()/threads bytes.
 * The shape struct is meant to be a static const literal in generated code so that the
 * inlined driver folds every bound and stride. */
#ifndef F32_CONV_H
#define F32_CONV_H

#include "../ec_common.h"
#include "../ec_threadpool.h"
#include "../f32-gemm/f32-gemm.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

typedef struct {
  size_t N, C, H, W;  /* input */
  size_t K, Ho, Wo;   /* output channels (all groups) and spatial size */
  size_t G;
  size_t KH, KW, SH, SW, DH, DW, PT, PL; /* bottom/right pads are implied by Ho, Wo */
  size_t MR, NR, KC, NC; /* NC: columns per work item, a multiple of NR */
  size_t MSPLIT;         /* M chunks per column block */
  f32_gemm_ukernel_fn uk;
  size_t MC;             /* rows per pass over a column block (a multiple of MR), 0 = all in one pass */
  f32_gemm_packb_ukernel_fn ukp; /* 1x1: uk's packing twin (whole panels), or NULL: panels packed by copies */
} f32_conv_shape;

typedef struct {
  const float *x;
  float *y;
  const float *w;
  const float *bias;
  const float *res;
  int res_before_act;
  ec_act act;
  float *scratch;
  size_t scratch_floats_per_thread;
} f32_conv_args;

static inline size_t f32_conv_gemm_scratch_bytes(size_t cpg_khkw, size_t nc, size_t nr,
                                                 size_t threads) {
  return threads * cpg_khkw * EC_ROUND_UP(nc, nr) * sizeof(float);
}

EC_INLINE size_t f32_conv_items(const f32_conv_shape *s) {
  return s->N * s->G * EC_DIV_UP(s->Ho * s->Wo, s->NC) * s->MSPLIT;
}

/* im2col rows of one NR panel: output columns [col, col+w) (w <= NR, the rest zero), B rows
 * k = (c, kh, kw) for the (c, kh) units [u0, u1) of Cpg*KH (each unit is KW rows). The panel's
 * columns split into runs along one output row; each run reads one input row segment. */
EC_INLINE void f32_conv_im2col_rows(const f32_conv_shape *s, const float *EC_RESTRICT x, size_t col0, size_t w,
                                    size_t u0, size_t u1, float *EC_RESTRICT dp) {
  const size_t NR = s->NR;
  const ptrdiff_t SW = (ptrdiff_t)s->SW, W = (ptrdiff_t)s->W;
  for (size_t j = 0; j < w;) {
    /* run: columns j.. on output row oh starting at column ow */
    const size_t col = col0 + j, oh = col / s->Wo, ow = col % s->Wo;
    const size_t len = EC_MIN(w - j, s->Wo - ow);
    const ptrdiff_t iw0 = (ptrdiff_t)ow * SW - (ptrdiff_t)s->PL;
    for (size_t u = u0; u < u1; u++) {
      const size_t c = u / s->KH, kh = u % s->KH;
      const float *xc = x + c * s->H * s->W;
      const ptrdiff_t ih = (ptrdiff_t)(oh * s->SH + kh * s->DH) - (ptrdiff_t)s->PT;
      float *d = dp + u * s->KW * NR + j;
      if (ih < 0 || ih >= (ptrdiff_t)s->H) {
        for (size_t kw = 0; kw < s->KW; kw++)
          for (size_t q = 0; q < len; q++) d[kw * NR + q] = 0.0f;
        continue;
      }
      const float *row = xc + ih * W;
      for (size_t kw = 0; kw < s->KW; kw++) {
        const ptrdiff_t b = iw0 + (ptrdiff_t)(kw * s->DW); /* iw of q = b + q*SW */
        ptrdiff_t lo = b >= 0 ? 0 : (-b + SW - 1) / SW;
        ptrdiff_t hi = b >= W ? 0 : (W - b + SW - 1) / SW;
        if (lo > (ptrdiff_t)len) lo = (ptrdiff_t)len;
        if (hi > (ptrdiff_t)len) hi = (ptrdiff_t)len;
        if (hi < lo) hi = lo;
        float *dk = d + kw * NR;
        for (ptrdiff_t q = 0; q < lo; q++) dk[q] = 0.0f;
        ptrdiff_t q = lo;
#if defined(__AVX2__)
        /* stride 2 (stems, strided 3x3s): 8 columns from the even lanes of 16 inputs; the loop below is the
         * reference for the rest. Reads stay inside the row: the last load ends at b + 2q + 15 <= W - 1. */
        if (SW == 2)
          for (; q + 8 <= hi && b + 2 * q + 16 <= W; q += 8) {
            const __m256 lo8 = _mm256_loadu_ps(row + b + 2 * q), hi8 = _mm256_loadu_ps(row + b + 2 * q + 8);
            const __m256 ev = _mm256_shuffle_ps(lo8, hi8, 0x88); /* columns 0 2 8 10 | 4 6 12 14 */
            _mm256_storeu_ps(dk + q, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
          }
#endif
        for (; q < hi; q++) dk[q] = row[b + q * SW];
        for (ptrdiff_t q = hi; q < (ptrdiff_t)len; q++) dk[q] = 0.0f;
      }
    }
    j += len;
  }
  for (size_t k = u0 * s->KW; k < u1 * s->KW && w < NR; k++)
    for (size_t q = w; q < NR; q++) dp[k * NR + q] = 0.0f;
}

/* im2col of output columns [n0, n0+nc) straight into [nc/NR][Kg][NR] panels, all at once. */
EC_INLINE void f32_conv_pack_b(const f32_conv_shape *s, const float *EC_RESTRICT x, size_t n0,
                               size_t nc, float *EC_RESTRICT dst) {
  const size_t Cpg = s->C / s->G, Kg = Cpg * s->KH * s->KW, HoWo = s->Ho * s->Wo, NR = s->NR;
  if (s->KH == 1 && s->KW == 1 && s->SH == 1 && s->SW == 1 && s->PT == 0 && s->PL == 0 &&
      s->Ho == s->H && s->Wo == s->W) {
    f32_gemm_pack_b(Kg, HoWo, x, s->H * s->W, 1, n0, nc, NR, dst);
    return;
  }
  for (size_t j0 = 0; j0 < nc; j0 += NR)
    f32_conv_im2col_rows(s, x, n0 + j0, EC_MIN(NR, nc - j0), 0, Cpg * s->KH, dst + j0 * Kg);
}

EC_INLINE int f32_conv_is_1x1(const f32_conv_shape *s) {
  return s->KH == 1 && s->KW == 1 && s->SH == 1 && s->SW == 1 && s->PT == 0 && s->PL == 0 && s->Ho == s->H &&
         s->Wo == s->W;
}

/* Rows [k0, k1) of the 1x1 B panel holding columns [col, col+w) (w <= NR; the rest zero). */
EC_INLINE void f32_conv_1x1_pack_rows(const float *EC_RESTRICT x, size_t hw, size_t col, size_t w, size_t NR,
                                      size_t k0, size_t k1, float *EC_RESTRICT dst) {
  if (w == NR) {
    for (size_t k = k0; k < k1; k++) memcpy(dst + k * NR, x + k * hw + col, NR * sizeof(float));
    return;
  }
  for (size_t k = k0; k < k1; k++) {
    memcpy(dst + k * NR, x + k * hw + col, w * sizeof(float));
    memset(dst + k * NR + w, 0, (NR - w) * sizeof(float));
  }
}

/* One K block and one pass over the rows: the drivers keep two B panels (a ring), not the whole column block. */
EC_INLINE int f32_conv_ring(const f32_conv_shape *s) { return s->KC >= s->C / s->G * s->KH * s->KW && s->MC == 0; }

/* Units [u0, u1) of the B panel holding columns [col, col+w): 1x1 stride 1, a unit is one row (a
 * copy of an input channel's segment); otherwise one (c, kh) im2col unit of KW rows. */
EC_INLINE void f32_conv_pack_units(const f32_conv_shape *s, const float *EC_RESTRICT x, size_t col, size_t w,
                                   size_t u0, size_t u1, float *EC_RESTRICT dst) {
  if (f32_conv_is_1x1(s))
    f32_conv_1x1_pack_rows(x, s->H * s->W, col, w, s->NR, u0, u1, dst);
  else
    f32_conv_im2col_rows(s, x, col, w, u0, u1, dst);
}

/* The lines of a tile's mr rows of nr columns at p (row stride ld), fetched while the tile before it computes:
 * the epilogue then finds the residual and the output rows in cache. A strip's rows are each a short run (one
 * NR panel wide, then the next strip), which the hardware prefetchers do not follow: the residual's loads and the
 * output's write misses waited at the end of every tile. Integer arithmetic: the address may lie past the array
 * (a prefetch never faults). */
EC_INLINE void f32_conv_pf_tile(const float *p, size_t ld, size_t mr, size_t nr, int write) {
#if defined(__GNUC__) || defined(__clang__)
  const uintptr_t b = (uintptr_t)p, last = (nr - 1) * sizeof(float);
  for (size_t i = 0; i < mr; i++) {
    const uintptr_t r = b + i * ld * sizeof(float);
    if (write) {
      __builtin_prefetch((const void *)r, 1, 3);
      __builtin_prefetch((const void *)(r + last), 1, 3);
    } else {
      __builtin_prefetch((const void *)r, 0, 3);
      __builtin_prefetch((const void *)(r + last), 0, 3);
    }
  }
#else
  (void)p, (void)ld, (void)mr, (void)nr, (void)write;
#endif
}

/* GEMM over columns [n0, n0+nc): panel p+1 is packed from the input while panel p's row strips run,
 * so the packing's cache misses (strided input rows, from L3) overlap the microkernel's FMAs instead of
 * being a pass of their own (packed up front: 23% of a 256->64 @56 layer, 23% of the 7x7 s2 stem).
 * 1x1 stride 1 copies a slice of rows before each strip; im2col packs the whole next panel before the
 * first strip (sliced per strip, the 7x7 s2 stem ran 15% slower than packed up front; whole, 2% faster).
 * 1x1 with ukp: a whole panel's first strip (of each K block, in the first pass) reads the input rows in
 * place and stores the panel as it goes; only a narrower last panel is copied. Even sliced, the copies ran
 * between tiles, not beside their FMAs: 14% of a 256->64 @56 layer on a Zen 5 core (0.477 ms, 0.409 with
 * the copies left out), where few output rows share each copied row.
 * With one K block (kc = K) each panel is dead once its strips ran, so the block lives in a ring of two
 * panels (f32_conv_ring): any number of columns per work item, 2 x K x NR floats of scratch.
 * MC > 0: the rows run in passes of MC over the whole block (its panels kept, no ring), so a strip's output
 * and residual rows are written and read as a few sequential streams rather than one line of every row per
 * panel (ResNet-50's 56x56 1x1 layers: 0.85x in the model, the B panel then read from L2 per tile).
 * Same tiles, same K blocks, same arithmetic.
 * acc_out: C holds the residual (the output took its buffer, codegen/memory.py mark_residual_outputs), so the
 * first K block accumulates onto C and the epilogue adds no residual: one stream read and written in place
 * rather than a residual read plus an output's write-allocate reads. */
EC_INLINE void f32_conv_block_ahead(const f32_conv_shape *s, const float *x, size_t m0, size_t m1, const float *w,
                                    float *bp, size_t n0, size_t nc, float *c, size_t ldc, const f32_gemm_epi *e,
                                    int acc_out) {
  const size_t MR = s->MR, NR = s->NR, KC = s->KC, Cpg = s->C / s->G, K = Cpg * s->KH * s->KW;
  const size_t units = f32_conv_is_1x1(s) ? K : Cpg * s->KH;
  const size_t panels = EC_DIV_UP(nc, NR), strips = EC_DIV_UP(m1 - m0, MR);
  const size_t MC = s->MC ? s->MC : m1 - m0; /* rows per pass; panels are packed during the first */
  const size_t slice = f32_conv_is_1x1(s) ? EC_DIV_UP(units, EC_MIN(strips, EC_DIV_UP(MC, MR))) : units;
  const int ring = f32_conv_ring(s); /* panel p at (p & 1) * NR * K, else p * NR * K */
  const int fuse = s->ukp != NULL && f32_conv_is_1x1(s); /* whole panels packed by their first strip */
  const size_t hw = s->H * s->W;
  if (!fuse || nc < NR) f32_conv_pack_units(s, x, n0, EC_MIN(NR, nc), 0, units, bp);
  for (size_t k0 = 0; k0 < K; k0 += KC) {
    const size_t kc = EC_MIN(KC, K - k0);
    const int last = k0 + kc == K;
    for (size_t q0 = m0; q0 < m1; q0 += MC) {
      const size_t q1 = EC_MIN(m1, q0 + MC);
      for (size_t p = 0; p < panels; p++) {
        const size_t j0 = p * NR, nr = EC_MIN(NR, nc - j0);
        const float *pb = bp + (ring ? (p & 1) : p) * NR * K + k0 * NR;
        const size_t nj = j0 + NR;
        const int ahead = k0 == 0 && q0 == m0 && p + 1 < panels && !(fuse && nj + NR <= nc);
        const size_t nw = ahead ? EC_MIN(NR, nc - nj) : 0;
        float *pw = fuse && q0 == m0 && nr == NR ? (float *)pb : NULL; /* the first strip packs this panel */
        size_t r = 0;
        for (size_t i0 = q0; i0 < q1; i0 += MR) {
          if (ahead) {
            const size_t r1 = i0 + MR >= q1 ? units : EC_MIN(units, r + slice); /* the pass's last strip: all */
            /* 1x1: the same rows of the panel after, one line per input channel (channels a plane apart: no
             * stream for the hardware prefetcher), so they are in flight while this panel's tiles compute */
            if (f32_conv_is_1x1(s) && p + 2 < panels)
              f32_conv_pf_tile(x + r * s->H * s->W + n0 + nj + NR, s->H * s->W, r1 - r, EC_MIN(NR, nc - nj - NR), 0);
            f32_conv_pack_units(s, x, n0 + nj, nw, r, r1, bp + (ring ? ((p + 1) & 1) : p + 1) * NR * K);
            r = r1;
          }
          const size_t mr = EC_MIN(MR, m1 - i0);
          float *ct = c + i0 * ldc + n0 + j0;
          ec_tile_epi te;
          if (last) {
            te.bias_r = e->bias_r ? e->bias_r + i0 : NULL;
            te.bias_c = NULL;
            te.res = e->res ? e->res + i0 * ldc + n0 + j0 : NULL;
            te.res_before_act = e->res_before_act;
            te.act = e->act;
          }
          if (last) {
            /* the next tile in this loop's order: the next strip, else the next panel's first, else the next pass's */
            size_t ni = i0 + MR, np = p;
            if (ni >= q1) ni = q0, np = p + 1;
            if (np >= panels) ni = q1, np = 0;
            if (ni < m1) {
              const size_t nmr = EC_MIN(MR, m1 - ni), nnr = EC_MIN(NR, nc - np * NR);
              f32_conv_pf_tile(c + ni * ldc + n0 + np * NR, ldc, nmr, nnr, 1);
              if (e->res) f32_conv_pf_tile(e->res + ni * ldc + n0 + np * NR, ldc, nmr, nnr, 0);
            }
          }
          if (fuse && q0 == m0 && i0 + MR >= q1 && nj + NR <= nc) /* the next panel's first rows (B_PF: the rest) */
            f32_conv_pf_tile(x + k0 * hw + n0 + nj, hw, EC_MIN(kc, 16), NR, 0);
          if (pw) {
            s->ukp(mr, nr, kc, w + i0 * K + k0 * MR, x + k0 * hw + n0 + j0, hw, pw, ct, ldc, k0 != 0 || acc_out,
                   last ? &te : NULL);
            pw = NULL;
          } else {
            s->uk(mr, nr, kc, w + i0 * K + k0 * MR, pb, ct, ldc, k0 != 0 || acc_out, last ? &te : NULL);
          }
        }
      }
    }
  }
}

/* Work item `item` of the split into nblocks column blocks (>= f32_conv_items' count: blocks are
 * cut in whole NR panels, at most NC columns each); tid selects the scratch slice. */
EC_INLINE void f32_conv_gemm_item_ms(const f32_conv_shape *s, const f32_conv_args *a, size_t tid,
                                     size_t item, size_t nblocks, size_t msplit) {
  const size_t HoWo = s->Ho * s->Wo;
  const size_t Cpg = s->C / s->G, Kpg = s->K / s->G, Kg = Cpg * s->KH * s->KW;
  const size_t ms = item % msplit;
  size_t t = item / msplit;
  const size_t nb = t % nblocks;
  t /= nblocks;
  const size_t g = t % s->G, n = t / s->G;
  const size_t mchunk = EC_ROUND_UP(EC_DIV_UP(Kpg, msplit), s->MR);
  const size_t m0 = ms * mchunk, m1 = EC_MIN(Kpg, m0 + mchunk);
  if (m0 >= m1) return;
  size_t p0, p1;
  ec_block_range(EC_DIV_UP(HoWo, s->NR), nblocks, nb, &p0, &p1);
  if (p0 >= p1) return;
  const size_t n0 = p0 * s->NR, nc = EC_MIN(p1 * s->NR, HoWo) - n0;
  float *bp = a->scratch + tid * a->scratch_floats_per_thread;
  const float *xg = a->x + (n * s->C + g * Cpg) * s->H * s->W;
  const size_t yoff = (n * s->K + g * Kpg) * HoWo;
  f32_gemm_epi e;
  e.bias_r = a->bias ? a->bias + g * Kpg : NULL;
  e.bias_c = NULL;
  /* the residual in the output's own buffer (added before the activation): accumulate onto it */
  const int acc_out = a->res != NULL && a->res == a->y && a->res_before_act;
  e.res = a->res && !acc_out ? a->res + yoff : NULL;
  e.res_before_act = a->res_before_act;
  e.act = a->act;
  const float *wg = a->w + g * EC_ROUND_UP(Kpg, s->MR) * Kg;
  f32_conv_block_ahead(s, xg, m0, m1, wg, bp, n0, nc, a->y + yoff, HoWo, &e, acc_out);
}

EC_INLINE void f32_conv_gemm_item_nb(const f32_conv_shape *s, const f32_conv_args *a, size_t tid,
                                     size_t item, size_t nblocks) {
  f32_conv_gemm_item_ms(s, a, tid, item, nblocks, s->MSPLIT);
}

/* One work item of the default split (see f32_conv_items). */
EC_INLINE void f32_conv_gemm_item(const f32_conv_shape *s, const f32_conv_args *a, size_t tid,
                                  size_t item) {
  f32_conv_gemm_item_nb(s, a, tid, item, EC_DIV_UP(s->Ho * s->Wo, s->NC));
}

typedef struct {
  const f32_conv_shape *s;
  const f32_conv_args *a;
  size_t nblocks, msplit;
} f32_conv_job;

static inline void f32_conv_task(void *ctx, size_t tid, size_t begin, size_t end) {
  const f32_conv_job *j = (const f32_conv_job *)ctx;
  for (size_t i = begin; i < end; i++) f32_conv_gemm_item_ms(j->s, j->a, tid, i, j->nblocks, j->msplit);
}

/* Row chunks per column block for `threads`: the code's MSPLIT, times the thread count when the column
 * blocks leave a tail of more than 3% (SqueezeNet's 1000-channel 13x13 classifier: 11 panels, 6 against
 * 5 on two threads) and every chunk keeps at least 256 rows (each chunk packs its block again: up to
 * 16/rows of the GEMM's time for an im2col pack, less for 1x1 copies). Rows are
 * cut at MR, so every output is the same arithmetic whatever the split. */
EC_INLINE size_t f32_conv_msplit(const f32_conv_shape *s, size_t nblocks, size_t threads) {
  const size_t units = EC_DIV_UP(s->Ho * s->Wo, s->NR), per = s->N * s->G * s->MSPLIT;
  if (threads <= 1 || per * nblocks > 64 * threads || s->K / s->G < 256 * s->MSPLIT * threads) return s->MSPLIT;
  if (ec_blocks_span(units, nblocks, per, threads) * threads * 100 <= units * per * 103) return s->MSPLIT;
  return s->MSPLIT * threads;
}

/* Serial runs inline with the caller's constant shape; threads share the generic task, with the
 * column blocks evened out for the thread count (same arithmetic per output: same results). */
EC_INLINE void f32_conv_run(const f32_conv_shape *s, const f32_conv_args *a, ec_pool *pool) {
  const size_t n = f32_conv_items(s), threads = (size_t)ec_pool_threads(pool);
  if (threads <= 1 || n == 1) {
    for (size_t i = 0; i < n; i++) f32_conv_gemm_item(s, a, 0, i);
    return;
  }
  const size_t HoWo = s->Ho * s->Wo;
  f32_conv_job j = {s, a, ec_even_blocks(EC_DIV_UP(HoWo, s->NR), EC_DIV_UP(HoWo, s->NC), s->N * s->G * s->MSPLIT, threads),
                    s->MSPLIT};
  j.msplit = f32_conv_msplit(s, j.nblocks, threads);
  ec_parallel_for_tid(pool, s->N * s->G * j.nblocks * j.msplit, 1, f32_conv_task, &j);
}

/* ---- stride-1 convolution as indirect GEMM -------------------------------------------------
 * The input is padded once into [N][C][Hp][Wp]; output columns are taken over the padded width
 * (j = oh*Wp + ow, the Wp-Wo columns past each row end are computed and dropped), so B row
 * k = (c, kh, kw) of any column block is contiguous in place: xpad + koff[k] + j with
 * koff[k] = c*Hp*Wp + kh*DH*Wp + kw*DW. No im2col copy; the microkernel tile lands in a
 * per-thread buffer and the epilogue runs while compacting it into NCHW. */
typedef struct {
  size_t N, C, H, W, K, Ho, Wo, G;
  size_t KH, KW, DH, DW, PT, PL;
  size_t Hp, Wp; /* Hp = Ho + (KH-1)*DH, Wp = Wo + (KW-1)*DW */
  size_t MR, NR, KC, NC, MSPLIT;
  size_t DIRECT; /* 1x1, no padding: B is the input itself; a partial last panel is copied */
  f32_igemm_ukernel_fn uk;
} f32_conv_s1_shape;

typedef struct {
  const float *x;
  float *y;
  const float *w;       /* packed like f32_conv_shape's */
  const int32_t *koff;  /* [Cpg*KH*KW] */
  const int32_t *kpan;  /* DIRECT: [Cpg] = k*NR, rows of a copied tail panel */
  const float *bias;
  const float *res;
  int res_before_act;
  ec_act act;
  float *xpad;          /* f32_conv_s1_pad_floats */
  float *tmp;           /* threads x tmp_floats_per_thread: tile Mp x NC (+ Kg x NR tail panel) */
  size_t tmp_floats_per_thread;
} f32_conv_s1_args;

/* padded planes plus the tail the last tile may read past the end */
static inline size_t f32_conv_s1_pad_floats(size_t N, size_t C, size_t Hp, size_t Wp, size_t NR) {
  return N * C * Hp * Wp + Wp + NR;
}

EC_INLINE size_t f32_conv_s1_cols(const f32_conv_s1_shape *s) { return (s->Ho - 1) * s->Wp + s->Wo; }

EC_INLINE size_t f32_conv_s1_items(const f32_conv_s1_shape *s) {
  return s->N * s->G * EC_DIV_UP(f32_conv_s1_cols(s), s->NC) * s->MSPLIT;
}

EC_INLINE void f32_conv_s1_pad_plane(const f32_conv_s1_shape *s, const f32_conv_s1_args *a, size_t p) {
  const size_t Hp = s->Hp, Wp = s->Wp, H = s->H, W = s->W;
  const float *src = a->x + p * H * W;
  float *dst = a->xpad + p * Hp * Wp;
  for (size_t ih = 0; ih < Hp; ih++) {
    float *d = dst + ih * Wp;
    const ptrdiff_t r = (ptrdiff_t)ih - (ptrdiff_t)s->PT;
    if (r < 0 || r >= (ptrdiff_t)H) {
      memset(d, 0, Wp * sizeof(float));
      continue;
    }
    const size_t lo = EC_MIN(s->PL, Wp), hi = EC_MIN(Wp, s->PL + W);
    memset(d, 0, lo * sizeof(float));
    memcpy(d + lo, src + (size_t)r * W, (hi - lo) * sizeof(float));
    memset(d + hi, 0, (Wp - hi) * sizeof(float));
  }
  if (p + 1 == s->N * s->C) memset(dst + Hp * Wp, 0, (Wp + s->NR) * sizeof(float));
}

/* Work item `item` of the split into nblocks column blocks (whole NR panels, at most NC columns). */
EC_INLINE void f32_conv_s1_item_nb(const f32_conv_s1_shape *s, const f32_conv_s1_args *a, size_t tid,
                                   size_t item, size_t nblocks) {
  const size_t cols = f32_conv_s1_cols(s);
  const size_t Cpg = s->C / s->G, Kpg = s->K / s->G, Kg = Cpg * s->KH * s->KW, MR = s->MR;
  const size_t ms = item % s->MSPLIT;
  size_t t = item / s->MSPLIT;
  const size_t nb = t % nblocks;
  t /= nblocks;
  const size_t g = t % s->G, n = t / s->G;
  const size_t mchunk = EC_ROUND_UP(EC_DIV_UP(Kpg, s->MSPLIT), MR);
  const size_t m0 = ms * mchunk, m1 = EC_MIN(Kpg, m0 + mchunk);
  if (m0 >= m1) return;
  size_t p0, p1;
  ec_block_range(EC_DIV_UP(cols, s->NR), nblocks, nb, &p0, &p1);
  if (p0 >= p1) return;
  const size_t n0 = p0 * s->NR, nc = EC_MIN(p1 * s->NR, cols) - n0, ldt = EC_ROUND_UP(s->NC, s->NR);
  const float *xb = (s->DIRECT ? a->x : a->xpad) + (n * s->C + g * Cpg) * s->Hp * s->Wp + n0;
  const float *wg = a->w + g * EC_ROUND_UP(Kpg, MR) * Kg;
  float *tb = a->tmp + tid * a->tmp_floats_per_thread;
  float *tail = tb; /* DIRECT: the last partial panel, copied (no tile buffer needed then) */
  const int tail_here = s->DIRECT && nc % s->NR != 0;
  if (tail_here) {
    const size_t j0 = nc / s->NR * s->NR, nr = nc - j0;
    for (size_t k = 0; k < Kg; k++)
      for (size_t j = 0; j < s->NR; j++) tail[k * s->NR + j] = j < nr ? xb[a->koff[k] + j0 + j] : 0.0f;
  }
  const size_t HoWo = s->Ho * s->Wo, yoff = (n * s->K + g * Kpg) * HoWo;
  for (size_t k0 = 0; k0 < Kg; k0 += s->KC) {
    const size_t kc = EC_MIN(s->KC, Kg - k0);
    const int last = k0 + kc == Kg;
    for (size_t j0 = 0; j0 < nc; j0 += s->NR) {
      const size_t nr = EC_MIN(s->NR, nc - j0);
      const int copied = tail_here && nr < s->NR; /* reading in place would run past the input */
      for (size_t i0 = m0; i0 < m1; i0 += MR) {
        const float *ap = wg + i0 * Kg + k0 * MR, *bp = copied ? tail : xb + j0;
        const int32_t *ko = (copied ? a->kpan : a->koff) + k0;
        if (!s->DIRECT) {
          s->uk(EC_MIN(MR, m1 - i0), nr, kc, ap, bp, ko, tb + (i0 - m0) * ldt + j0, ldt, k0 != 0, NULL);
          continue;
        }
        /* 1x1: columns are output pixels, so the tile goes straight to NCHW with its epilogue */
        const size_t o = yoff + i0 * HoWo + n0 + j0;
        ec_tile_epi te = {a->bias ? a->bias + g * Kpg + i0 : NULL, NULL, a->res ? a->res + o : NULL,
                          a->res_before_act, a->act};
        s->uk(EC_MIN(MR, m1 - i0), nr, kc, ap, bp, ko, a->y + o, HoWo, k0 != 0, last ? &te : NULL);
      }
    }
  }
  if (s->DIRECT) return;
  for (size_t i = m0; i < m1; i++) {
    const float *src = tb + (i - m0) * ldt;
    const float bias = a->bias ? a->bias[g * Kpg + i] : 0.0f;
    for (size_t j = 0; j < nc;) {
      const size_t col = n0 + j, oh = col / s->Wp, ow = col % s->Wp;
      if (ow >= s->Wo) {
        j += s->Wp - ow;
        continue;
      }
      const size_t len = EC_MIN(s->Wo - ow, nc - j), o = yoff + i * HoWo + oh * s->Wo + ow;
      ec_epi_row(src + j, a->y + o, len, bias, a->res ? a->res + o : NULL, a->res_before_act, a->act);
      j += len;
    }
  }
}

EC_INLINE void f32_conv_s1_item(const f32_conv_s1_shape *s, const f32_conv_s1_args *a, size_t tid,
                                size_t item) {
  f32_conv_s1_item_nb(s, a, tid, item, EC_DIV_UP(f32_conv_s1_cols(s), s->NC));
}

typedef struct {
  const f32_conv_s1_shape *s;
  const f32_conv_s1_args *a;
  size_t nblocks;
} f32_conv_s1_job;

static inline void f32_conv_s1_pad_task(void *ctx, size_t begin, size_t end) {
  const f32_conv_s1_job *j = (const f32_conv_s1_job *)ctx;
  for (size_t i = begin; i < end; i++) f32_conv_s1_pad_plane(j->s, j->a, i);
}

static inline void f32_conv_s1_task(void *ctx, size_t tid, size_t begin, size_t end) {
  const f32_conv_s1_job *j = (const f32_conv_s1_job *)ctx;
  for (size_t i = begin; i < end; i++) f32_conv_s1_item_nb(j->s, j->a, tid, i, j->nblocks);
}

EC_INLINE void f32_conv_s1_run(const f32_conv_s1_shape *s, const f32_conv_s1_args *a, ec_pool *pool) {
  const size_t planes = s->N * s->C, n = f32_conv_s1_items(s);
  if (ec_pool_threads(pool) <= 1) {
    for (size_t i = 0; i < planes && !s->DIRECT; i++) f32_conv_s1_pad_plane(s, a, i);
    for (size_t i = 0; i < n; i++) f32_conv_s1_item(s, a, 0, i);
    return;
  }
  const size_t cols = f32_conv_s1_cols(s), threads = (size_t)ec_pool_threads(pool);
  f32_conv_s1_job j = {s, a, ec_even_blocks(EC_DIV_UP(cols, s->NR), EC_DIV_UP(cols, s->NC), s->N * s->G * s->MSPLIT, threads)};
  (void)n;
  if (!s->DIRECT) ec_parallel_for(pool, planes, EC_MAX(1, planes / (4 * threads)), f32_conv_s1_pad_task, &j);
  ec_parallel_for_tid(pool, s->N * s->G * j.nblocks * s->MSPLIT, 1, f32_conv_s1_task, &j);
}

#endif
