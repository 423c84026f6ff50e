/* see q8-conv1x1-add.h */
#include "q8-conv1x1-add.h"

typedef struct {
    q8_gemm_add_fn gemm;
    size_t M, N, K4, np;
    const int8_t *wp;
    const uint8_t *xp, *r;
    uint8_t *y;
    const q8_rq *rq;
    const q8_add_params *ap;
} add_job;

#define Q8_ADD_CHUNK 32 /* pixels per parallel item, as q8_conv splits its GEMM */

static void add_chunk(void *ctx, size_t begin, size_t end)
{
    const add_job *j = (const add_job *)ctx;
    const size_t n0 = begin * Q8_ADD_CHUNK, n1 = end * Q8_ADD_CHUNK < j->N ? end * Q8_ADD_CHUNK : j->N;
    j->gemm(j->M, n1 - n0, j->K4, j->wp, j->xp + n0 * 4, j->np, j->y + n0, j->N, j->rq, j->r + n0, j->ap);
}

void q8_conv1x1_add(const q8_conv_params *p, q8_gemm_add_fn gemm, const uint8_t *x, const uint8_t *r,
                    const q8_add_params *ap, uint8_t *y, uint8_t *scratch, ec_pool *pool)
{
    const size_t K = (size_t)p->s.C, N = (size_t)p->s.H * p->s.W, out = (size_t)p->ocg * N;
    const q8_rq rq = {p->bias, p->mult, p->shift, p->zp, p->qmin, p->qmax, NULL};
    for (int b = 0; b < p->batch; b++) {
        q8_pack_x(K, N, x + (size_t)b * K * N, N, p->flip, scratch);
        add_job j = {gemm, (size_t)p->ocg, N, (K + 3) / 4, q8_pack_np(N), p->wp, scratch, r + (size_t)b * out,
                     y + (size_t)b * out, &rq, ap};
        ec_parallel_for(pool, (N + Q8_ADD_CHUNK - 1) / Q8_ADD_CHUNK, 1, add_chunk, &j);
    }
}
