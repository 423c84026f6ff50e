#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "ec_threadpool.h"

#include <sched.h>

#ifdef EC_POOL_STATS
/* Diagnostic build (-DEC_POOL_STATS): the CPU time of every chunk; per job, the time the chunks
 * would take on the pool's threads handing them out as claim() does with nothing else running (each
 * chunk to the first free thread). ec_pool_destroy prints the sums over jobs of the chunks' time and of
 * that span: their ratio is the speedup the partitioning allows on a quiet machine, measured on a
 * busy one (thread CPU time does not count while a thread is descheduled). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define EC_STATS_CHUNKS 4096
static double ec_stats_busy, ec_stats_span, ec_stats_serial;
static unsigned long ec_stats_jobs;
static double ec_stats_chunk[EC_STATS_CHUNKS]; /* chunks past these (huge jobs) are left out */
/* Per job in call order, with the calls a pool of several threads ran serially (too few items):
 * EC_POOL_STATS_RUNS=R in the environment folds the jobs of R identical inferences into one and
 * prints each with its task's address relative to ec_pool_init (to be named with nm). */
#define EC_STATS_JOBS 65536
static struct { uintptr_t fn; size_t n; double busy, span; } ec_stats_job[EC_STATS_JOBS];
static unsigned long ec_stats_recs; /* parallel jobs and serial calls (span = their time) */
static void ec_stats_record(uintptr_t fn, size_t n, double busy, double span) {
  if (ec_stats_recs < EC_STATS_JOBS) {
    ec_stats_job[ec_stats_recs].fn = fn, ec_stats_job[ec_stats_recs].n = n;
    ec_stats_job[ec_stats_recs].busy = busy, ec_stats_job[ec_stats_recs].span = span;
  }
  ec_stats_recs++;
}
static uint64_t ec_thread_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
/* What one reading of the thread clock adds to a chunk's time, taken off each chunk: the clock is a
 * system call (0.3-0.9 us on the 2-vCPU Zen 3 VM), and ShuffleNet's ~1000 chunks an inference made
 * its pooled work look 10-20% slower than its 1-thread run. */
static double ec_stats_clock_ms;
static double ec_stats_chunk_ms(uint64_t t0) {
  const double ms = (double)(ec_thread_ns() - t0) * 1e-6 - ec_stats_clock_ms;
  return ms > 0 ? ms : 0;
}
static void ec_stats_clock_init(void) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 64; i++) {
    const uint64_t t0 = ec_thread_ns(), t1 = ec_thread_ns();
    if (t1 - t0 < best) best = t1 - t0;
  }
  ec_stats_clock_ms = (double)best * 1e-6;
}
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define EC_PAUSE() _mm_pause()
#elif defined(__aarch64__) || defined(__arm__)
#define EC_PAUSE() __asm__ __volatile__("yield")
#else
#define EC_PAUSE() ((void)0)
#endif

/* Spin this many polls before sleeping: layer calls come back-to-back, a futex wake-up per
 * layer would cost more than small layers themselves. */
#define EC_SPIN 20000
/* The caller, done with its share, polls this often before yielding its core on each poll: a
 * worker still in a chunk may have been descheduled (more runnable threads than cores), and the
 * caller's spinning would keep it off the core it is waiting for. */
#define EC_WAIT_SPIN 2000

#define EC_RANGE_MAX 0xffffu /* chunks per job: indexes are 16 bits of a share's word */

static uint64_t ec_range(unsigned g, size_t b, size_t e) {
  return ((uint64_t)g << 32) | ((uint64_t)b << 16) | (uint64_t)e;
}

/* The next chunk of job `g` for thread `tid` of `threads`: the front of its own share, else the back
 * of another's (shared: every thread from the front of thread 0's, which holds them all). 1 with its
 * index in *c, 0 when none is left. A share's word holds its job: a claim made with a word read in an
 * earlier job fails its CAS. */
