/* Dense convolution on small maps as the transposed GEMM, NCHW fp32:
 *   Y^T[P][K] = A[P][Kg] x W^T[Kg][K]   (P = Ho*Wo output pixels of one image, Kg = C*KH*KW,
 *   A = the im2col matrix with pixels as rows)
 * The NCHW GEMM (f32-conv.h) puts the pixels on the microkernel's NR columns: on a 7x7 map a
 * 16-wide tile computes 64 columns for 49 pixels (31% wasted FMAs, more on the stride-1 indirect
 * path, which also computes the padded columns). Transposed, the pixels go on the MR rows (6-row
 * tiles: 54 for 49) and the output channels on the columns, which K fills.
 *
 * Weights (packed offline, codegen/ops/conv.py): W^T as B panels [ceil(K/NR)][Kg][NR].
 * A of every image is packed once ([N][ceil(P/MR)][Kg][MR]; 1x1 stride 1 by strided copies of
 * the input planes), then work items (n, block of KCH output channels) run their panels into a
 * per-thread [ceil(P/MR)*MR][NR] tile (pixels in order, in strips of nearly equal length:
 * f32_convt_strip) and write it back as NR output-channel rows with the bias, activation and
 * residual of each row (ec_epi_row). */
#ifndef F32_CONVT_H
#define F32_CONVT_H

#include "../ec_common.h"
#include "../ec_threadpool.h"
#include "../f32-gemm/f32-gemm.h"

typedef struct {
  size_t N, C, H, W, K, Ho, Wo;
  size_t KH, KW, SH, SW, DH, DW, PT, PL;
  size_t MR, NR, KC;
  size_t KCH; /* output channels per work item, a multiple of NR */
  f32_gemm_ukernel_fn uk;
} f32_convt_shape;

typedef struct {
  const float *x;
  float *y;
  const float *w;
  const float *bias;
  const float *res;
  int res_before_act;
  ec_act act;
  float *a;       /* packed A: f32_convt_a_floats */
  float *scratch; /* threads x f32_convt_scratch_floats: the tile and one gathered row */
  size_t scratch_floats_per_thread;
} f32_convt_args;

static inline size_t f32_convt_a_floats(size_t N, size_t Kg, size_t P, size_t MR) {
  return N * EC_ROUND_UP(P, MR) * Kg;
}

static inline size_t f32_convt_scratch_floats(size_t P, size_t MR, size_t NR) {
  const size_t pp = EC_ROUND_UP(P, MR);
  return pp * NR + pp;
}

EC_INLINE size_t f32_convt_items(const f32_convt_shape *s) { return s->N * EC_DIV_UP(s->K, s->KCH); }

/* offsets per strip of the table-driven im2col: windows up to 7x7 at MR <= 16 */
#define F32_CONVT_TAB 784

/* Strips: the P pixels are cut into ceil(P/MR) strips of nearly equal length (some one pixel shorter), each packed
 * into an MR-row slot of A (rows past its length zero) and run as a tile of exactly its length. A 7x7 map is 4
 * strips of 6 and 5 of 5, not 8 of 6 and one of 1: a 1-row tile waits on FMA latency (4 cycles a K step for 2
 * FMAs, on Zen 3) where 5 rows keep both FMA pipes busy, so the map costs 49 cycles a K step instead of 52.
 * A pixel's arithmetic is the same in any strip. */
EC_INLINE void f32_convt_strip(size_t P, size_t MR, size_t q, size_t *p0, size_t *len) {
  const size_t t = EC_DIV_UP(P, MR), base = P / t, extra = P % t;
  *len = base + (q < extra);
  *p0 = q * base + EC_MIN(q, extra);
}

/* Strips [q0, q1) of A of image n (slot q at dst + q*MR*Kg): row i of slot q = output pixel p0 + i = (oh, ow),
 * column k = (c, kh, kw); rows past the strip's length are zero. */
