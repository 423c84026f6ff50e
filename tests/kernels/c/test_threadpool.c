/* ec_threadpool: every index covered exactly once, tids in range, repeated jobs, run-time
 * thread override; a threaded conv/GSPC/depthwise run equals the serial one bit for bit. */
#include <stdatomic.h>
#include "ec_threadpool.h"
#include "f32-conv/f32-conv.h"
#include "f32-dwconv/f32-dwconv.h"
#include "f32-gspc/f32-gspc.h"
#include "ref.h"

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

static int conv_same(ec_pool *p) {
  const size_t C = 16, H = 13, K = 24, Ho = 13;
  float *x = falloc(C * H * H), *w = falloc(K * C * 9), *b = falloc(K);
  float *y1 = falloc(K * Ho * Ho), *y2 = falloc(K * Ho * Ho);
  float *s = falloc(EC_MAX_THREADS * C * 9 * 32);
  f32_conv_shape sh = {1, C, H, H, K, Ho, Ho, 1, 3, 3, 1, 1, 1, 1, 1, 1, 4, 4, 64, 32, 2,
                       f32_gemm_ukernel_4x4__scalar};
  f32_conv_args a = {x, y1, w, b, NULL, 1, {EC_ACT_RELU, 0, 0}, s, C * 9 * 32};
  f32_conv_run(&sh, &a, NULL);
  a.y = y2;
  f32_conv_run(&sh, &a, p);
  int bad = memcmp(y1, y2, K * Ho * Ho * sizeof(float)) != 0;
  /* GSPC g=4 and depthwise through the pool too */
  f32_gspc_shape gs = {1, C, H, H, C, Ho, Ho, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, 4, 5, H + 2, H + 2, 1,
                       f32_gspc_row__scalar};
  float *xp = falloc(f32_gspc_scratch_bytes(&gs) / sizeof(float) + C * 64); /* + depthwise slack */
  f32_gspc_args ga = {x, y1, w, b, NULL, 1, {EC_ACT_NONE, 0, 0}, xp};
  f32_gspc_run(&gs, &ga, NULL);
  ga.y = y2;
  f32_gspc_run(&gs, &ga, p);
  bad |= memcmp(y1, y2, C * Ho * Ho * sizeof(float)) != 0;
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

int main(void) {
  ec_pool p;
  int fails = 0;
  if (ec_pool_init(&p, 3)) return 2;
  for (int rep = 0; rep < 200; rep++) fails += check_cover(&p, (size_t)(rep * 7) % 1000, 1 + rep % 5);
  ec_pool_set_threads(&p, 2);
  fails += check_cover(&p, 999, 3);
  ec_pool_set_threads(&p, 3);
  fails += conv_same(&p);
  fails += check_cover(NULL, 10, 4);
  ec_pool_destroy(&p);
  printf("threadpool %s\n", fails ? "FAIL" : "ok");
  return fails != 0;
}
