/* Winograd F(m,3) convolution for 3x3, stride 1, dilation 1 layers (any padding, groups), NCHW fp32.
 *
 * Per group, output tiles of m x m pixels (alpha = m + 2 input pixels a side) in row-major tile
 * order t = th*TW + tw. With U = G g G^T (packed offline) and V = B^T d B, the layer is alpha^2
 * independent GEMMs M[xi] = V[xi]^T (tiles x Cpg) x U[xi]^T (Cpg x Kpg), then Y = A^T M A per tile.
 * Tiles are the GEMM's rows (MR at a time) and output channels its columns (NR): a map's tile count
 * is rarely a multiple of anything, and rounding it up to MR pads less than to NR (F(4,3) at 28x28:
 * 49 tiles -> 54 rows, was 64 columns; 1.35x -> 1.10x the useful multiplies), while channel counts
 * are usually multiples of NR.
 *
 * Layouts:
 *   xp: the padded input split into m column phases per plane, [N*C][m][HP][Q]: padded element
 *       (r, q*m + ph) at [ph][r][q]. Every tile row's input value (i, j) of VL consecutive tiles
 *       is then one contiguous vector, [j % m][th*m + i][tw + j / m].
 *   u:  [G][alpha^2][ceil(Kpg/NR)][Cpg][NR] (the GEMM's packed B, one matrix per xi).
 *   V:  per thread [alpha^2][TB/MR][Cpg*MR + PAD] (+ PAD per xi): the GEMM's packed A, TB tiles
 *       per work item (a multiple of MR). The input transform writes it directly, one run of tiles
 *       within a tile row and a strip at a time, channel by channel, runs in tile order.
 *   M:  per thread [alpha^2][TB][KB] (+ PAD per xi), KB output channels per GEMM pass (of NR).
 * The pads keep the alpha^2 streams of the transforms off one cache set (power-of-two strides),
 * and take the whole-vector stores of the input transform past a run's last tile: they land on
 * values written later in that order or in a pad (masked stores cost 3x the transform on Zen 3).
 * A work item (n, group, block of TB tiles, K chunk) transforms its tiles' input into V (in L2),
 * runs the alpha^2 GEMMs one KB pass at a time (a U panel of KC x NR in L1 against every strip of
 * the block) and transforms each pass's M straight into NCHW with the epilogue. The input
 * transform is vectorised over the tiles of a tile row, the output transform over output channels.
 * Inside a channel-blocked region (codegen/layout.py) the layer runs f32-winograd-nchwc.h instead, on the
 * channel-lane transforms (inc, outc) declared here. */
#ifndef F32_WINOGRAD_H
#define F32_WINOGRAD_H

#include <string.h>
#if defined(__SSE2__)
#include <immintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif
#include "../ec_common.h"
#include "../ec_threadpool.h"
#include "../f32-gemm/f32-gemm.h"

/* F32_WINOGRAD_PROFILE (benchmarks/c/f32_winograd_split.c): thread CPU seconds per phase, one thread.
 * Phases: 0 phase packing, 1 input transform, 2 GEMMs, 3 output transform. */
#ifdef F32_WINOGRAD_PROFILE
#include <time.h>
static double f32_winograd_prof[4];
static double f32_winograd_prof_t;
static inline double f32_winograd_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
#define F32_WINOGRAD_MARK() (f32_winograd_prof_t = f32_winograd_now())
#define F32_WINOGRAD_LAP(i) \
  (f32_winograd_prof[i] += f32_winograd_now() - f32_winograd_prof_t, F32_WINOGRAD_MARK())
#else
#define F32_WINOGRAD_MARK() ((void)0)
#define F32_WINOGRAD_LAP(i) ((void)0)
#endif

/* Input transform of the tiles of nr runs, one channel: run r is len[r] consecutive tiles of one tile
 * row, its first at p + src[r] in the phase planes (padded value (i, tw*m + j) of the row's tile tw at
 * p[(j % m)*ps + i*q + tw + j/m] when src[r] is that row's tile 0); the runs' tiles, concatenated, go
 * to v: value xi of the k-th tile at v[xi*vs + k]. SIMD variants load and store whole vectors: up to
 * EC_VL - 1 floats after the n values of each xi may be overwritten, and as many after each row's values
 * read (the phase planes end in F32_WINOGRAD_XP_PAD zeros; masked loads made the transform ~1.13x slower).
 * A vector of tiles may span runs (a strip that crosses tile rows): each run's lanes come from its own
 * load, blended, and such loads start up to EC_VL - 1 floats before src[r] (never before p). */
#define F32_WINOGRAD_IN_DECL(name)                                                              \
  void name(size_t nr, const size_t *EC_RESTRICT len, const size_t *EC_RESTRICT src,              \
            const float *EC_RESTRICT p, size_t ps, size_t q, float *EC_RESTRICT v, size_t vs)
