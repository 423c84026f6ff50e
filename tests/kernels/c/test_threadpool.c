/* ec_threadpool: every index covered exactly once, tids in range, repeated jobs, run-time
 * thread override; a threaded conv/GSPC/depthwise/stride-1 conv/GEMM run equals the serial one bit
 * for bit; the even block split of the drivers. */
#include <stdatomic.h>
#include "ec_threadpool.h"
#include "f32-conv/f32-conv.h"
#include "f32-dwconv/f32-dwconv.h"
#include "f32-gspc/f32-gspc.h"
#include "ref.h"

#ifndef BACK_TO_BACK_JOBS
#define BACK_TO_BACK_JOBS 300000
#endif

typedef struct {
  atomic_int hits[1000];
  atomic_int bad_tid;
  int threads;
} cover;

static void mark(void *ctx, size_t tid, size_t b, size_t e) {
  cover *c = (cover *)ctx;
  if ((int)tid >= c->threads) atomic_fetch_add(&c->bad_tid, 1);
  for (size_t i = b; i < e; i++) atomic_fetch_add(&c->hits[i], 1);
}

static int check_cover(ec_pool *p, size_t n, size_t grain) {
  static cover c;
  for (size_t i = 0; i < 1000; i++) atomic_store(&c.hits[i], 0);
  atomic_store(&c.bad_tid, 0);
  c.threads = ec_pool_threads(p);
  ec_parallel_for_tid(p, n, grain, mark, &c);
  for (size_t i = 0; i < n; i++)
    if (atomic_load(&c.hits[i]) != 1) return 1;
  return atomic_load(&c.bad_tid) != 0;
}

/* Many tiny jobs back to back, as a model's small layers come: a worker that is late for one job
 * must not claim a chunk of the next one before it is published (it would run twice). */
static int back_to_back(ec_pool *p, long jobs) {
  static cover c;
  c.threads = ec_pool_threads(p);
  for (long j = 0; j < jobs; j++) {
    const size_t n = (size_t)(j * 7) % 64 + 2, grain = 1 + (size_t)j % 2;
    for (size_t i = 0; i < n + 8; i++) atomic_store(&c.hits[i], 0);
    ec_parallel_for_tid(p, n, grain, mark, &c);
    for (size_t i = 0; i < n + 8; i++)
      if (atomic_load(&c.hits[i]) != (i < n)) return 1;
  }
  return atomic_load(&c.bad_tid) != 0;
}

static int conv_same(ec_pool *p) {
  const size_t C = 16, H = 13, K = 24, Ho = 13;
  float *x = falloc(C * H * H), *w = falloc(K * C * 9), *b = falloc(K);
  float *y1 = falloc(K * Ho * Ho), *y2 = falloc(K * Ho * Ho);
  float *s = falloc(EC_MAX_THREADS * C * 9 * 32);
  f32_conv_shape sh = {1, C, H, H, K, Ho, Ho, 1, 3, 3, 1, 1, 1, 1, 1, 1, 4, 4, 64, 32, 2,
                       f32_gemm_ukernel_4x4__scalar, 0, NULL};
  f32_conv_args a = {x, y1, w, b, NULL, 1, {EC_ACT_RELU, 0, 0}, s, C * 9 * 32};
  f32_conv_run(&sh, &a, NULL);
  a.y = y2;
  f32_conv_run(&sh, &a, p);
  int bad = memcmp(y1, y2, K * Ho * Ho * sizeof(float)) != 0;
  /* GSPC g=4 and depthwise through the pool too */
  f32_gspc_shape gs = {1, C, H, H, C, Ho, Ho, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, 4, 5, H + 2, H + 2, 1,
                       f32_gspc_row__scalar, NULL};
  float *xp = falloc(f32_gspc_scratch_bytes(&gs) / sizeof(float) + C * 64); /* + depthwise slack */
  f32_gspc_args ga = {x, y1, w, b, NULL, 1, {EC_ACT_NONE, 0, 0}, xp};
  f32_gspc_run(&gs, &ga, NULL);
  ga.y = y2;
  f32_gspc_run(&gs, &ga, p);
  bad |= memcmp(y1, y2, C * Ho * Ho * sizeof(float)) != 0;
  /* g=3 on the 3 threads: whole groups a thread, each packing its own input (f32_gspc_run's group split) */
  const f32_gspc_shape g3 = {1, 12, H, H, 12, Ho, Ho, 3, 3, 3, 1, 1, 1, 1, 1, 1, 4, 4, 5, H + 2, H + 2, 1,
                             f32_gspc_row__scalar, NULL};
  ga.y = y1;
  f32_gspc_run(&g3, &ga, NULL);
  ga.y = y2;
  f32_gspc_run(&g3, &ga, p);
  bad |= memcmp(y1, y2, 12 * Ho * Ho * sizeof(float)) != 0;
  f32_dwconv_shape ds = {1, C, H, H, Ho, Ho, 3, 3, 1, 1, 1, 1, 1, 1, H + 2, H + 2, 2,
                         f32_dwconv_kxk__scalar};
  f32_dwconv_args da = {x, y1, w, b, NULL, 1, {EC_ACT_NONE, 0, 0}, xp};
  f32_dwconv_run(&ds, &da, NULL);
  da.y = y2;
  f32_dwconv_run(&ds, &da, p);
  bad |= memcmp(y1, y2, C * Ho * Ho * sizeof(float)) != 0;
  free(x), free(w), free(b), free(y1), free(y2), free(s), free(xp);
  return bad;
}

