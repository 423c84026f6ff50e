/* q8_add_f32 over a pool's threads, in 4 KB blocks: the residual Add pass after a conv whose driver runs on the
 * pool (on one thread it was as long as the AMX 1x1 conv before it, and stayed so at two threads). */
#include "q8-eltwise.h"
#include "../ec_threadpool.h"

#define ADD_BLOCK 4096

typedef struct {
    size_t n;
    const uint8_t *a, *b;
    const q8_addf_params *p;
    uint8_t *y;
} add_job;

static void add_task(void *ctx, size_t begin, size_t end)
{
    const add_job *j = (const add_job *)ctx;
    const size_t i0 = begin * ADD_BLOCK, i1 = end * ADD_BLOCK < j->n ? end * ADD_BLOCK : j->n;
    q8_add_f32(i1 - i0, j->a + i0, j->b + i0, j->p, j->y + i0);
}

void q8_add_f32_pool(size_t n, const uint8_t *a, const uint8_t *b, const q8_addf_params *p, uint8_t *y, ec_pool *pool)
{
    if (ec_pool_threads(pool) <= 1 || n < 16 * ADD_BLOCK) {
        q8_add_f32(n, a, b, p, y);
        return;
    }
    const q8_addf_params lp = *p; /* y may alias *p */
    add_job j = {n, a, b, &lp, y};
    ec_parallel_for(pool, (n + ADD_BLOCK - 1) / ADD_BLOCK, 1, add_task, &j);
}
