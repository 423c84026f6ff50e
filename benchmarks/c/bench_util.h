/* What the benchmark harnesses in this folder share: thread CPU time (a shared host's preemption does not
 * count) and deterministic test data. Included by path next to each harness ("bench_util.h"). */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* n floats in [-0.06, 0.06], the same every run; exits on allocation failure */
static inline float *fill(size_t n) {
  float *p = (float *)malloc((n ? n : 1) * sizeof(float));
  if (!p) {
    fprintf(stderr, "benchmark harness: out of memory (%zu floats)\n", n);
    exit(1);
  }
  for (size_t i = 0; i < n; i++) p[i] = (float)((i * 7) % 13) * 0.01f - 0.06f;
  return p;
}

#endif
