/* What a host charges one thread for writing cache lines another core has touched (bench_threads.py --probe).
 * Thread 0 (CPU 0) writes a BYTES buffer after: it wrote it itself last; the other thread (CPU 1) read it (the
 * lines shared by both cores, as a layer's input is after a 1x1 conv split by output channels read all of it on
 * both threads); the other thread wrote it. Also the time to read it after the other thread wrote it. Prints one
 * "name us" line each, best of REPS. A host where "after_read" is several times "own" makes a layer that
 * overwrites such lines slower on two threads than on one (docs/benchmarks.md, pass T). Linux only (affinity). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef BYTES
#define BYTES 212992 /* 272 channels of 14x14 fp32, ShuffleNet's stage-3 maps */
#endif
#ifndef REPS
#define REPS 200
#endif
#define N (BYTES / 4)

static float *buf;
static atomic_int turn; /* 0: thread 0 runs; 1: the other thread reads; 2: it writes; -1: stop */
static volatile float sink;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void read_all(void) /* one load a cache line */
{
    float acc = 0.0f;
    for (size_t i = 0; i < N; i += 16) acc += buf[i];
    sink = acc;
}

static void write_all(float v)
{
    for (size_t i = 0; i < N; i++) buf[i] = v;
}

static void *other(void *arg)
{
    (void)arg;
    if (pin(1)) return NULL;
    for (;;) {
        int t;
        while ((t = atomic_load(&turn)) == 0) {
        }
        if (t < 0) return NULL;
        if (t == 1)
            read_all();
        else
            write_all(2.0f);
        atomic_store(&turn, 0);
    }
}

/* mode: 0 own lines, 1 after the other core read them, 2 after it wrote them; 3 a read after it wrote them */
static double run(int mode)
{
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        write_all((float)r);
        read_all();
        if (mode) {
            atomic_store(&turn, mode == 1 ? 1 : 2);
            while (atomic_load(&turn) != 0) {
            }
        }
        const double t0 = now_us();
        if (mode == 3)
            read_all();
        else
            write_all((float)r + 1.0f);
        const double d = now_us() - t0;
        best = d < best ? d : best;
    }
    return best;
}

int main(void)
{
    buf = aligned_alloc(64, (size_t)N * 4);
    if (!buf || pin(0)) {
        fprintf(stderr, "host_shared_writes: needs 2 CPUs to pin to\n");
        return 2;
    }
    write_all(1.0f);
    pthread_t t;
    if (pthread_create(&t, NULL, other, NULL)) return 2;
    static const char *names[] = {"write_own", "write_after_read", "write_after_write", "read_after_write"};
    for (int m = 0; m < 4; m++) printf("%s %.2f\n", names[m], run(m));
    atomic_store(&turn, -1);
    pthread_join(t, NULL);
    free(buf);
    return 0;
}