/* Output transform of one tile, nk output channels: M value xi of channel k at mm[xi*ms + k];
 * writes channel k's rows x cols pixels (the tile clipped to the map) at y + k*ys (row stride ldy):
 * y = epilogue(A^T M A + bias[k]), bias NULL for none, res like y or NULL. SIMD variants read whole
 * vectors: mm[xi*ms + k] must be readable up to k = nk rounded up to EC_VL. The channel-blocked
 * variant (outc) writes nk (a multiple of EC_VL) channels as blocks ys floats apart, pixel
 * (i, j) of the tile at (i*ldy + j)*EC_VL in its block; res alike. */
#define F32_WINOGRAD_OUT_ARGS                                                                              \
  size_t nk, const float *EC_RESTRICT mm, size_t ms, float *EC_RESTRICT y, size_t ldy, size_t ys, size_t rows, \
      size_t cols, const float *EC_RESTRICT bias, const float *EC_RESTRICT res, int before, ec_act act
#define F32_WINOGRAD_OUT_DECL(name) void name(F32_WINOGRAD_OUT_ARGS)

/* Input transform with channels in the lanes (f32-winograd-nchwc.h): nt tiles t0.. (row-major, TW a
 * row) of one block of an NCHWc input (x: the block's H x W pixels of EC_VL channels); value (i, j) of tile
 * (th, tw) is pixel (th*m + i - PT, tw*m + j - PL), zero outside; value xi of the k-th tile to v[xi*vs + k*EC_VL]. */
#define F32_WINOGRAD_INC_ARGS                                                                                   \
  const float *EC_RESTRICT x, size_t H, size_t W, size_t PT, size_t PL, size_t TW, size_t t0, size_t nt, \
      float *EC_RESTRICT v, size_t vs
#define F32_WINOGRAD_INC_DECL(name) void name(F32_WINOGRAD_INC_ARGS)

/* The portable twins of inc and outc (incb, outcb: scalar, the reference they are tested against): the block
 * width cb, which a scalar build has no vector to fix, is a parameter; with cb = EC_VL the SIMD variant's
 * semantics, EC_VL read as cb throughout. They read and write exactly the values named there. */
#define F32_WINOGRAD_INCB_DECL(name) void name(size_t cb, F32_WINOGRAD_INC_ARGS)
#define F32_WINOGRAD_OUTCB_DECL(name) void name(size_t cb, F32_WINOGRAD_OUT_ARGS)

typedef F32_WINOGRAD_IN_DECL((*f32_winograd_in_fn));
typedef F32_WINOGRAD_INC_DECL((*f32_winograd_inc_fn));
typedef F32_WINOGRAD_OUT_DECL((*f32_winograd_out_fn));

#define F32_WINOGRAD_PAD 16    /* floats after each xi slice of V and M */
#define F32_WINOGRAD_XP_PAD 32 /* zeros after the phase planes (whole-vector reads past a row) */