EC_INLINE void f32_convt_pack_rows(const f32_convt_shape *s, const float *EC_RESTRICT x, float *EC_RESTRICT dst,
                                   size_t q0, size_t q1) {
  const size_t P = s->Ho * s->Wo, MR = s->MR, KHW = s->KH * s->KW, Kg = s->C * KHW;
  if (KHW == 1 && s->SH == 1 && s->SW == 1 && s->PT == 0 && s->PL == 0 && s->Ho == s->H && s->Wo == s->W) {
    /* element (p, c) at x[c*P + p]; MR and the strip's length constants: the pack's row test folds away and
     * the copies are whole vectors (a run-time row count ran them element by element: 4x the instructions) */
    for (size_t q = q0; q < q1; q++) {
      size_t p0, len;
      f32_convt_strip(P, MR, q, &p0, &len);
      float *d = dst + q * MR * Kg;
#define F32_CONVT_STRIP(mr) \
  case mr:                  \
    if (len == (mr)) f32_gemm_pack_a((mr), s->C, x + p0, 1, P, (mr), d); \
    else if (len == (mr) - 1) f32_gemm_pack_a((mr) - 1, s->C, x + p0, 1, P, (mr), d); \
    else f32_gemm_pack_a(len, s->C, x + p0, 1, P, (mr), d); \
    break;
      switch (MR) {
        F32_CONVT_STRIP(4)
        F32_CONVT_STRIP(6)
        F32_CONVT_STRIP(8)
        F32_CONVT_STRIP(12)
        default: f32_gemm_pack_a(len, s->C, x + p0, 1, P, MR, d); break;
      }
#undef F32_CONVT_STRIP
    }
    return;
  }
  if (KHW * MR <= F32_CONVT_TAB) {
    /* Per strip, the input offset of each (tap, row) (-1: padding or past the strip) depends on the pixel and
     * the tap only, so it is found once and reused by every channel: channel c's MR x KHW block is then one
     * contiguous run of dst read from one L1-resident plane. Per element with the offset worked out and the
     * writes KHW*MR floats apart (channel inner) the pack was 0.32 ms of the 3x3 512 @7x7 layer, now 0.17
     * (Zen 3). */
    int32_t off[F32_CONVT_TAB];
    const size_t HW = s->H * s->W;
    for (size_t q = q0; q < q1; q++) {
      size_t p0, len;
      f32_convt_strip(P, MR, q, &p0, &len);
      for (size_t i = 0; i < MR; i++) {
        const size_t p = p0 + i;
        const ptrdiff_t ih0 = (ptrdiff_t)((p / s->Wo) * s->SH) - (ptrdiff_t)s->PT;
        const ptrdiff_t iw0 = (ptrdiff_t)((p % s->Wo) * s->SW) - (ptrdiff_t)s->PL;
        for (size_t kh = 0; kh < s->KH; kh++) {
          const ptrdiff_t ih = ih0 + (ptrdiff_t)(kh * s->DH);
          for (size_t kw = 0; kw < s->KW; kw++) {
            const ptrdiff_t iw = iw0 + (ptrdiff_t)(kw * s->DW);
            const int in = i < len && ih >= 0 && ih < (ptrdiff_t)s->H && iw >= 0 && iw < (ptrdiff_t)s->W;
            off[(kh * s->KW + kw) * MR + i] = in ? (int32_t)((size_t)ih * s->W + (size_t)iw) : -1;
          }
        }
      }
      float *d = dst + q * MR * Kg;
      const size_t n = KHW * MR;
      for (size_t c = 0; c < s->C; c++, d += n) {
        const float *xc = x + c * HW;
        for (size_t t = 0; t < n; t++) d[t] = off[t] >= 0 ? xc[off[t]] : 0.0f;
      }
    }
    return;
  }
  for (size_t q = q0; q < q1; q++) {
    size_t p0, len;
    f32_convt_strip(P, MR, q, &p0, &len);
    float *d = dst + q * MR * Kg;
    for (size_t i = 0; i < MR; i++) {
      const size_t p = p0 + i;
      if (i >= len) {
        for (size_t k = 0; k < Kg; k++) d[k * MR + i] = 0.0f;
        continue;
      }
      const ptrdiff_t ih0 = (ptrdiff_t)((p / s->Wo) * s->SH) - (ptrdiff_t)s->PT;
      const ptrdiff_t iw0 = (ptrdiff_t)((p % s->Wo) * s->SW) - (ptrdiff_t)s->PL;
      for (size_t kh = 0; kh < s->KH; kh++) {
        const ptrdiff_t ih = ih0 + (ptrdiff_t)(kh * s->DH);
        const int hin = ih >= 0 && ih < (ptrdiff_t)s->H;
        for (size_t kw = 0; kw < s->KW; kw++) {
          const ptrdiff_t iw = iw0 + (ptrdiff_t)(kw * s->DW);
          const int in = hin && iw >= 0 && iw < (ptrdiff_t)s->W;
          const float *xs = in ? x + (size_t)ih * s->W + (size_t)iw : NULL;
          float *dk = d + (kh * s->KW + kw) * MR + i;
          for (size_t c = 0; c < s->C; c++) dk[c * KHW * MR] = in ? xs[c * s->H * s->W] : 0.0f;
        }
      }
    }
  }
}

EC_INLINE void f32_convt_pack(const f32_convt_shape *s, const float *EC_RESTRICT x, float *EC_RESTRICT dst) {
  f32_convt_pack_rows(s, x, dst, 0, EC_DIV_UP(s->Ho * s->Wo, s->MR));
}