static int claim(ec_pool *p, unsigned g, size_t tid, size_t threads, int shared, size_t *c) {
  if (shared) tid = 0, threads = 1;
  for (size_t k = 0; k < threads; k++) {
    atomic_uint_least64_t *r = &p->slot[(tid + k) % threads].range;
    uint64_t w = atomic_load_explicit(r, memory_order_acquire);
    for (;;) {
      const size_t b = (size_t)(w >> 16) & EC_RANGE_MAX, e = (size_t)w & EC_RANGE_MAX;
      if ((unsigned)(w >> 32) != g) return 0; /* the job is over */
      if (b >= e) break;
      /* own share from the front, the others' from the back: the owner's run stays contiguous */
      const uint64_t next = k == 0 ? w + ((uint64_t)1 << 16) : w - 1;
      if (atomic_compare_exchange_weak_explicit(r, &w, next, memory_order_acq_rel, memory_order_acquire)) {
        *c = k == 0 ? b : e - 1;
        return 1;
      }
    }
  }
  return 0;
}

/* Runs chunks of job `g` until none is left. The job's fields are read with acquire: if one of them
 * already holds the next job's value, the shares' words of that job are visible too, so a claim
 * against job `g` fails instead of running a chunk of the next job with this job's bounds. */
static void run_chunks(ec_pool *p, unsigned g, size_t tid) {
  if ((unsigned)(atomic_load_explicit(&p->slot[tid].range, memory_order_acquire) >> 32) != g) return;
  const size_t n = atomic_load_explicit(&p->n, memory_order_acquire);
  const size_t grain = atomic_load_explicit(&p->grain, memory_order_acquire);
  const int jt = atomic_load_explicit(&p->jthreads, memory_order_acquire);
  const size_t threads = (size_t)(jt < 0 ? -jt : jt);
  const ec_task_fn fn = atomic_load_explicit(&p->fn, memory_order_acquire);
  const ec_task_tid_fn fn_tid = atomic_load_explicit(&p->fn_tid, memory_order_acquire);
  void *ctx = atomic_load_explicit(&p->ctx, memory_order_acquire);
  if (tid >= threads) return;
  size_t c;
  while (claim(p, g, tid, threads, jt < 0, &c)) {
    const size_t b = c * grain, e = b + grain < n ? b + grain : n;
#ifdef EC_POOL_STATS
    const uint64_t t0 = ec_thread_ns();
#endif
    if (fn_tid)
      fn_tid(ctx, tid, b, e);
    else
      fn(ctx, b, e);
#ifdef EC_POOL_STATS
    if (c < EC_STATS_CHUNKS) ec_stats_chunk[c] = ec_stats_chunk_ms(t0);
#endif
    atomic_fetch_add_explicit(&p->slot[tid].done, e - b, memory_order_release);
  }
}

static void *worker(void *arg) {
  ec_worker_arg *wa = (ec_worker_arg *)arg;
  ec_pool *p = wa->p;
  unsigned seen = 0; /* gen is 0 until the first job, which may be published before we get here */
  for (;;) {
    unsigned g;
    int spins = 0;
    while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
           !atomic_load(&p->stop)) {
      if (++spins < EC_SPIN) {
        EC_PAUSE();
        continue;
      }
      pthread_mutex_lock(&p->mu);
      atomic_fetch_add(&p->sleepers, 1);
      while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->wake, &p->mu);
      atomic_fetch_sub(&p->sleepers, 1);
      pthread_mutex_unlock(&p->mu);
    }
    if (atomic_load(&p->stop)) return NULL;
    seen = g;
    run_chunks(p, g, wa->tid);
  }
}

