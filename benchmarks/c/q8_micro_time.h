/* Timing for the q8 GEMM microbenchmarks (q8_gemm_micro.c, q8_gemm_amx_micro.c): best of 7 repeats of reps calls. */
#ifndef Q8_MICRO_TIME_H
#define Q8_MICRO_TIME_H

#include <time.h>

#include "q8-gemm/q8-gemm.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double best_s(q8_gemm_fn f, size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                     size_t np, uint8_t *Y, const q8_rq *rq, int reps)
{
    double best = 1e9;
    for (int r = 0; r < 7; r++) {
        double t0 = now();
        for (int i = 0; i < reps; i++)
            f(M, N, K4, Wp, Xp, np, Y, N, rq);
        double t = (now() - t0) / reps;
        best = t < best ? t : best;
    }
    return best;
}

#endif