#define F32_WINOGRAD_SCALAR(f)                                                                  \
  F32_WINOGRAD_IN_DECL(f32_winograd_in_##f##__scalar);                                          \
  F32_WINOGRAD_OUT_DECL(f32_winograd_out_##f##__scalar);                                        \
  F32_WINOGRAD_OUTCB_DECL(f32_winograd_outcb_##f##__scalar);                                    \
  F32_WINOGRAD_INCB_DECL(f32_winograd_incb_##f##__scalar);
F32_WINOGRAD_SCALAR(f23)
F32_WINOGRAD_SCALAR(f43)
F32_WINOGRAD_SCALAR(f63)
#undef F32_WINOGRAD_SCALAR
#define F32_WINOGRAD_KERNELS(f, isa)                                                            \
  F32_WINOGRAD_IN_DECL(f32_winograd_in_##f##__##isa);                                           \
  F32_WINOGRAD_OUT_DECL(f32_winograd_out_##f##__##isa);                                         \
  F32_WINOGRAD_OUT_DECL(f32_winograd_outc_##f##__##isa);                                        \
  F32_WINOGRAD_INC_DECL(f32_winograd_inc_##f##__##isa);
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
  size_t TB, KB;      /* tiles per work item (multiple of MR), output channels per pass (of NR) */
  size_t KSPLIT;      /* K chunks per tile block (parallelism for few tiles) */
  size_t MR, NR, KC;  /* GEMM microkernel tile, input channels per K block */
  f32_gemm_ukernel_fn uk;
  f32_winograd_in_fn tin;
  f32_winograd_out_fn tout;
  size_t PHASE;       /* nonzero: tmp starts with V of every tile (phase-parallel split allowed) */
  size_t NRV;         /* the microkernel's one-vector width (0: none): a tail panel of at most NRV output
                       * channels runs NRV columns, not NR (Kpg 72 on 32-wide panels: 80 not 96) */
  size_t NRH;         /* its half-vector unit (EC_HVL; 0: none): a tail panel runs its width rounded up to
                       * that, below NR (Kpg 72: 72; Kpg 18: 24 not 32) */
} f32_winograd_shape;

typedef struct {
  const float *x;
  float *y;
  const float *u;      /* [G][alpha^2][ceil(Kpg/NR)][Cpg][NR] */
  const float *bias;
  const float *res;
  int res_before_act;
  ec_act act;
  float *xp;  /* f32_winograd_xp_floats */
  float *tmp; /* [f32_winograd_vall_floats if PHASE] then threads x f32_winograd_tmp_floats: V then M */
} f32_winograd_args;

static inline size_t f32_winograd_xp_floats(size_t N, size_t C, size_t m, size_t HP, size_t Q) {
  return N * C * m * HP * Q + F32_WINOGRAD_XP_PAD;
}

/* The xi stride of V or M for a slice of n floats (its own PAD included): one more PAD when the stride
 * is a multiple of 512 bytes, where the alpha^2 streams would share a few L1 sets (128ch 28x28 g=8 F(4,3):
 * a V slice of exactly 4 KB made the input transform 2.6x slower). */
static inline size_t f32_winograd_xi_stride(size_t n) {
  return n % 128 ? n : n + F32_WINOGRAD_PAD;
}

/* V and M of one thread (TB a multiple of MR) */
static inline size_t f32_winograd_tmp_floats(size_t m, size_t Cpg, size_t KB, size_t TB, size_t MR) {
  return (m + 2) * (m + 2) * (f32_winograd_xi_stride(TB / MR * (Cpg * MR + F32_WINOGRAD_PAD) + F32_WINOGRAD_PAD) +
                              f32_winograd_xi_stride(KB * TB + F32_WINOGRAD_PAD));
}

/* V of every tile, per (n, group) [alpha^2][strips][Cpg*MR + PAD] (+ PAD per xi): the phase-parallel split */
static inline size_t f32_winograd_vall_floats(size_t m, size_t N, size_t G, size_t Cpg, size_t T, size_t MR) {
  return N * G * (m + 2) * (m + 2) *
         f32_winograd_xi_stride(EC_DIV_UP(T, MR) * (Cpg * MR + F32_WINOGRAD_PAD) + F32_WINOGRAD_PAD);
}

EC_INLINE size_t f32_winograd_items(const f32_winograd_shape *s) {
  return s->N * s->G * EC_DIV_UP(s->TH * s->TW, s->TB) * s->KSPLIT;
}

/* n column blocks of m input floats at s dealt into the m phase rows at d (stride ds): m is a
 * constant in each loop so the compiler turns the stride-m loads into vector shuffles (the
 * generic loop ran at ~3 cycles an element, 10% of a 128-channel F(4,3) layer). */
EC_INLINE void f32_winograd_deal(size_t m, const float *EC_RESTRICT s, float *EC_RESTRICT d, size_t ds, size_t n) {
  float *EC_RESTRICT d1 = d + ds, *EC_RESTRICT d2 = d1 + ds, *EC_RESTRICT d3 = d2 + ds;
  switch (m) {
  case 2:
    for (size_t q = 0; q < n; q++) d[q] = s[2 * q], d1[q] = s[2 * q + 1];
    break;
  case 4: {
    size_t q = 0;
#if defined(__SSE2__)
    for (; q + 4 <= n; q += 4) { /* four blocks as a 4x4 transpose: rows of 28 have only 6 whole blocks */
      __m128 r0 = _mm_loadu_ps(s + 4 * q), r1 = _mm_loadu_ps(s + 4 * q + 4), r2 = _mm_loadu_ps(s + 4 * q + 8),
             r3 = _mm_loadu_ps(s + 4 * q + 12);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      _mm_storeu_ps(d + q, r0), _mm_storeu_ps(d1 + q, r1), _mm_storeu_ps(d2 + q, r2), _mm_storeu_ps(d3 + q, r3);
    }
#elif defined(__ARM_NEON)
    for (; q + 4 <= n; q += 4) {
      const float32x4x4_t v = vld4q_f32(s + 4 * q);
      vst1q_f32(d + q, v.val[0]), vst1q_f32(d1 + q, v.val[1]), vst1q_f32(d2 + q, v.val[2]), vst1q_f32(d3 + q, v.val[3]);
    }
#endif
    for (; q < n; q++) d[q] = s[4 * q], d1[q] = s[4 * q + 1], d2[q] = s[4 * q + 2], d3[q] = s[4 * q + 3];
    break;
  }
  case 6: {
    float *EC_RESTRICT d4 = d3 + ds, *EC_RESTRICT d5 = d4 + ds;
    for (size_t q = 0; q < n; q++)
      d[q] = s[6 * q], d1[q] = s[6 * q + 1], d2[q] = s[6 * q + 2], d3[q] = s[6 * q + 3], d4[q] = s[6 * q + 4],
      d5[q] = s[6 * q + 5];
    break;
  }
  default:
    for (size_t q = 0; q < n; q++)
      for (size_t ph = 0; ph < m; ph++) d[ph * ds + q] = s[q * m + ph];
  }
}

enum { F32_WINOGRAD_BUF = 1024 };

/* floats of the packing buffer the m = 4 path expects zero (its padded row) */
EC_INLINE size_t f32_winograd_buf_zero(const f32_winograd_shape *s) {
  return EC_MIN((size_t)F32_WINOGRAD_BUF, EC_ROUND_UP(s->Q, 4) * 4);
}

/* Padded row r of a plane into its m column phases (plane base dst): `row` is the input row, NULL where r lies in
 * the padding. buf holds F32_WINOGRAD_BUF floats; on the m = 4 path its first f32_winograd_buf_zero() are zero
 * outside the row's own columns: the caller zeroes them once and rows rewrite only those, so one buffer serves a
 * task's rows and planes. The other path does not use it. */
EC_INLINE void f32_winograd_pack_row(const f32_winograd_shape *s, const float *row, float *dst, size_t r,
                                     float *EC_RESTRICT buf) {
  const size_t m = s->M, HP = s->HP, Q = s->Q, W = s->W, PL = s->PL;
#if defined(__SSE2__) || defined(__ARM_NEON)
  if (m == 4 && EC_ROUND_UP(Q, 4) * 4 <= F32_WINOGRAD_BUF) {
    /* the row padded in buf, then dealt whole by 4x4 transposes, 4 column blocks a step: short rows spent ~2
     * cycles a float on the edge blocks' per-column tests (128ch 28x28 F(4,3): 8 blocks a row, 2 of them
     * edges; 0.077 -> 0.060 ms a layer). A row's last step stores up to 3 floats past the row, into the next
     * row of its phase, rewritten when that row is dealt; the last row stores exactly. Zero rows are stored
     * inline: per-row memcpy/memset calls and a scalar tail of blocks were most of a 7x7 map's packing (512ch:
     * 0.072 ms against 0.052 for its input transform). F(2,3)'s two-way deal measured no faster this way. */
    const size_t QW = EC_ROUND_UP(Q, 4), pl = EC_MIN(PL, Q * m), n = EC_MIN(W, Q * m - pl), ds = HP * Q;
    float *d = dst + r * Q;
    const int last = r + 1 == HP;
    if (!row) {
      for (size_t ph = 0; ph < m; ph++) {
        float *dp = d + ph * ds;
        if (last) {
          memset(dp, 0, Q * sizeof(float));
          continue;
        }
        for (size_t q = 0; q < QW; q += 4) {
#if defined(__SSE2__)
          _mm_storeu_ps(dp + q, _mm_setzero_ps());
#else
          vst1q_f32(dp + q, vdupq_n_f32(0.0f));
#endif
        }
      }
      return;
    }
    size_t x = 0;
#if defined(__SSE2__)
    for (; x + 4 <= n; x += 4) _mm_storeu_ps(buf + pl + x, _mm_loadu_ps(row + x));
#else
    for (; x + 4 <= n; x += 4) vst1q_f32(buf + pl + x, vld1q_f32(row + x));
#endif
    for (; x < n; x++) buf[pl + x] = row[x];
    if (last) {
      f32_winograd_deal(m, buf, d, ds, Q);
      return;
    }
    for (size_t q = 0; q < QW; q += 4) {
#if defined(__SSE2__)
      __m128 r0 = _mm_loadu_ps(buf + 4 * q), r1 = _mm_loadu_ps(buf + 4 * q + 4), r2 = _mm_loadu_ps(buf + 4 * q + 8),
             r3 = _mm_loadu_ps(buf + 4 * q + 12);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      _mm_storeu_ps(d + q, r0), _mm_storeu_ps(d + ds + q, r1), _mm_storeu_ps(d + 2 * ds + q, r2),
          _mm_storeu_ps(d + 3 * ds + q, r3);
#else
      const float32x4x4_t v = vld4q_f32(buf + 4 * q);
      vst1q_f32(d + q, v.val[0]), vst1q_f32(d + ds + q, v.val[1]), vst1q_f32(d + 2 * ds + q, v.val[2]),
          vst1q_f32(d + 3 * ds + q, v.val[3]);
#endif
    }
    return;
  }
#endif
  (void)buf; /* the m = 4 path's */
  if (!row) {
    for (size_t ph = 0; ph < m; ph++) memset(dst + (ph * HP + r) * Q, 0, Q * sizeof(float));
    return;
  }
  /* column blocks q whose m columns q*m - PL .. q*m + m-1 - PL are all inside the row: [qa, qb) */
  const size_t qa = EC_MIN(Q, EC_DIV_UP(PL, m));
  const size_t qb = EC_MAX(qa, EC_MIN(Q, W + PL >= m ? (W + PL - m) / m + 1 : 0));
  for (size_t ph = 0; ph < m; ph++) { /* the edge blocks, zero outside the row */
    float *d = dst + (ph * HP + r) * Q;
    for (size_t q = 0; q < Q; q++) {
      if (q == qa) q = qb; /* the interior: dealt below */
      if (q >= Q) break;
      const ptrdiff_t col = (ptrdiff_t)(q * m + ph) - (ptrdiff_t)PL;
      d[q] = col >= 0 && col < (ptrdiff_t)W ? row[col] : 0.0f;
    }
  }
  if (qb > qa) f32_winograd_deal(m, row + qa * m - PL, dst + r * Q + qa, HP * Q, qb - qa);
}

/* Plane p (n*C + c) of an NCHW input, padded and split into column phases. */
EC_INLINE void f32_winograd_pack_plane(const f32_winograd_shape *s, const f32_winograd_args *a, size_t p) {
  float buf[F32_WINOGRAD_BUF];
  memset(buf, 0, f32_winograd_buf_zero(s) * sizeof(float));
  const float *src = a->x + p * s->H * s->W;
  float *dst = a->xp + p * s->M * s->HP * s->Q;
  for (size_t r = 0; r < s->HP; r++) {
    const ptrdiff_t ih = (ptrdiff_t)r - (ptrdiff_t)s->PT;
    const int in = ih >= 0 && ih < (ptrdiff_t)s->H;
    f32_winograd_pack_row(s, in ? src + (size_t)ih * s->W : NULL, dst, r, buf);
  }
}

/* Input transform of the nt tiles from t0 (a strip start) of (n, g) into V: strip stride Cpg*MR + PAD,
 * xi stride vs. Whole-vector stores stay within these strips and the pad after the last. */
EC_INLINE void f32_winograd_vin(const f32_winograd_shape *s, const f32_winograd_args *a, size_t n, size_t g,
                                size_t t0, size_t nt, float *V, size_t vs) {
  const size_t m = s->M, TW = s->TW, Cpg = s->C / s->G, MR = s->MR, ps = s->HP * s->Q;
  const size_t pst = Cpg * MR + F32_WINOGRAD_PAD; /* strip stride */
  /* runs of tiles within one tile row and one strip, the same for every channel: found once, in
   * batches (the divisions per run per channel cost as much as a third of the transform) of whole strips
   * (a strip has at most MR runs): a channel's whole-vector stores past a strip's runs land on the next
   * channel's lanes, rewritten by its call only if that comes later, i.e. in the same batch */
  enum { RUNS = 64 };
  size_t rlen[RUNS], rsrc[RUNS], rdst[RUNS];
  const float *xg = a->xp + (n * s->C + g * Cpg) * m * ps;
  size_t th = t0 / TW, tw = t0 % TW, j = 0;
  while (j < nt) {
    size_t nr = 0;
    for (; j < nt && (j % MR || nr + MR <= RUNS); nr++) {
      const size_t len = EC_MIN(EC_MIN(TW - tw, nt - j), MR - j % MR);
      rlen[nr] = len, rsrc[nr] = th * m * s->Q + tw, rdst[nr] = j / MR * pst + j % MR;
      j += len, tw += len;
      if (tw == TW) tw = 0, th++;
    }
    /* runs grouped by strip (consecutive in a strip): one call a strip, so one vector of tiles may take
     * the tail of a tile row and the head of the next (28x28 F(4,3): 9 strips of 6 tiles were 14 runs) */
    size_t gs[RUNS + 1], ng = 0;
    for (size_t r = 0; r < nr; r++)
      if (r == 0 || rdst[r] / pst != rdst[r - 1] / pst) gs[ng++] = r;
    gs[ng] = nr;
    for (size_t c = 0; c < Cpg; c++) {
      const float *plane = xg + c * m * ps;
      float *vc = V + c * MR;
      for (size_t k = 0; k < ng; k++)
        s->tin(gs[k + 1] - gs[k], rlen + gs[k], rsrc + gs[k], plane, ps, s->Q, vc + rdst[gs[k]], vs);
    }
  }
}

/* The alpha^2 GEMMs of the nt tiles from t0 whose V (strip 0 at V, xi stride vs) is ready, output
 * channels [k0, k1) of group g in passes of KB, each pass's M (xi stride ms) transformed into y. */
EC_INLINE void f32_winograd_gemm_out(const f32_winograd_shape *s, const f32_winograd_args *a, size_t n, size_t g,
                                     size_t t0, size_t nt, size_t k0, size_t k1, size_t KB, const float *V,
                                     size_t vs, float *Mb, size_t ms) {
  const size_t m = s->M, A2 = (m + 2) * (m + 2), TW = s->TW;
  const size_t Cpg = s->C / s->G, Kpg = s->K / s->G, MR = s->MR, NR = s->NR, HoWo = s->Ho * s->Wo;
  const size_t pst = Cpg * MR + F32_WINOGRAD_PAD;
  const size_t Np = EC_ROUND_UP(Kpg, NR);
  const float *ug = a->u + g * A2 * Np * Cpg;
  for (size_t kb0 = k0; kb0 < k1; kb0 += KB) {
    const size_t kb1 = EC_MIN(k1, kb0 + KB);
    for (size_t xi = 0; xi < A2; xi++) {
      const float *ux = ug + xi * Np * Cpg, *vx = V + xi * vs;
      float *mx = Mb + xi * ms;
      for (size_t c0 = 0; c0 < Cpg; c0 += s->KC) {
        const size_t kc = EC_MIN(s->KC, Cpg - c0);
        for (size_t i0 = kb0; i0 < kb1; i0 += NR) { /* this U panel stays in L1 over the strips */
          const float *ub = ux + i0 * Cpg + c0 * NR;
          /* whole NR columns past Kpg (U's pad columns are zero, M's rows KB wide: the full-tile stores, not the
           * edge path's masked ones), or one whole vector for a tail that fits one: one vector of FMAs a row
           * (144ch 56x56 g=2 F(4,3), Kpg 72: 0.90x the layer's time, Zen 4), or whole half vectors */
          const size_t tail = kb1 - i0;
          const size_t nrp = tail >= NR                               ? NR
                             : s->NRH && EC_ROUND_UP(tail, s->NRH) < NR ? EC_ROUND_UP(tail, s->NRH)
                             : tail <= s->NRV                         ? s->NRV
                                                                      : NR;
          for (size_t j0 = 0; j0 < nt; j0 += MR)
            s->uk(EC_MIN(MR, nt - j0), nrp, kc, vx + j0 / MR * pst + c0 * MR, ub, mx + j0 * KB + (i0 - kb0), KB,
                  c0 != 0, NULL);
        }
      }
    }
    F32_WINOGRAD_LAP(2);
    const size_t kk = g * Kpg + kb0, yo = (n * s->K + kk) * HoWo;
    for (size_t t = t0; t < t0 + nt; t++) {
      const size_t th = t / TW, tw = t % TW, o = yo + th * m * s->Wo + tw * m;
      s->tout(kb1 - kb0, Mb + (t - t0) * KB, ms, a->y + o, s->Wo, HoWo, EC_MIN(m, s->Ho - th * m),
              EC_MIN(m, s->Wo - tw * m), a->bias ? a->bias + kk : NULL, a->res ? a->res + o : NULL,
              a->res_before_act, a->act);
    }
    F32_WINOGRAD_LAP(3);
  }
}

/* Per-thread V and M slices (after V of every tile when PHASE) */
EC_INLINE float *f32_winograd_slice(const f32_winograd_shape *s, const f32_winograd_args *a, size_t tid) {
  const size_t Cpg = s->C / s->G;
  return a->tmp + (s->PHASE ? f32_winograd_vall_floats(s->M, s->N, s->G, Cpg, s->TH * s->TW, s->MR) : 0) +
         tid * f32_winograd_tmp_floats(s->M, Cpg, s->KB, s->TB, s->MR);
}

/* Work item `item` of the split into nblocks tile blocks (whole MR strips, at most TB tiles). */
EC_INLINE void f32_winograd_item_nb(const f32_winograd_shape *s, const f32_winograd_args *a, size_t tid,
                                    size_t item, size_t nblocks) {
  const size_t m = s->M, A2 = (m + 2) * (m + 2), T = s->TH * s->TW, TB = s->TB;
  const size_t Cpg = s->C / s->G, Kpg = s->K / s->G, MR = s->MR, NR = s->NR;
  const size_t ks = item % s->KSPLIT;
  size_t r = item / s->KSPLIT;
  const size_t b = r % nblocks;
  r /= nblocks;
  const size_t g = r % s->G, n = r / s->G;
  const size_t kchunk = EC_ROUND_UP(EC_DIV_UP(Kpg, s->KSPLIT), NR);
  const size_t k0 = ks * kchunk, k1 = EC_MIN(Kpg, k0 + kchunk);
  if (k0 >= k1) return;
  size_t p0, p1;
  ec_block_range(EC_DIV_UP(T, MR), nblocks, b, &p0, &p1);
  if (p0 >= p1) return;
  const size_t t0 = p0 * MR, nt = EC_MIN(p1 * MR, T) - t0, KB = s->KB;
  float *V = f32_winograd_slice(s, a, tid);
  const size_t pst = Cpg * MR + F32_WINOGRAD_PAD; /* strip stride */
  const size_t vs = f32_winograd_xi_stride(TB / MR * pst + F32_WINOGRAD_PAD),
               ms = f32_winograd_xi_stride(KB * TB + F32_WINOGRAD_PAD);
  F32_WINOGRAD_MARK();
  f32_winograd_vin(s, a, n, g, t0, nt, V, vs);
  F32_WINOGRAD_LAP(1);
  f32_winograd_gemm_out(s, a, n, g, t0, nt, k0, k1, KB, V, vs, V + A2 * vs, ms);
}

EC_INLINE void f32_winograd_item(const f32_winograd_shape *s, const f32_winograd_args *a, size_t tid,
                                 size_t item) {
  f32_winograd_item_nb(s, a, tid, item, EC_DIV_UP(s->TH * s->TW, s->TB));
}

typedef struct {
  const f32_winograd_shape *s;
  const f32_winograd_args *a;
  size_t nblocks;
  size_t sg, pg; /* phase-parallel split: strips and NR panels per GEMM item */
} f32_winograd_job;

static inline void f32_winograd_pack_task(void *ctx, size_t begin, size_t end) {
  const f32_winograd_job *j = (const f32_winograd_job *)ctx;
  for (size_t i = begin; i < end; i++) f32_winograd_pack_plane(j->s, j->a, i);
}

static inline void f32_winograd_task(void *ctx, size_t tid, size_t begin, size_t end) {
  const f32_winograd_job *j = (const f32_winograd_job *)ctx;
  for (size_t i = begin; i < end; i++) f32_winograd_item_nb(j->s, j->a, tid, i, j->nblocks);
}

/* Phase-parallel split, for layers whose strips do not share out evenly as whole blocks (49 tiles in
 * 9 strips of 6: 5 strips against 4 on two threads). The input transform of every strip goes to V of
 * every tile (one item per strip), then items of (SG strips, PG NR panels) run the GEMMs and output
 * transforms, a grid of equal items that does share out. Each strip's V and each output are the
 * same operations in the same order as in the blocked split: results do not depend on the split. */
EC_INLINE float *f32_winograd_vall(const f32_winograd_shape *s, const f32_winograd_args *a, size_t ng,
                                   size_t *vs) {
  const size_t A2 = (s->M + 2) * (s->M + 2), Cpg = s->C / s->G, strips = EC_DIV_UP(s->TH * s->TW, s->MR);
  *vs = f32_winograd_xi_stride(strips * (Cpg * s->MR + F32_WINOGRAD_PAD) + F32_WINOGRAD_PAD);
  return a->tmp + ng * A2 * *vs;
}

static inline void f32_winograd_vin_task(void *ctx, size_t begin, size_t end) {
  const f32_winograd_job *j = (const f32_winograd_job *)ctx;
  const f32_winograd_shape *s = j->s;
  const size_t T = s->TH * s->TW, MR = s->MR, strips = EC_DIV_UP(T, MR);
  const size_t pst = (s->C / s->G) * MR + F32_WINOGRAD_PAD;
  for (size_t i = begin; i < end; i++) {
    const size_t st = i % strips, ng = i / strips;
    size_t vs;
    float *V = f32_winograd_vall(s, j->a, ng, &vs);
    f32_winograd_vin(s, j->a, ng / s->G, ng % s->G, st * MR, EC_MIN(MR, T - st * MR), V + st * pst, vs);
  }
}

static inline void f32_winograd_gemm_task(void *ctx, size_t tid, size_t begin, size_t end) {
  const f32_winograd_job *j = (const f32_winograd_job *)ctx;
  const f32_winograd_shape *s = j->s;
  const size_t T = s->TH * s->TW, MR = s->MR, NR = s->NR, strips = EC_DIV_UP(T, MR), Kpg = s->K / s->G;
  const size_t pst = (s->C / s->G) * MR + F32_WINOGRAD_PAD, panels = EC_DIV_UP(Kpg, NR);
  const size_t ns = EC_DIV_UP(strips, j->sg), np = EC_DIV_UP(panels, j->pg), KB = j->pg * NR;
  float *Mb = f32_winograd_slice(s, j->a, tid);
  for (size_t i = begin; i < end; i++) {
    const size_t pb = i % np, sb = i / np % ns, ng = i / np / ns;
    const size_t s0 = sb * j->sg, s1 = EC_MIN(strips, s0 + j->sg);
    size_t vs;
    const float *V = f32_winograd_vall(s, j->a, ng, &vs);
    f32_winograd_gemm_out(s, j->a, ng / s->G, ng % s->G, s0 * MR, EC_MIN(s1 * MR, T) - s0 * MR, pb * KB,
                          EC_MIN(Kpg, (pb + 1) * KB), KB, V + s0 * pst, vs, Mb, KB * j->sg * MR + F32_WINOGRAD_PAD);
  }
}

/* (strips, panels) per GEMM item for the phase-parallel split, or 0 when the blocked split is kept: it
 * already shares out (strips a multiple of the thread count, or enough blocks that the tail is small)
 * or the items' M would not fit a thread's slice. */
EC_INLINE int f32_winograd_phase_split(const f32_winograd_shape *s, size_t threads, size_t *sg, size_t *pg) {
  const size_t T = s->TH * s->TW, strips = EC_DIV_UP(T, s->MR), ng = s->N * s->G;
  const size_t panels = EC_DIV_UP(s->K / s->G, s->NR), A2 = (s->M + 2) * (s->M + 2);
  if (!s->PHASE || threads <= 1 || ng * strips % threads == 0 || ng * strips >= 8 * threads) return 0;
  /* panel groups: the fewest (U is re-read per strip group, V per panel group) that are a multiple of
   * the thread count, so that every strip group shares out; strip groups: enough for 4 items a thread */
  size_t pgn = panels;
  for (size_t d = threads; d < panels; d += threads)
    if (panels % d == 0) {
      pgn = d;
      break;
    }
  const size_t sgn = EC_MIN(strips, EC_DIV_UP(4 * threads, ng * pgn));
  const size_t g = EC_DIV_UP(strips, sgn), p = panels / pgn;
  const size_t slice = f32_winograd_tmp_floats(s->M, s->C / s->G, s->KB, s->TB, s->MR);
  if (A2 * (p * s->NR * g * s->MR + F32_WINOGRAD_PAD) > slice) return 0;
  *sg = g, *pg = p;
  return 1;
}

EC_INLINE void f32_winograd_run(const f32_winograd_shape *s, const f32_winograd_args *a, ec_pool *pool) {
  const size_t planes = s->N * s->C, n = f32_winograd_items(s);
  memset(a->xp + planes * s->M * s->HP * s->Q, 0, F32_WINOGRAD_XP_PAD * sizeof(float));
  if (ec_pool_threads(pool) <= 1) {
    F32_WINOGRAD_MARK();
    for (size_t i = 0; i < planes; i++) f32_winograd_pack_plane(s, a, i);
    F32_WINOGRAD_LAP(0);
    for (size_t i = 0; i < n; i++) f32_winograd_item(s, a, 0, i);
    return;
  }
  const size_t T = s->TH * s->TW, threads = (size_t)ec_pool_threads(pool);
  /* 4 items a thread where U (streamed once per block) is small: with 2 a thread a block of slow strips
   * (edge tiles) left one thread finishing alone (SqueezeNet's 55x55 16->64 layers: 1.78x on two) */
  const size_t per = s->N * s->G * s->KSPLIT, strips = EC_DIV_UP(T, s->MR);
  size_t nb0 = EC_DIV_UP(T, s->TB);
  if (per * nb0 < 4 * threads && (s->M + 2) * (s->M + 2) * s->C * (s->K / s->G) * sizeof(float) <= (256u << 10))
    nb0 = EC_MIN(strips, EC_MAX(nb0, EC_DIV_UP(4 * threads, per)));
  const size_t nb = ec_even_blocks(strips, nb0, per, threads);
  f32_winograd_job j = {s, a, nb, 0, 0};
  (void)n;
  ec_parallel_for(pool, planes, EC_MAX(1, planes / (4 * threads)), f32_winograd_pack_task, &j);
  if (f32_winograd_phase_split(s, threads, &j.sg, &j.pg)) {
    const size_t strips = EC_DIV_UP(T, s->MR), ng = s->N * s->G;
    const size_t items = ng * EC_DIV_UP(strips, j.sg) * EC_DIV_UP(EC_DIV_UP(s->K / s->G, s->NR), j.pg);
    ec_parallel_for(pool, ng * strips, 1, f32_winograd_vin_task, &j);
    ec_parallel_for_tid(pool, items, 1, f32_winograd_gemm_task, &j);
    return;
  }
  ec_parallel_for_tid(pool, s->N * s->G * j.nblocks * s->KSPLIT, 1, f32_winograd_task, &j);
}

#endif
