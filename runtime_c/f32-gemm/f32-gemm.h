/* Packed fp32 GEMM: C[M][N] (+)= A[M][K] * B[K][N], then an epilogue on the last K block.
 *
 * Layouts (MR, NR = microkernel tile, zero-padded tails):
 *   packed A: [ceil(M/MR)][K][MR]   (conv/Gemm weights, packed offline by codegen/ops)
 *   packed B: [ceil(N/NR)][K][NR]   (activations, packed per column block at run time)
 * A K block [k0, k0+kc) of a strip/panel is contiguous at offset k0*MR / k0*NR, so K blocking
 * needs no repacking. Microkernels of every ISA share f32_gemm_ukernel_fn. */
#ifndef F32_GEMM_H
#define F32_GEMM_H

#include <string.h>
#include "../ec_common.h"
#include "../ec_threadpool.h"

/* c: tile origin (row stride ldc); mr <= MR rows and nr <= NR columns are stored.
 * accumulate: add to what c holds. ep: NULL except on the last K block. */
typedef void (*f32_gemm_ukernel_fn)(size_t mr, size_t nr, size_t kc, const float *a,
                                    const float *b, float *c, size_t ldc, int accumulate,
                                    const ec_tile_epi *ep);

#define F32_GEMM_DECL(name)                                                                     \
  void name(size_t mr, size_t nr, size_t kc, const float *EC_RESTRICT a,                       \
            const float *EC_RESTRICT b, float *EC_RESTRICT c, size_t ldc, int accumulate,      \
            const ec_tile_epi *ep)

/* Indirect variant (f32-igemm/): B row k of the tile is read in place at b + koff[k]; the
 * caller guarantees NR readable floats there (tails compute columns that are discarded). */
typedef void (*f32_igemm_ukernel_fn)(size_t mr, size_t nr, size_t kc, const float *a,
                                     const float *b, const int32_t *koff, float *c, size_t ldc,
                                     int accumulate, const ec_tile_epi *ep);

#define F32_IGEMM_DECL(name)                                                                    \
  void name(size_t mr, size_t nr, size_t kc, const float *EC_RESTRICT a,                       \
            const float *EC_RESTRICT b, const int32_t *EC_RESTRICT koff, float *EC_RESTRICT c, \
            size_t ldc, int accumulate, const ec_tile_epi *ep)

/* Packing variant (f32-gemm-tmpl.h PACKB): B row k of the tile read in place at b + k * ldb, all NR columns
 * (readable there: callers pass whole panels, nr == NR), and stored to the packed panel at bpk + k * NR. */
typedef void (*f32_gemm_packb_ukernel_fn)(size_t mr, size_t nr, size_t kc, const float *a, const float *b,
                                          size_t ldb, float *bpk, float *c, size_t ldc, int accumulate,
                                          const ec_tile_epi *ep);

#define F32_GEMM_PACKB_DECL(name)                                                                \
  void name(size_t mr, size_t nr, size_t kc, const float *EC_RESTRICT a, const float *EC_RESTRICT b, \
            size_t ldb, float *EC_RESTRICT bpk, float *EC_RESTRICT c, size_t ldc, int accumulate, \
            const ec_tile_epi *ep)

F32_GEMM_PACKB_DECL(f32_gemm_packb_ukernel_4x4__scalar);
F32_GEMM_PACKB_DECL(f32_gemm_packb_ukernel_6x16__avx2);
F32_GEMM_PACKB_DECL(f32_gemm_packb_ukernel_12x32__avx512);
F32_GEMM_PACKB_DECL(f32_gemm_packb_ukernel_8x12__neon);
F32_GEMM_PACKB_DECL(f32_gemm_packb_ukernel_4x8__neon);

F32_IGEMM_DECL(f32_igemm_ukernel_4x4__scalar);
F32_IGEMM_DECL(f32_igemm_ukernel_6x16__avx2);
F32_IGEMM_DECL(f32_igemm_ukernel_12x32__avx512);
F32_IGEMM_DECL(f32_igemm_ukernel_8x12__neon);
F32_IGEMM_DECL(f32_igemm_ukernel_4x8__neon);

F32_GEMM_DECL(f32_gemm_ukernel_4x4__scalar);
F32_GEMM_DECL(f32_gemm_ukernel_6x16__avx2);
F32_GEMM_DECL(f32_gemm_ukernel_12x32__avx512);
F32_GEMM_DECL(f32_gemm_ukernel_8x12__neon);
F32_GEMM_DECL(f32_gemm_ukernel_4x8__neon);