/* Item `item` of the split into sb blocks of pixel strips (MR rows) per (image, KCH channel block). */
EC_INLINE void f32_convt_item_sb(const f32_convt_shape *s, const f32_convt_args *a, size_t tid, size_t item,
                                 size_t sb) {
  const size_t P = s->Ho * s->Wo, K = s->K, MR = s->MR, NR = s->NR, Kg = s->C * s->KH * s->KW;
  const size_t nkb = EC_DIV_UP(K, s->KCH), b = item % sb, n = item / sb / nkb, k0 = (item / sb % nkb) * s->KCH;
  const size_t k1 = EC_MIN(K, k0 + s->KCH), pp = EC_ROUND_UP(P, MR);
  size_t q0, q1;
  ec_block_range(pp / MR, sb, b, &q0, &q1);
  if (q0 >= q1) return;
  size_t p0, p1, len;
  f32_convt_strip(P, MR, q0, &p0, &len);
  f32_convt_strip(P, MR, q1 - 1, &p1, &len);
  p1 += len;
  const float *ap = a->a + n * pp * Kg;
  const int acc_out = a->res != NULL && a->res == a->y && a->res_before_act;
  float *tile = a->scratch + tid * a->scratch_floats_per_thread, *row = tile + pp * NR;
  for (size_t j0 = k0; j0 < k1; j0 += NR) {
    const size_t nr = EC_MIN(NR, k1 - j0);
    const float *bp = a->w + j0 * Kg; /* panel j0/NR */
    for (size_t c0 = 0; c0 < Kg; c0 += s->KC) {
      const size_t kc = EC_MIN(s->KC, Kg - c0);
      /* strip q's rows are tile rows [p0(q), p0(q) + len): the tile holds the pixels in order */
      for (size_t q = q0; q < q1; q++) {
        size_t r0, rn;
        f32_convt_strip(P, MR, q, &r0, &rn);
        s->uk(rn, NR, kc, ap + q * MR * Kg + c0 * MR, bp + c0 * NR, tile + r0 * NR, NR, c0 != 0, NULL);
      }
    }
    for (size_t q = 0; q < nr; q++) {
      const size_t o = (n * K + j0 + q) * P + p0;
      if (acc_out) /* the residual is the output's own buffer (codegen/memory.py mark_residual_outputs) */
        for (size_t p = p0; p < p1; p++) row[p - p0] = tile[p * NR + q] + a->y[o + p - p0];
      else
        for (size_t p = p0; p < p1; p++) row[p - p0] = tile[p * NR + q];
      ec_epi_row(row, a->y + o, p1 - p0, a->bias ? a->bias[j0 + q] : 0.0f, a->res && !acc_out ? a->res + o : NULL,
                 a->res_before_act, a->act);
    }
  }
}

EC_INLINE void f32_convt_item(const f32_convt_shape *s, const f32_convt_args *a, size_t tid, size_t item) {
  f32_convt_item_sb(s, a, tid, item, 1);
}

typedef struct {
  const f32_convt_shape *s;
  const f32_convt_args *a;
  size_t sb; /* pixel-strip blocks per image (pack) and per (image, channel block) (GEMM items) */
} f32_convt_job;

static inline void f32_convt_pack_task(void *ctx, size_t begin, size_t end) {
  const f32_convt_job *j = (const f32_convt_job *)ctx;
  const size_t Kg = j->s->C * j->s->KH * j->s->KW, pp = EC_ROUND_UP(j->s->Ho * j->s->Wo, j->s->MR);
  for (size_t i = begin; i < end; i++) {
    const size_t n = i / j->sb;
    size_t q0, q1;
    ec_block_range(pp / j->s->MR, j->sb, i % j->sb, &q0, &q1);
    f32_convt_pack_rows(j->s, j->a->x + n * j->s->C * j->s->H * j->s->W, j->a->a + n * pp * Kg, q0, q1);
  }
}

static inline void f32_convt_task(void *ctx, size_t tid, size_t begin, size_t end) {
  const f32_convt_job *j = (const f32_convt_job *)ctx;
  for (size_t i = begin; i < end; i++) f32_convt_item_sb(j->s, j->a, tid, i, j->sb);
}

/* On threads, images and channel blocks alone are often one item (SqueezeNet's squeeze convs: one
 * image, 16 channels, 55x55 pixels ran serially, a fifth of the model); pixel strips are split too,
 * into enough blocks for 4 items a thread. Every output is the same arithmetic in any split. */
EC_INLINE void f32_convt_run(const f32_convt_shape *s, const f32_convt_args *a, ec_pool *pool) {
  const size_t n = f32_convt_items(s), threads = (size_t)ec_pool_threads(pool);
  f32_convt_job j = {s, a, 1};
  if (threads <= 1) {
    f32_convt_pack_task(&j, 0, s->N);
    for (size_t i = 0; i < n; i++) f32_convt_item(s, a, 0, i);
    return;
  }
  const size_t strips = EC_DIV_UP(s->Ho * s->Wo, s->MR);
  j.sb = EC_MAX(1, EC_MIN(strips, EC_DIV_UP(4 * threads, n)));
  ec_parallel_for(pool, s->N * j.sb, 1, f32_convt_pack_task, &j);
  ec_parallel_for_tid(pool, n * j.sb, 1, f32_convt_task, &j);
}

#endif
