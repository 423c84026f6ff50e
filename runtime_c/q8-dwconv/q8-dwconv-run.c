/* Channel-parallel driver for the q8 depthwise kernels (per-thread padding scratch), optionally with a
 * fused output table. */
#include "q8-dwconv.h"

typedef struct {
    q8_dwconv_fn fn;
    const q8_dw_params *p;
    const uint8_t *x;
    uint8_t *y, *scratch;
    const uint8_t *lut; /* NULL: no table */
    q8_dw_lut_fn lf;
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
        q.scale = p->scale ? p->scale + c0 : NULL;
        q.quad = p->quad ? p->quad + c0 * (size_t)p->kh * ((p->kw + 3) / 4) : NULL;
        q.zrow = p->zrow ? p->zrow + c0 * (size_t)p->kh : NULL;
        uint8_t *scr = j->scratch + tid * q8_dwconv_scratch_bytes(p);
        const size_t hwo = (size_t)p->Ho * p->Wo;
        if (!j->lut) {
            j->fn(&q, j->x + pl * p->H * p->W, j->y + pl * hwo, scr);
        } else { /* chunks of channels, the table over each while it is in L1 */
            /* whole groups of 16: the channel-lane kernel computes 16 channels at a time, so a chunk of fewer
             * costs a whole group (3-channel chunks of 12x96 maps, 14-channel ones of 3x96); past L1 the table
             * pass reads L2, little beside the conv */
            const size_t step = hwo >= Q8_DW_LUT_CHUNK / 16 ? 16 : Q8_DW_LUT_CHUNK / hwo / 16 * 16;
            for (size_t c = c0; c < c1; c += step) {
                const size_t n = c1 - c < step ? c1 - c : step;
                q8_dw_params r = q;
                r.C = (int)n;
                r.w = p->w + c * (size_t)p->kh * p->kw;
                r.bias = p->bias + c;
                r.mult = p->mult + c;
                r.shift = p->shift + c;
                r.scale = p->scale ? p->scale + c : NULL;
                r.quad = p->quad ? p->quad + c * (size_t)p->kh * ((p->kw + 3) / 4) : NULL;
                r.zrow = p->zrow ? p->zrow + c * (size_t)p->kh : NULL;
                uint8_t *yc = j->y + (pl + c - c0) * hwo;
                j->fn(&r, j->x + (pl + c - c0) * p->H * p->W, yc, scr);
                j->lf(n * hwo, yc, j->lut, yc);
            }
        }
        pl += c1 - c0;
    }
}

/* Work items of 16 planes: the pool calls dw_slice once per item, and the channel-lane kernel computes 16
 * channels at a time (items of 4 left it 4 lanes in 16: 2 threads ran 1.8x slower than one) */
#define DW_GRAIN 16

void q8_dwconv_run(q8_dwconv_fn fn, const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch,
                   ec_pool *pool)
{
    dw_job j = {fn, p, x, y, scratch, NULL, NULL};
    ec_parallel_for_tid(pool, (size_t)p->batch * p->C, DW_GRAIN, dw_slice, &j);
}

void q8_dwconv_run_lut(q8_dwconv_fn fn, const q8_dw_params *p, const uint8_t *lut, q8_dw_lut_fn lf,
                       const uint8_t *x, uint8_t *y, uint8_t *scratch, ec_pool *pool)
{
    dw_job j = {fn, p, x, y, scratch, lut, lf};
    ec_parallel_for_tid(pool, (size_t)p->batch * p->C, DW_GRAIN, dw_slice, &j);
}
