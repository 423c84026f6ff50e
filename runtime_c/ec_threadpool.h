/* Minimal pthread parallel-for. Threads are created by ec_pool_init; ec_parallel_for never
 * allocates. The caller thread takes part in the work (tid 0) and returns once every item is
 * done, whether or not the workers showed up (a descheduled worker never holds a layer up).
 * A NULL pool runs serially. At most 2^32 - 1 items per call.
 * Each thread starts on its own contiguous share of the chunks (thread t the t-th of `threads`
 * equal runs) and, when that is done, takes chunks from the back of the others' shares: a thread
 * works on neighbouring items (a 1x1 conv's block pairs of one pixel chunk read that chunk's input
 * into one core's L2, not both), claims from a cache line of its own, and the shares still even out
 * when one thread runs late. Jobs of fewer than 4 chunks a thread are claimed in turn from one share. */
#ifndef EC_THREADPOOL_H
#define EC_THREADPOOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#ifndef EC_MAX_THREADS
#define EC_MAX_THREADS 8 /* also the per-thread scratch slices kernels reserve */
#endif

typedef void (*ec_task_fn)(void *ctx, size_t begin, size_t end);
/* Same, plus the index (0..threads-1) of the running thread: for per-thread scratch slices. */
typedef void (*ec_task_tid_fn)(void *ctx, size_t tid, size_t begin, size_t end);

typedef struct ec_pool ec_pool;
typedef struct {
  ec_pool *p;
  size_t tid;
} ec_worker_arg;

#define EC_POOL_LINE 64 /* apart: what one thread writes in a job is not on a line another polls */

struct ec_pool {
  /* polled by idle workers */
  atomic_uint gen;             /* bumped once per job */
  atomic_int sleepers;
  atomic_int stop;
  char pad0[EC_POOL_LINE];
  /* current job, written before gen is bumped */
  atomic_size_t n, grain;
  atomic_int jthreads;         /* threads taking part (the caller's count when it published); negative: shared */
  _Atomic(ec_task_fn) fn;
  _Atomic(ec_task_tid_fn) fn_tid;
  _Atomic(void *) ctx;
  atomic_int threads; /* threads used by the next parallel_for (<= created) */
  int created;  /* including the caller */
  pthread_t tids[EC_MAX_THREADS];
  pthread_mutex_t mu;
  pthread_cond_t wake;
  ec_worker_arg args[EC_MAX_THREADS];
  char pad1[EC_POOL_LINE];
  /* per thread: (gen << 32) | (first << 16) | end of the chunks left of its share (claims die with their
   * job), and the items it finished in the current job */
  struct {
    atomic_uint_least64_t range;
    char pad[EC_POOL_LINE];
    atomic_size_t done;
    char pad2[EC_POOL_LINE];
  } slot[EC_MAX_THREADS];
};

/* Creates threads-1 workers (clamped to 1..EC_MAX_THREADS). Returns 0 on success. */
int ec_pool_init(ec_pool *p, int threads);
void ec_pool_destroy(ec_pool *p);
/* Run-time override, clamped to the threads created at init. */
void ec_pool_set_threads(ec_pool *p, int threads);
int ec_pool_threads(const ec_pool *p);
void ec_parallel_for(ec_pool *p, size_t n, size_t grain, ec_task_fn fn, void *ctx);
void ec_parallel_for_tid(ec_pool *p, size_t n, size_t grain, ec_task_tid_fn fn, void *ctx);

/* Even partitioning for drivers whose work items are (something, block of `units` columns/tiles):
 * `blocks` (at least enough that none exceeds the caller's maximum) raised, while the units allow,
 * until blocks * per (items per block index) is a multiple of the thread count. Cut with
 * ec_block_range, block sizes differ by at most one unit, so the threads' equal shares end
 * together instead of one thread finishing a tail block alone. */
static inline size_t ec_even_blocks(size_t units, size_t blocks, size_t per, size_t threads) {
  if (threads <= 1 || per == 0) return blocks;
  for (size_t b = blocks; b <= units && b <= 2 * blocks; b++)
    if (b * per % threads == 0) return b;
  return blocks;
}

static inline void ec_block_range(size_t units, size_t blocks, size_t i, size_t *u0, size_t *u1) {
  *u0 = units * i / blocks;
  *u1 = units * (i + 1) / blocks;
}

/* Finish time, in units, of `per` rounds of blocks 0..blocks-1 (ec_block_range sizes) claimed in
 * that order by `threads` threads, each taking the next item when it is free: what a job's tail
 * costs. A driver whose blocks cannot share out (11 column panels on two threads, 6 against 5)
 * compares this with units * per / threads and splits its items another way. */
static inline size_t ec_blocks_span(size_t units, size_t blocks, size_t per, size_t threads) {
  size_t free_at[EC_MAX_THREADS] = {0}, span = 0;
  if (threads > EC_MAX_THREADS) threads = EC_MAX_THREADS;
  if (threads < 1) threads = 1;
  for (size_t r = 0; r < per; r++)
    for (size_t i = 0; i < blocks; i++) {
      size_t t = 0;
      for (size_t u = 1; u < threads; u++)
        if (free_at[u] < free_at[t]) t = u;
      free_at[t] += units * (i + 1) / blocks - units * i / blocks;
      if (free_at[t] > span) span = free_at[t];
    }
  return span;
}

#endif