/* Whole-matrix epilogue description (pointers at column 0 / row 0 of the output). */
typedef struct {
  const float *bias_r; /* [M] or NULL */
  const float *bias_c; /* [N] or NULL */
  const float *res;    /* like C (row stride ldc) or NULL */
  int res_before_act;
  ec_act act;
} f32_gemm_epi;

/* Packs rows [0,M) of A (element (m,k) at a[m*rs + k*cs]) into [ceil(M/MR)][K][MR]. */
EC_INLINE void f32_gemm_pack_a(size_t M, size_t K, const float *EC_RESTRICT a, size_t rs,
                               size_t cs, size_t MR, float *EC_RESTRICT dst) {
  for (size_t i0 = 0; i0 < M; i0 += MR) {
    float *d = dst + i0 * K;
    for (size_t k = 0; k < K; k++)
      for (size_t i = 0; i < MR; i++)
        d[k * MR + i] = i0 + i < M ? a[(i0 + i) * rs + k * cs] : 0.0f;
  }
}

/* Packs columns [n0, n0+nc) of B (element (k,n) at b[k*rs + n*cs]) into [ceil(nc/NR)][K][NR]. */
EC_INLINE void f32_gemm_pack_b(size_t K, size_t N, const float *EC_RESTRICT b, size_t rs,
                               size_t cs, size_t n0, size_t nc, size_t NR,
                               float *EC_RESTRICT dst) {
  for (size_t j0 = 0; j0 < nc; j0 += NR) {
    float *d = dst + j0 * K;
    size_t w = EC_MIN(NR, N - (n0 + j0));
    for (size_t k = 0; k < K; k++) {
      const float *s = b + k * rs + (n0 + j0) * cs;
      if (cs == 1) {
        memcpy(d + k * NR, s, w * sizeof(float));
      } else {
        for (size_t j = 0; j < w; j++) d[k * NR + j] = s[j * cs];
      }
      for (size_t j = w; j < NR; j++) d[k * NR + j] = 0.0f;
    }
  }
}

/* C[m0..m1) x [n0, n0+nc) from packed A (all rows) and a packed B block of nc columns.
 * Loop order keeps one B panel K block (kc x NR) in L1 while A strips stream from L2. */
EC_INLINE void f32_gemm_block(f32_gemm_ukernel_fn uk, size_t MR, size_t NR, size_t KC, size_t K,
                              size_t m0, size_t m1, const float *apack, const float *bpack,
                              size_t n0, size_t nc, float *c, size_t ldc, const f32_gemm_epi *e) {
  for (size_t k0 = 0; k0 < K; k0 += KC) {
    const size_t kc = EC_MIN(KC, K - k0);
    const int last = k0 + kc == K;
    for (size_t j0 = 0; j0 < nc; j0 += NR) {
      const size_t nr = EC_MIN(NR, nc - j0);
      const float *bp = bpack + j0 * K + k0 * NR;
      for (size_t i0 = m0; i0 < m1; i0 += MR) {
        const size_t mr = EC_MIN(MR, m1 - i0);
        float *ct = c + i0 * ldc + n0 + j0;
        ec_tile_epi te;
        if (last) {
          te.bias_r = e->bias_r ? e->bias_r + i0 : NULL;
          te.bias_c = e->bias_c ? e->bias_c + n0 + j0 : NULL;
          te.res = e->res ? e->res + i0 * ldc + n0 + j0 : NULL;
          te.res_before_act = e->res_before_act;
          te.act = e->act;
        }
        uk(mr, nr, kc, apack + i0 * K + k0 * MR, bp, ct, ldc, k0 != 0, last ? &te : NULL);
      }
    }
  }
}

/* Gemm/MatMul driver: C[b] = A[a_idx[b]] x B[b_idx[b]] (+ epilogue) for b < BATCH.
 * An operand is either packed offline (weights: packed batches back to back) or raw with
 * element strides (rs, cs), in which case every distinct batch is packed into scratch first. */
typedef struct {
  size_t M, N, K, MR, NR, KC;
  size_t BATCH, A_BATCHES, B_BATCHES;
  int a_packed, b_packed;
  size_t a_rs, a_cs, b_rs, b_cs; /* raw operands: element (m,k) at m*a_rs + k*a_cs, (k,n) at k*b_rs + n*b_cs */
  size_t NCH;                    /* columns per work item, a multiple of NR */
  f32_gemm_ukernel_fn uk;
} f32_gemm_shape;

typedef struct {
  const float *a, *b;
  float *c;
  const uint32_t *a_idx, *b_idx; /* batch maps, NULL = identity */
  f32_gemm_epi e;                /* res: like C including the batch dimension */
  float *scratch;                /* f32_gemm_scratch_bytes */
} f32_gemm_args;