int ec_pool_init(ec_pool *p, int threads) {
  if (threads < 1) threads = 1;
  if (threads > EC_MAX_THREADS) threads = EC_MAX_THREADS;
  p->created = 1;
  atomic_init(&p->threads, 1);
  atomic_init(&p->gen, 0);
  atomic_init(&p->sleepers, 0);
  for (int t = 0; t < EC_MAX_THREADS; t++) {
    atomic_init(&p->slot[t].range, 0);
    atomic_init(&p->slot[t].done, 0);
  }
  atomic_init(&p->stop, 0);
  atomic_init(&p->n, 0);
  atomic_init(&p->grain, 1);
  atomic_init(&p->jthreads, 1);
  atomic_init(&p->fn, NULL);
  atomic_init(&p->fn_tid, NULL);
  atomic_init(&p->ctx, NULL);
  if (pthread_mutex_init(&p->mu, NULL) || pthread_cond_init(&p->wake, NULL)) return -1;
#ifdef EC_POOL_STATS
  ec_stats_clock_init();
#endif
  for (int t = 1; t < threads; t++) {
    p->args[t].p = p;
    p->args[t].tid = (size_t)t;
    if (pthread_create(&p->tids[t], NULL, worker, &p->args[t])) return -1;
    p->created = t + 1;
    atomic_store(&p->threads, t + 1);
  }
  return 0;
}

void ec_pool_destroy(ec_pool *p) {
  if (!p) return;
#ifdef EC_POOL_STATS
  fprintf(stderr, "ec_pool stats: %lu parallel jobs, chunks %.3f ms, span on %d threads %.3f ms, serial calls %.3f ms"
          " (less %.2f us of clock reading each)\n",
          ec_stats_jobs, ec_stats_busy, atomic_load(&p->threads), ec_stats_span, ec_stats_serial, ec_stats_clock_ms * 1e3);
  {
    const char *r = getenv("EC_POOL_STATS_RUNS");
    const unsigned long runs = r ? strtoul(r, NULL, 10) : 0;
    if (runs && ec_stats_recs % runs == 0 && ec_stats_recs <= EC_STATS_JOBS) {
      const unsigned long per = ec_stats_recs / runs;
      for (unsigned long j = 0; j < per; j++) {
        double busy = 0, span = 0;
        for (unsigned long k = j; k < ec_stats_recs; k += per) busy += ec_stats_job[k].busy, span += ec_stats_job[k].span;
        fprintf(stderr, "ec_pool job %lu fn %+td n %zu chunks %.4f ms span %.4f ms\n", j,
                (ptrdiff_t)(ec_stats_job[j].fn - (uintptr_t)ec_pool_init), ec_stats_job[j].n, busy / (double)runs,
                span / (double)runs);
      }
    }
  }
#endif
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->stop, 1);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int t = 1; t < p->created; t++) pthread_join(p->tids[t], NULL);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->mu);
  p->created = 1;
  atomic_store(&p->threads, 1);
}

void ec_pool_set_threads(ec_pool *p, int threads) {
  if (!p) return;
  if (threads < 1) threads = 1;
  atomic_store(&p->threads, threads < p->created ? threads : p->created);
}

int ec_pool_threads(const ec_pool *p) { return p ? atomic_load(&((ec_pool *)p)->threads) : 1; }

