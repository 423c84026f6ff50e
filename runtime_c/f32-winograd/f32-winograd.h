/* Winograd F(m,3) convolution for 3x3, stride 1, dilation 1 layers (any padding, groups), NCHW fp32.
 *
 * Per group, output tiles of m x m pixels (alpha = m + 2 input pixels a side) in row-major tile
 * order t = th*TW + tw. With U = G g G^T (packed offline) and V = B^T d B, the layer is alpha^2
 * independent GEMMs M[xi] = U[xi] (Kpg x Cpg) x V[xi] (Cpg x tiles), then Y = A^T M A per tile.
 *
 * Layouts:
 *   xp: the padded input split into m column phases per plane, [N*C][m][HP][Q]: padded element
 *       (r, q*m + ph) at [ph][r][q]. Every tile row's input value (i, j) of VL consecutive tiles
 *       is then one contiguous vector, [j % m][th*m + i][tw + j / m].
 *   u:  [G][alpha^2][ceil(Kpg/MR)][Cpg][MR] (the GEMM's packed A, one matrix per xi).
 *   V:  per thread [alpha^2][TB/NR][Cpg*NR + PAD] (+ PAD per xi): the GEMM's packed B, TB tiles
 *       per work item (a multiple of NR). The input transform writes it directly, one run of tiles
 *       within a tile row and a panel at a time, channel by channel, runs in tile order. Panels are
 *       contiguous: B rows at a stride of TB floats used a fraction of L1's sets and measured 3-4x
 *       slower at TB = 32, 64.
 *   M:  per thread [alpha^2][KB][TB] (+ pad per xi), KB output channels per GEMM pass.
 * The pads keep the alpha^2 streams of the transforms off one cache set (power-of-two strides),
 * and take the whole-vector stores of the input transform past a run's last tile: they land on
 * values written later in that order or in a pad (masked stores cost 3x the transform on Zen 3). 
 * A work item (n, group, block of TB tiles, K chunk) transforms its tiles' input into V (in L2),
 * runs the alpha^2 GEMMs one KB pass at a time and transforms each pass's M straight into NCHW
 * with the epilogue. The transforms are per-ISA kernels vectorised over the tiles of a tile row. */
#ifndef F32_WINOGRAD_H
#define F32_WINOGRAD_H

#include <string.h>
#include "../ec_common.h"
#include "../ec_threadpool.h"
#include "../f32-gemm/f32-gemm.h"

/* Input transform of n tiles of one tile row, one channel: p is the row's first tile in the
 * phase planes (padded value (i, tw*m + j) at p[(j % m)*ps + i*q + tw + j/m]); value xi of tile tw
 * is stored at v[xi*vs + tw]. SIMD variants store whole vectors: up to EC_VL - 1 floats after the
 * n values of each xi may be overwritten. */
#define F32_WINOGRAD_IN_DECL(name)                                                              \
  void name(size_t n, const float *EC_RESTRICT p, size_t ps, size_t q, float *EC_RESTRICT v,   \
            size_t vs)
/* Output transform of n tiles of one tile row, one output channel: M value xi of tile tw at
 * mm[xi*ms + tw]; writes rows x cols pixels (the tiles clipped to the map) at y (row stride ldy):
 * y = epilogue(A^T M A + bias), res like y or NULL. */
#define F32_WINOGRAD_OUT_DECL(name)                                                             \
  void name(size_t n, const float *EC_RESTRICT mm, size_t ms, float *EC_RESTRICT y, size_t ldy,  \
            size_t rows, size_t cols, float bias, const float *EC_RESTRICT res, int before,      \
            ec_act act)

typedef F32_WINOGRAD_IN_DECL((*f32_winograd_in_fn));
typedef F32_WINOGRAD_OUT_DECL((*f32_winograd_out_fn));

#define F32_WINOGRAD_PAD 16 /* floats after each xi slice of V and M */

