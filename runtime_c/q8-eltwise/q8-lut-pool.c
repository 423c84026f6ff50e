/* A u8 -> u8 table over a pool's threads, in 4 KB blocks: the table fused into a conv whose driver applies none
 * itself (GSPC, sparse, matrix-vector), run right after it instead of as a layer of its own. */
#include "q8-eltwise.h"
#include "../ec_threadpool.h"

#define LUT_BLOCK 4096

typedef struct {
    size_t n;
    const uint8_t *x, *lut;
    uint8_t *y;
    void (*fn)(size_t, const uint8_t *, const uint8_t *, uint8_t *);
} lut_job;

static void lut_task(void *ctx, size_t begin, size_t end)
{
    const lut_job *j = (const lut_job *)ctx;
    const size_t i0 = begin * LUT_BLOCK, i1 = end * LUT_BLOCK < j->n ? end * LUT_BLOCK : j->n;
    j->fn(i1 - i0, j->x + i0, j->lut, j->y + i0);
}

void q8_lut_pool(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y,
                 void (*fn)(size_t, const uint8_t *, const uint8_t *, uint8_t *), ec_pool *pool)
{
    if (ec_pool_threads(pool) <= 1 || n < 16 * LUT_BLOCK) {
        fn(n, x, lut, y);
        return;
    }
    lut_job j = {n, x, lut, y, fn};
    ec_parallel_for(pool, (n + LUT_BLOCK - 1) / LUT_BLOCK, 1, lut_task, &j);
}