static void run_job(ec_pool *p, size_t n, size_t grain, ec_task_fn fn, ec_task_tid_fn fn_tid,
                    void *ctx) {
  if (grain == 0) grain = 1;
  if (!p || atomic_load(&p->threads) <= 1 || n <= grain) {
#ifdef EC_POOL_STATS
    const uint64_t t0 = ec_thread_ns();
#endif
    if (fn_tid)
      fn_tid(ctx, 0, 0, n);
    else if (n)
      fn(ctx, 0, n);
#ifdef EC_POOL_STATS
    const double ms = ec_stats_chunk_ms(t0);
    ec_stats_serial += ms;
    if (p && atomic_load(&p->threads) > 1) ec_stats_record(fn_tid ? (uintptr_t)fn_tid : (uintptr_t)fn, n, ms, ms);
#endif
    return;
  }
  const unsigned g = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
  const int th = atomic_load(&p->threads);
  size_t chunks = (n + grain - 1) / grain;
  if (chunks > EC_RANGE_MAX) { /* coarser chunks: their indexes must fit a share's word */
    grain = (n + EC_RANGE_MAX - 1) / EC_RANGE_MAX;
    chunks = (n + grain - 1) / grain;
  }
  /* Every chunk of the last job was claimed and finished (its shares are empty): a worker still
   * holding the last job's number claims nothing, whatever fields it reads. */
  atomic_store_explicit(&p->n, n, memory_order_release);
  atomic_store_explicit(&p->grain, grain, memory_order_release);
  /* Few chunks a thread: claimed in turn from one counter. Contiguous shares would keep unequal
   * neighbours together (the Winograd phase split's 6 GEMM items, the last two on a short strip group:
   * 54 against 44 tiles), and so few chunks share little input anyway. */
  const int shared = chunks < 4 * (size_t)th;
  atomic_store_explicit(&p->jthreads, shared ? -th : th, memory_order_release);
  atomic_store_explicit(&p->fn, fn, memory_order_release);
  atomic_store_explicit(&p->fn_tid, fn_tid, memory_order_release);
  atomic_store_explicit(&p->ctx, ctx, memory_order_release);
  for (int t = 0; t < th; t++) {
    const size_t b = shared ? 0 : chunks * (size_t)t / (size_t)th;
    const size_t e = shared ? (t ? 0 : chunks) : chunks * (size_t)(t + 1) / (size_t)th;
    atomic_store_explicit(&p->slot[t].done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->slot[t].range, ec_range(g, b, e), memory_order_release);
  }
  atomic_store(&p->gen, g);
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
  }
  run_chunks(p, g, 0);
  for (int spins = 0;;) {
    size_t done = 0;
    for (int t = 0; t < th; t++) done += atomic_load_explicit(&p->slot[t].done, memory_order_acquire);
    if (done >= n) break;
    if (++spins < EC_WAIT_SPIN)
      EC_PAUSE();
    else
      sched_yield();
  }
#ifdef EC_POOL_STATS
  {
    /* the chunks on `th` threads as claim() hands them out: own share from the front, then the others'
     * from the back, each chunk to the thread free first */
    double free_at[EC_MAX_THREADS] = {0}, sum = 0, span = 0;
    size_t lo[EC_MAX_THREADS], hi[EC_MAX_THREADS];
    const size_t nc = chunks < EC_STATS_CHUNKS ? chunks : EC_STATS_CHUNKS;
    for (int t = 0; t < th; t++)
      lo[t] = shared ? 0 : nc * (size_t)t / (size_t)th, hi[t] = shared ? (t ? 0 : nc) : nc * (size_t)(t + 1) / (size_t)th;
    for (size_t left = nc; left > 0; left--) {
      int t = 0;
      for (int u = 1; u < th; u++)
        if (free_at[u] < free_at[t]) t = u;
      size_t c = 0;
      for (int k = 0; k < th; k++) {
        const int v = shared ? 0 : (t + k) % th;
        if (lo[v] < hi[v]) {
          c = k == 0 || shared ? lo[v]++ : --hi[v];
          break;
        }
      }
      free_at[t] += ec_stats_chunk[c];
      sum += ec_stats_chunk[c];
    }
    for (int u = 0; u < th; u++) span = free_at[u] > span ? free_at[u] : span;
    ec_stats_record(fn_tid ? (uintptr_t)fn_tid : (uintptr_t)fn, n, sum, span);
    ec_stats_busy += sum, ec_stats_span += span, ec_stats_jobs++;
  }
#endif
}

void ec_parallel_for(ec_pool *p, size_t n, size_t grain, ec_task_fn fn, void *ctx) {
  run_job(p, n, grain, fn, NULL, ctx);
}

void ec_parallel_for_tid(ec_pool *p, size_t n, size_t grain, ec_task_tid_fn fn, void *ctx) {
  run_job(p, n, grain, NULL, fn, ctx);
}