#define F32_WINOGRAD_KERNELS(f, isa)                                                            \
  F32_WINOGRAD_IN_DECL(f32_winograd_in_##f##__##isa);                                           \
  F32_WINOGRAD_OUT_DECL(f32_winograd_out_##f##__##isa);
F32_WINOGRAD_KERNELS(f23, scalar)
F32_WINOGRAD_KERNELS(f43, scalar)
F32_WINOGRAD_KERNELS(f63, scalar)
F32_WINOGRAD_KERNELS(f23, avx2)
F32_WINOGRAD_KERNELS(f43, avx2)
F32_WINOGRAD_KERNELS(f63, avx2)
F32_WINOGRAD_KERNELS(f23, avx512)
F32_WINOGRAD_KERNELS(f43, avx512)
F32_WINOGRAD_KERNELS(f63, avx512)
F32_WINOGRAD_KERNELS(f23, neon)
F32_WINOGRAD_KERNELS(f43, neon)
F32_WINOGRAD_KERNELS(f63, neon)
#undef F32_WINOGRAD_KERNELS

typedef struct {
  size_t N, C, H, W, K, Ho, Wo, G, PT, PL;
  size_t M;           /* output tile side m; alpha = m + 2 */
  size_t TH, TW;      /* tiles per column and per row: ceil(Ho/m), ceil(Wo/m) */
  size_t HP, Q;       /* phase planes: HP = TH*m + 2 rows of Q = TW + 1 columns */
  size_t TB, KB;      /* tiles per work item (multiple of NR), output channels per pass (of MR) */
  size_t KSPLIT;      /* K chunks per tile block (parallelism for few tiles) */
  size_t MR, NR, KC;  /* GEMM microkernel tile, input channels per K block */
  f32_gemm_ukernel_fn uk;
  f32_winograd_in_fn tin;
  f32_winograd_out_fn tout;
} f32_winograd_shape;

typedef struct {
  const float *x;
  float *y;
  const float *u;      /* [G][alpha^2][ceil(Kpg/MR)][Cpg][MR] */
  const float *bias;
  const float *res;
  int res_before_act;
  ec_act act;
  float *xp;  /* f32_winograd_xp_floats */
  float *tmp; /* threads x f32_winograd_tmp_floats: V then M */
} f32_winograd_args;

static inline size_t f32_winograd_xp_floats(size_t N, size_t C, size_t m, size_t HP, size_t Q) {
  return N * C * m * HP * Q;
}

static inline size_t f32_winograd_tmp_floats(size_t m, size_t Cpg, size_t KB, size_t TB, size_t NR) {
  return (m + 2) * (m + 2) * ((Cpg + KB) * TB + (TB / NR + 2) * F32_WINOGRAD_PAD);
}

EC_INLINE size_t f32_winograd_items(const f32_winograd_shape *s) {
  return s->N * s->G * EC_DIV_UP(s->TH * s->TW, s->TB) * s->KSPLIT;
}

/* Plane p (n*C + c) of the input, padded and split into column phases. */
EC_INLINE void f32_winograd_pack_plane(const f32_winograd_shape *s, const f32_winograd_args *a, size_t p) {
  const size_t m = s->M, HP = s->HP, Q = s->Q, W = s->W;
  const float *src = a->x + p * s->H * W;
  float *dst = a->xp + p * m * HP * Q;
  for (size_t r = 0; r < HP; r++) {
    const ptrdiff_t ih = (ptrdiff_t)r - (ptrdiff_t)s->PT;
    if (ih < 0 || ih >= (ptrdiff_t)s->H) {
      for (size_t ph = 0; ph < m; ph++) memset(dst + (ph * HP + r) * Q, 0, Q * sizeof(float));
      continue;
    }
    const float *row = src + (size_t)ih * W;
    for (size_t ph = 0; ph < m; ph++) {
      float *d = dst + (ph * HP + r) * Q;
      /* column q*m + ph - PL of the input: inside for q in [lo, hi) */
      const size_t lo = ph >= s->PL ? 0 : EC_MIN(Q, EC_DIV_UP(s->PL - ph, m));
      const size_t end = W + s->PL > ph ? EC_DIV_UP(W + s->PL - ph, m) : 0;
      const size_t hi = EC_MAX(lo, EC_MIN(Q, end));
      const float *sr = row + (lo * m + ph - s->PL);
      for (size_t q = 0; q < lo; q++) d[q] = 0.0f;
      for (size_t q = lo; q < hi; q++) d[q] = sr[(q - lo) * m];
      for (size_t q = hi; q < Q; q++) d[q] = 0.0f;
    }
  }
}

/* Work item `item` of the split into nblocks tile blocks (whole NR panels, at most TB tiles). */
EC_INLINE void f32_winograd_item_nb(const f32_winograd_shape *s, const f32_winograd_args *a, size_t tid,
                                    size_t item, size_t nblocks) {
  const size_t m = s->M, A2 = (m + 2) * (m + 2), T = s->TH * s->TW, TB = s->TB, TW = s->TW;
  const size_t Cpg = s->C / s->G, Kpg = s->K / s->G, MR = s->MR, NR = s->NR, HoWo = s->Ho * s->Wo;
  const size_t ks = item % s->KSPLIT;
  size_t r = item / s->KSPLIT;
  const size_t b = r % nblocks;
  r /= nblocks;
  const size_t g = r % s->G, n = r / s->G;
  const size_t kchunk = EC_ROUND_UP(EC_DIV_UP(Kpg, s->KSPLIT), MR);
  const size_t k0 = ks * kchunk, k1 = EC_MIN(Kpg, k0 + kchunk);
  if (k0 >= k1) return;
  size_t p0, p1;
  ec_block_range(EC_DIV_UP(T, NR), nblocks, b, &p0, &p1);
  if (p0 >= p1) return;
  const size_t t0 = p0 * NR, nt = EC_MIN(p1 * NR, T) - t0;
  float *V = a->tmp + tid * f32_winograd_tmp_floats(m, Cpg, s->KB, TB, NR);
  const size_t pst = Cpg * NR + F32_WINOGRAD_PAD; /* panel stride */
  const size_t vs = TB / NR * pst + F32_WINOGRAD_PAD, ms = s->KB * TB + F32_WINOGRAD_PAD;
  float *Mb = V + A2 * vs;

  const size_t ps = s->HP * s->Q;
  for (size_t c = 0; c < Cpg; c++) {
    const float *plane = a->xp + (n * s->C + g * Cpg + c) * m * ps;
    for (size_t t = t0; t < t0 + nt;) { /* runs within one tile row and one panel */
      const size_t th = t / TW, tw = t % TW, j = t - t0;
      const size_t len = EC_MIN(EC_MIN(TW - tw, t0 + nt - t), NR - j % NR);
      s->tin(len, plane + th * m * s->Q + tw, ps, s->Q, V + j / NR * pst + c * NR + j % NR, vs);
      t += len;
    }
  }

  const size_t Mp = EC_ROUND_UP(Kpg, MR);
  const float *ug = a->u + g * A2 * Mp * Cpg;
  for (size_t kb0 = k0; kb0 < k1; kb0 += s->KB) {
    const size_t kb1 = EC_MIN(k1, kb0 + s->KB);
    for (size_t xi = 0; xi < A2; xi++) {
      const float *ux = ug + xi * Mp * Cpg;
      float *mx = Mb + xi * ms;
      for (size_t c0 = 0; c0 < Cpg; c0 += s->KC) {
        const size_t kc = EC_MIN(s->KC, Cpg - c0);
        for (size_t j0 = 0; j0 < nt; j0 += NR) {
          const size_t nr = EC_MIN(NR, nt - j0);
          const float *vb = V + xi * vs + j0 / NR * pst + c0 * NR;
          for (size_t i0 = kb0; i0 < kb1; i0 += MR)
            s->uk(EC_MIN(MR, kb1 - i0), nr, kc, ux + i0 * Cpg + c0 * MR, vb, mx + (i0 - kb0) * TB + j0, TB,
                  c0 != 0, NULL);
        }
      }
    }
    for (size_t k = kb0; k < kb1; k++) {
      const size_t kk = g * Kpg + k, yo = (n * s->K + kk) * HoWo;
      const float bias = a->bias ? a->bias[kk] : 0.0f;
      for (size_t t = t0; t < t0 + nt;) {
        const size_t th = t / TW, tw = t % TW, len = EC_MIN(TW - tw, t0 + nt - t);
        const size_t o = yo + th * m * s->Wo + tw * m;
        s->tout(len, Mb + (k - kb0) * TB + (t - t0), ms, a->y + o, s->Wo, EC_MIN(m, s->Ho - th * m),
                s->Wo - tw * m, bias, a->res ? a->res + o : NULL, a->res_before_act, a->act);
        t += len;
      }
    }
  }
}

EC_INLINE void f32_winograd_item(const f32_winograd_shape *s, const f32_winograd_args *a, size_t tid,
                                 size_t item) {
  f32_winograd_item_nb(s, a, tid, item, EC_DIV_UP(s->TH * s->TW, s->TB));
}

typedef struct {
  const f32_winograd_shape *s;
  const f32_winograd_args *a;
  size_t nblocks;
} f32_winograd_job;

static inline void f32_winograd_pack_task(void *ctx, size_t begin, size_t end) {
  const f32_winograd_job *j = (const f32_winograd_job *)ctx;
  for (size_t i = begin; i < end; i++) f32_winograd_pack_plane(j->s, j->a, i);
}

static inline void f32_winograd_task(void *ctx, size_t tid, size_t begin, size_t end) {
  const f32_winograd_job *j = (const f32_winograd_job *)ctx;
  for (size_t i = begin; i < end; i++) f32_winograd_item_nb(j->s, j->a, tid, i, j->nblocks);
}

EC_INLINE void f32_winograd_run(const f32_winograd_shape *s, const f32_winograd_args *a, ec_pool *pool) {
  const size_t planes = s->N * s->C, n = f32_winograd_items(s);
  if (ec_pool_threads(pool) <= 1) {
    for (size_t i = 0; i < planes; i++) f32_winograd_pack_plane(s, a, i);
    for (size_t i = 0; i < n; i++) f32_winograd_item(s, a, 0, i);
    return;
  }
  const size_t T = s->TH * s->TW, threads = (size_t)ec_pool_threads(pool);
  f32_winograd_job j = {s, a, ec_even_blocks(EC_DIV_UP(T, s->NR), EC_DIV_UP(T, s->TB), s->N * s->G * s->KSPLIT, threads)};
  (void)n;
  ec_parallel_for(pool, planes, EC_MAX(1, planes / (4 * threads)), f32_winograd_pack_task, &j);
  ec_parallel_for_tid(pool, s->N * s->G * j.nblocks * s->KSPLIT, 1, f32_winograd_task, &j);
}

#endif