static inline size_t f32_gemm_scratch_bytes(const f32_gemm_shape *s) {
  size_t n = 0;
  if (!s->a_packed) n += s->A_BATCHES * EC_ROUND_UP(s->M, s->MR) * s->K;
  if (!s->b_packed) n += s->B_BATCHES * EC_ROUND_UP(s->N, s->NR) * s->K;
  return n * sizeof(float);
}

/* Work items: (batch, column block, row chunk); blocks are whole NR panels of at most NCH
 * columns, row chunks whole MR strips. The split never changes a tile's arithmetic. */
typedef struct {
  const f32_gemm_shape *s;
  const f32_gemm_args *a;
  const float *ap, *bp;
  size_t blocks, msplit;
} f32_gemm_job;

EC_INLINE void f32_gemm_item(const f32_gemm_job *j, size_t item) {
  const f32_gemm_shape *s = j->s;
  const size_t ms = item % j->msplit, t = item / j->msplit, b = t / j->blocks;
  size_t p0, p1;
  ec_block_range(EC_DIV_UP(s->N, s->NR), j->blocks, t % j->blocks, &p0, &p1);
  const size_t mchunk = EC_ROUND_UP(EC_DIV_UP(s->M, j->msplit), s->MR);
  const size_t m0 = ms * mchunk, m1 = EC_MIN(s->M, m0 + mchunk);
  if (p0 >= p1 || m0 >= m1) return;
  const size_t n0 = p0 * s->NR, nc = EC_MIN(p1 * s->NR, s->N) - n0;
  const size_t ai = j->a->a_idx ? j->a->a_idx[b] : (s->A_BATCHES > 1 ? b : 0);
  const size_t bi = j->a->b_idx ? j->a->b_idx[b] : (s->B_BATCHES > 1 ? b : 0);
  const float *ap = j->ap + ai * EC_ROUND_UP(s->M, s->MR) * s->K;
  const float *bp = j->bp + bi * EC_ROUND_UP(s->N, s->NR) * s->K + n0 * s->K;
  f32_gemm_epi e = j->a->e;
  if (e.res) e.res += b * s->M * s->N;
  f32_gemm_block(s->uk, s->MR, s->NR, s->KC, s->K, m0, m1, ap, bp, n0, nc, j->a->c + b * s->M * s->N, s->N, &e);
}

static inline void f32_gemm_task(void *ctx, size_t begin, size_t end) {
  for (size_t i = begin; i < end; i++) f32_gemm_item((const f32_gemm_job *)ctx, i);
}

EC_INLINE void f32_gemm_run(const f32_gemm_shape *s, const f32_gemm_args *a, ec_pool *pool) {
  f32_gemm_job j = {s, a, a->a, a->b, EC_DIV_UP(s->N, s->NCH), 1};
  float *sp = a->scratch;
  if (!s->a_packed) {
    for (size_t q = 0; q < s->A_BATCHES; q++)
      f32_gemm_pack_a(s->M, s->K, a->a + q * s->M * s->K, s->a_rs, s->a_cs, s->MR,
                      sp + q * EC_ROUND_UP(s->M, s->MR) * s->K);
    j.ap = sp;
    sp += s->A_BATCHES * EC_ROUND_UP(s->M, s->MR) * s->K;
  }
  if (!s->b_packed) {
    for (size_t q = 0; q < s->B_BATCHES; q++)
      f32_gemm_pack_b(s->K, s->N, a->b + q * s->K * s->N, s->b_rs, s->b_cs, 0, s->N, s->NR,
                      sp + q * EC_ROUND_UP(s->N, s->NR) * s->K);
    j.bp = sp;
  }
  const size_t threads = (size_t)ec_pool_threads(pool);
  if (threads <= 1) {
    for (size_t i = 0; i < s->BATCH * j.blocks; i++) f32_gemm_item(&j, i);
    return;
  }
  /* few column blocks (a tall, narrow product): split rows too, for ~4 items per thread */
  const size_t nb = s->BATCH * j.blocks;
  if (nb < 4 * threads) j.msplit = EC_MIN(EC_DIV_UP(s->M, s->MR), EC_DIV_UP(4 * threads, nb));
  j.blocks = ec_even_blocks(EC_DIV_UP(s->N, s->NR), j.blocks, s->BATCH * j.msplit, threads);
  ec_parallel_for(pool, s->BATCH * j.blocks * j.msplit, 1, f32_gemm_task, &j);
}

#endif