/* ec_even_blocks / ec_block_range: contiguous non-empty blocks no larger than the caller's
 * maximum, and a block count that divides the items among the threads whenever one exists. */
static int blocks_ok(void) {
  for (size_t units = 1; units <= 60; units++)
    for (size_t blocks = 1; blocks <= units; blocks++)
      for (size_t per = 1; per <= 5; per++)
        for (size_t threads = 1; threads <= 4; threads++) {
          const size_t b = ec_even_blocks(units, blocks, per, threads), cap = EC_DIV_UP(units, blocks);
          if (b < blocks || b > units) return 1;
          if (threads > 1 && b * per % threads != 0) /* only when no count in reach would do */
            for (size_t t = blocks; t <= units && t <= 2 * blocks; t++)
              if (t * per % threads == 0) return 1;
          size_t end = 0;
          for (size_t i = 0; i < b; i++) {
            size_t u0, u1;
            ec_block_range(units, b, i, &u0, &u1);
            if (u0 != end || u1 <= u0 || u1 - u0 > cap) return 1;
            end = u1;
          }
          if (end != units) return 1;
        }
  return 0;
}

/* Stride-1 indirect conv and a tall, narrow GEMM (row chunks added at run time): threaded runs
 * equal the serial one bit for bit, at every thread count. */
static int s1_gemm_same(ec_pool *p) {
  enum { C = 5, H = 11, K = 7, HP = H + 2, NC = 32 };
  const size_t Kg = C * 9, Mp = 8;
  int32_t koff[C * 9];
  for (size_t c = 0; c < C; c++)
    for (size_t kh = 0; kh < 3; kh++)
      for (size_t kw = 0; kw < 3; kw++) koff[(c * 3 + kh) * 3 + kw] = (int32_t)(c * HP * HP + kh * HP + kw);
  float *x = falloc(C * H * H), *w = falloc(Mp * Kg), *b = falloc(K), *y1 = falloc(K * H * H), *y2 = falloc(K * H * H);
  float *xpad = falloc(f32_conv_s1_pad_floats(1, C, HP, HP, 4)), *tmp = falloc(EC_MAX_THREADS * Mp * NC);
  f32_conv_s1_shape sh = {1, C, H, H, K, H, H, 1, 3, 3, 1, 1, 1, 1, HP, HP, 4, 4, 64, NC, 1, 0,
                          f32_igemm_ukernel_4x4__scalar};
  f32_conv_s1_args a = {x, y1, w, koff, NULL, b, NULL, 1, {EC_ACT_RELU, 0, 0}, xpad, tmp, Mp * NC};
  f32_conv_s1_run(&sh, &a, NULL);
  int bad = 0;
  for (int t = 2; t <= 3; t++) {
    ec_pool_set_threads(p, t);
    memset(y2, 0, K * H * H * sizeof(float));
    a.y = y2;
    f32_conv_s1_run(&sh, &a, p);
    a.y = y1;
    bad |= memcmp(y1, y2, K * H * H * sizeof(float)) != 0;
  }
  enum { M = 37, N = 19, KK = 23 };
  float *ga = falloc(M * KK), *gb = falloc(KK * N), *c1 = falloc(M * N), *c2 = falloc(M * N);
  float *gs = falloc(EC_ROUND_UP(M, 4) * KK + EC_ROUND_UP(N, 4) * KK);
  const f32_gemm_shape gsh = {M, N, KK, 4, 4, 8, 1, 1, 1, 0, 0, KK, 1, N, 1, 8, f32_gemm_ukernel_4x4__scalar};
  f32_gemm_args gargs = {ga, gb, c1, NULL, NULL, {NULL, NULL, NULL, 1, {EC_ACT_NONE, 0, 0}}, gs};
  f32_gemm_run(&gsh, &gargs, NULL);
  for (int t = 2; t <= 3; t++) {
    ec_pool_set_threads(p, t);
    memset(c2, 0, M * N * sizeof(float));
    gargs.c = c2;
    f32_gemm_run(&gsh, &gargs, p);
    bad |= memcmp(c1, c2, M * N * sizeof(float)) != 0;
  }
  free(x), free(w), free(b), free(y1), free(y2), free(xpad), free(tmp);
  free(ga), free(gb), free(c1), free(c2), free(gs);
  return bad;
}

int main(void) {
  ec_pool p;
  int fails = 0;
  if (ec_pool_init(&p, 3)) return 2;
  for (int rep = 0; rep < 200; rep++) fails += check_cover(&p, (size_t)(rep * 7) % 1000, 1 + rep % 5);
  fails += back_to_back(&p, BACK_TO_BACK_JOBS);
  ec_pool_set_threads(&p, 2);
  fails += check_cover(&p, 999, 3);
  ec_pool_set_threads(&p, 3);
  fails += conv_same(&p);
  fails += blocks_ok();
  fails += s1_gemm_same(&p);
  fails += check_cover(NULL, 10, 4);
  ec_pool_destroy(&p);
  printf("threadpool %s\n", fails ? "FAIL" : "ok");
  return fails != 0;
}
