/* q8_add_f32_pool (the residual Add split over a pool's 4 KB blocks) gives q8_add_f32's bytes: sizes below and
 * above the split, a partial last block, in place (y == a), serial (NULL pool) and on 2 threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_threadpool.h"
#include "q8-eltwise/q8-eltwise.h"

int main(void)
{
    static const size_t sizes[] = {1, 100, 65535, 65536, 3 * 65536 + 17, 802816};
    ec_pool pool;
    if (ec_pool_init(&pool, 2))
        return 2;
    const q8_addf_params p = {121, 130, 128, 0, 255, 0.0371f, 0.0123f, 0.0456f};
    int fails = 0, cases = 0;
    uint32_t rng = 99;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        const size_t n = sizes[s];
        uint8_t *a = malloc(n), *b = malloc(n), *y0 = malloc(n), *y1 = malloc(n), *y2 = malloc(n);
        for (size_t i = 0; i < n; i++) {
            rng = rng * 1664525u + 1013904223u;
            a[i] = (uint8_t)(rng >> 8), b[i] = (uint8_t)(rng >> 16);
        }
        q8_add_f32(n, a, b, &p, y0);
        q8_add_f32_pool(n, a, b, &p, y1, NULL);
        memcpy(y2, a, n);
        q8_add_f32_pool(n, y2, b, &p, y2, &pool); /* in place, threaded */
        fails += memcmp(y0, y1, n) != 0;
        fails += memcmp(y0, y2, n) != 0;
        cases += 2;
        free(a); free(b); free(y0); free(y1); free(y2);
    }
    ec_pool_destroy(&pool);
    printf("q8_add_f32_pool: %d/%d cases match\n", cases - fails, cases);
    return fails != 0;
}
