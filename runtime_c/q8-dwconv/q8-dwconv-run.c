/* Channel-parallel driver for the q8 depthwise kernels (per-thread padding scratch). */
#include "q8-dwconv.h"

typedef struct {
    q8_dwconv_fn fn;
    const q8_dw_params *p;
    const uint8_t *x;
    uint8_t *y, *scratch;
} dw_job;

static void dw_slice(void *ctx, size_t tid, size_t begin, size_t end)
{
    const dw_job *j = (const dw_job *)ctx;
    const q8_dw_params *p = j->p;
    for (size_t pl = begin; pl < end;) { /* planes = batch x channel; a slice stays inside one batch */
        const size_t b = pl / (size_t)p->C, c0 = pl % (size_t)p->C;
        const size_t c1 = (b + 1) * (size_t)p->C < end ? (size_t)p->C : end - b * (size_t)p->C;
        q8_dw_params q = *p;
        q.batch = 1;
        q.C = (int)(c1 - c0);
        q.w = p->w + c0 * (size_t)p->kh * p->kw;
        q.bias = p->bias + c0;
        q.mult = p->mult + c0;
        q.shift = p->shift + c0;
        j->fn(&q, j->x + pl * p->H * p->W, j->y + pl * p->Ho * p->Wo, j->scratch + tid * q8_dwconv_scratch_bytes(p));
        pl += c1 - c0;
    }
}

void q8_dwconv_run(q8_dwconv_fn fn, const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch,
                   ec_pool *pool)
{
    dw_job j = {fn, p, x, y, scratch};
    ec_parallel_for_tid(pool, (size_t)p->batch * p->C, 4, dw_slice, &j);
}
