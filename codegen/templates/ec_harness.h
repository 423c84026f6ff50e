/* What the bench and tune harnesses share: a monotonic clock, a comparison for qsort, and JSON strings. */
#ifndef EC_HARNESS_H
#define EC_HARNESS_H
#include <stdio.h>
#include <time.h>

static inline double ec_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static inline int ec_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Names come from the model: quotes and control bytes are escaped so the JSON stays valid and on one line. */
static inline void ec_json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

#endif
