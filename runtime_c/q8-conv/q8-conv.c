/* Int8 conv / MatMul drivers over the q8 GEMM microkernels (see q8-conv.h). */
#include <string.h>

#include "q8-conv.h"

static int is_pointwise(const q8_conv_shape *s)
{
    return s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 && s->pt == 0 && s->pl == 0 &&
           s->Ho == s->H && s->Wo == s->W;
}

typedef struct {
    q8_gemm_fn gemm;
    size_t M, N, K4, np, y_stride;
    const int8_t *wp;
    const uint8_t *xp;
    uint8_t *y;
    const q8_rq *rq;
    size_t ypx; /* bytes from one output pixel to the next: 1, or 4 in the blocked layout */
    const uint8_t *lut; /* q8_conv_params.lut, or NULL */
    q8_conv_lut_fn lut_fn;
} gemm_job;

/* y = lut[y] over pixels [n0, n1) of output rows [0, rows) (row m at m ys; px = 1, or 4 in the blocked layout, where
 * a row of y holds 4 channels) */
static void apply_lut(const uint8_t *lut, q8_conv_lut_fn fn, uint8_t *y, size_t rows, size_t ys, size_t px, size_t n0,
                      size_t n1)
{
    if (!lut)
        return;
    for (size_t m = 0; m < rows; m += px) {
        uint8_t *r = y + m * ys + n0 * px;
        fn((n1 - n0) * px, r, lut, r);
    }
}

#define Q8_CHUNK 32 /* pixels per parallel item: a multiple of every kernel's pixel tile */

/* Chunks a claim takes: about 8 claims a thread, at least 1. Each claim is one GEMM call, whose setup (the AMX
 * kernel's tile configuration and release, ~0.3 us) cost a 256 x 3136 x 64 GEMM 13-17% in 32-pixel calls. */
static size_t gemm_grain(size_t chunks, ec_pool *pool)
{
    const size_t g = chunks / (8 * (size_t)ec_pool_threads(pool));
    return g ? g : 1;
}

/* packing split among the threads from this many packed bytes (a pooled job costs a few us) */
#define Q8_PACK_PAR_BYTES 65536

typedef struct {
    const q8_conv_params *p;
    const uint8_t *x;
    uint8_t *xp, *tmp;
    const q8_conv_shape *pad4; /* the implicit path's copy: its shape (the channel-lane GEMM's: stride 1) */
} pack_job;

static void pad_task(void *ctx, size_t begin, size_t end)
{
    const pack_job *j = (const pack_job *)ctx;
    q8_im2col_pad(&j->p->s, j->x, j->p->zx, j->tmp, (int)begin, (int)end);
}

static void im2col_task(void *ctx, size_t begin, size_t end)
{
    const pack_job *j = (const pack_job *)ctx;
    q8_im2col_k4(&j->p->s, j->p->flip, j->xp, j->tmp, begin, end);
}

static void direct_task(void *ctx, size_t begin, size_t end)
{
    const pack_job *j = (const pack_job *)ctx;
    q8_im2col_direct_k4(&j->p->s, j->x, j->p->flip, j->xp, begin, end);
}

static void pack_task(void *ctx, size_t begin, size_t end)
{
    const pack_job *j = (const pack_job *)ctx;
    const size_t N = (size_t)j->p->s.Ho * j->p->s.Wo;
    q8_pack_x_k4((size_t)j->p->s.C, N, j->x, N, j->p->flip, j->xp, begin, end);
}

static void gemm_chunk(void *ctx, size_t begin, size_t end)
{
    const gemm_job *j = (const gemm_job *)ctx;
    const size_t n0 = begin * Q8_CHUNK, n1 = end * Q8_CHUNK < j->N ? end * Q8_CHUNK : j->N;
    j->gemm(j->M, n1 - n0, j->K4, j->wp, j->xp + n0 * 4, j->np, j->y + n0 * j->ypx, j->y_stride, j->rq);
    apply_lut(j->lut, j->lut_fn, j->y, j->M, j->y_stride, j->ypx, n0, n1);
}

/* rq for the output channels from m0 on */
static q8_rq rq_from(const q8_rq *rq, size_t m0)
{
    q8_rq r = *rq;
    r.bias += m0;
    if (r.mult)
        r.mult += m0, r.shift += m0;
    if (r.scale)
        r.scale += m0;
    return r;
}

/* rows [8 begin, 8 end) of the output channels, all pixels (q8_pack_w's layout: 4-row panels); row m0 is at
 * m0 y_stride in either output layout */
static void gemm_rows(void *ctx, size_t begin, size_t end)
{
    const gemm_job *j = (const gemm_job *)ctx;
    const size_t m0 = begin * 8, m1 = end * 8 < j->M ? end * 8 : j->M;
    const q8_rq r = rq_from(j->rq, m0);
    j->gemm(m1 - m0, j->N, j->K4, j->wp + m0 / 4 * j->K4 * 16, j->xp, j->np, j->y + m0 * j->y_stride, j->y_stride,
            &r);
    apply_lut(j->lut, j->lut_fn, j->y + m0 * j->y_stride, m1 - m0, j->y_stride, j->ypx, 0, j->N);
}

/* The pixel-lane GEMM over a layer's pixels on a pool: 32-pixel chunks, or, for maps of fewer than 4 chunks a
 * thread, 8-row panels of output channels (ResNet-50's 14x14 maps are 7 chunks: 4 and 3 on 2 threads, each
 * thread reading every weight), several a claim: a call's next-panel prefetch hides where its weights come from
 * memory, one-panel calls had none (ResNet-50's classifier ran slower on 2 threads than on 1) */
static void run_gemm(gemm_job *j, int wlayout, ec_pool *pool)
{
    const size_t threads = (size_t)ec_pool_threads(pool), nc = (j->N + Q8_CHUNK - 1) / Q8_CHUNK;
    const size_t panels = (j->M + 7) / 8;
    if (threads > 1 && wlayout == Q8_WLAYOUT_PACK && nc < 4 * threads && panels >= 4 * threads)
        ec_parallel_for(pool, panels, gemm_grain(panels, pool), gemm_rows, j);
    else
        ec_parallel_for(pool, nc, gemm_grain(nc, pool), gemm_chunk, j);
}

static void pad4_task(void *ctx, size_t begin, size_t end)
{
    const pack_job *j = (const pack_job *)ctx;
    if (j->p->io & Q8_X_C4)
        q8_pack_pad4_c4(j->pad4, j->x, j->p->zx, j->xp, begin, end);
    else
        q8_pack_pad4(j->pad4, j->x, j->p->zx, j->p->flip, j->xp, begin, end);
}

static void direct_c4_task(void *ctx, size_t begin, size_t end)
{
    const pack_job *j = (const pack_job *)ctx;
    q8_im2col_direct_c4(&j->p->s, j->x, j->xp, begin, end);
}

typedef struct {
    q8_igemm_fn igemm;
    size_t M, N, K4;
    const int8_t *wp;
    const uint8_t *x;
    const int32_t *koff;
    uint8_t *y;
    const q8_rq *rq;
} igemm_job;

static void igemm_chunk(void *ctx, size_t begin, size_t end)
{
    const igemm_job *j = (const igemm_job *)ctx;
    const size_t n0 = begin * Q8_CHUNK, n1 = end * Q8_CHUNK < j->N ? end * Q8_CHUNK : j->N;
    j->igemm(j->M, n1 - n0, j->K4, j->wp, j->x + n0 * 4, j->koff, j->y + n0, j->N, j->rq);
}

typedef struct {
    q8_cgemm_fn cgemm;
    size_t M, N, Wo, rs, cs, K4;
    const int8_t *wp;
    const uint8_t *x;
    const int32_t *koff;
    uint8_t *y;
    const q8_rq *rq;
    int by_panel; /* items: 32-channel panels (small maps), else 32-pixel chunks */
    size_t ys;    /* the output's row pitch: N, or np in the blocked layout (row m0 at m0 ys either way) */
    size_t ypx;   /* bytes from one output pixel to the next: 1, or 4 in the blocked layout */
    const uint8_t *lut; /* q8_conv_params.lut, or NULL */
    q8_conv_lut_fn lut_fn;
} cgemm_job;

static void cgemm_task(void *ctx, size_t begin, size_t end)
{
    const cgemm_job *j = (const cgemm_job *)ctx;
    if (j->by_panel) {
        const size_t m0 = begin * 32, m1 = end * 32 < j->M ? end * 32 : j->M;
        const q8_rq r = rq_from(j->rq, m0);
        j->cgemm(m1 - m0, 0, j->N, j->Wo, j->rs, j->cs, j->K4, j->wp + m0 * j->K4 * 4, j->x, j->koff,
                 j->y + m0 * j->ys, j->ys, &r);
        apply_lut(j->lut, j->lut_fn, j->y + m0 * j->ys, m1 - m0, j->ys, j->ypx, 0, j->N);
    } else {
        const size_t n0 = begin * Q8_CHUNK, n1 = end * Q8_CHUNK < j->N ? end * Q8_CHUNK : j->N;
        j->cgemm(j->M, n0, n1, j->Wo, j->rs, j->cs, j->K4, j->wp, j->x, j->koff, j->y, j->ys, j->rq);
        apply_lut(j->lut, j->lut_fn, j->y, j->M, j->ys, j->ypx, n0, n1);
    }
}

/* The channel-lane GEMM over the whole layer: on one thread one call; on more, 32-pixel chunks where each thread
 * gets several (4 a thread), else 32-channel panels (a 7x7 map's 49 pixels are two chunks), about 4 claims a
 * thread, so that calls of several panels prefetch the next one's weights. */
static void run_cgemm(cgemm_job *j, ec_pool *pool)
{
    const size_t threads = (size_t)ec_pool_threads(pool), nc = (j->N + Q8_CHUNK - 1) / Q8_CHUNK;
    if (threads <= 1) {
        j->cgemm(j->M, 0, j->N, j->Wo, j->rs, j->cs, j->K4, j->wp, j->x, j->koff, j->y, j->ys, j->rq);
        apply_lut(j->lut, j->lut_fn, j->y, j->M, j->ys, j->ypx, 0, j->N);
        return;
    }
    j->by_panel = nc < 4 * threads;
    if (j->by_panel)
        ec_parallel_for(pool, (j->M + 31) / 32, gemm_grain((j->M + 31) / 32 * 2, pool), cgemm_task, j);
    else
        ec_parallel_for(pool, nc, gemm_grain(nc, pool), cgemm_task, j);
}

typedef struct {
    const q8_conv_shape *s;
    const uint8_t *ye; /* extended rows, wq pixels each */
    uint8_t *y;
    const uint8_t *lut; /* q8_conv_params.lut, or NULL */
    q8_conv_lut_fn lut_fn;
} compact_job;

static void compact_task(void *ctx, size_t begin, size_t end)
{
    const compact_job *j = (const compact_job *)ctx;
    const size_t Ho = (size_t)j->s->Ho, Wo = (size_t)j->s->Wo, wq = q8_pad4_wq(j->s);
    for (size_t m = begin; m < end; m++)
        for (size_t oh = 0; oh < Ho; oh++)
            memcpy(j->y + (m * Ho + oh) * Wo, j->ye + (m * Ho + oh) * wq, Wo);
    apply_lut(j->lut, j->lut_fn, j->y + begin * Ho * Wo, end - begin, Ho * Wo, 1, 0, Ho * Wo);
}

/* The implicit GEMM over the padded copy (see q8-conv.h) for group input xg, output yg. */
static void conv_implicit(const q8_conv_params *p, const uint8_t *xg, uint8_t *yg, const q8_rq *rq, const int8_t *wg,
                          uint8_t *scratch, ec_pool *pool)
{
    /* The channel-lane GEMM steps through a strided window itself (its pixel offsets): its copy is the stride-1 one
     * of the same padded extent, no phase split (whose scalar-heavy copy cost ResNet-50's stride-2 3x3s 34 us each
     * where the stride-1 interleave takes ~8); it fits in the phase-split copy's scratch. */
    q8_conv_shape s1 = p->s;
    if (p->cgemm)
        s1.sh = s1.sw = 1, s1.Ho = (p->s.Ho - 1) * p->s.sh + 1, s1.Wo = (p->s.Wo - 1) * p->s.sw + 1;
    const q8_conv_shape *s = &s1;
    const size_t c4n = (size_t)(s->C + 3) / 4, taps = (size_t)s->kh * s->kw, sh = (size_t)s->sh, sw = (size_t)s->sw;
    const size_t wq = q8_pad4_wq(s), phase = q8_pad4_hq(s) * wq * 4, plane = sh * sw * phase;
    const size_t ne = (size_t)s->Ho * wq, pad = q8_conv_pad4_bytes(&p->s); /* the scratch's layout: p->s's */
    uint8_t *xp = scratch, *ye = scratch + pad, *ke = ye + (p->cgemm ? 0 : (size_t)p->ocg * ne);
    int32_t *koff = (int32_t *)(void *)(ke + (-(uintptr_t)ke & 3)); /* after the rows, 4-byte aligned */
    /* tap (i, j) of channels 4 c4.. for pixel n: n * 4 + this; k in wlayout's order */
    for (size_t c4 = 0; c4 < c4n; c4++)
        for (size_t t = 0; t < taps; t++) {
            const size_t di = (t / s->kw) * s->dh, dj = (t % s->kw) * s->dw;
            const size_t ph = (di % sh) * sw + dj % sw; /* its phase plane */
            koff[p->wlayout == Q8_WLAYOUT_AMX ? t * c4n + c4 : c4 * taps + t] =
                (int32_t)(c4 * plane + ph * phase + ((di / sh) * wq + dj / sw) * 4);
        }
    pack_job pj = {p, xg, xp, NULL, s};
    if (ec_pool_threads(pool) <= 1 || c4n * plane < Q8_PACK_PAR_BYTES)
        pad4_task(&pj, 0, c4n);
    else
        ec_parallel_for(pool, c4n, 1, pad4_task, &pj);
    memset(xp + c4n * plane, p->zx ^ p->flip, pad - c4n * plane); /* what the last tiles read past the copy */
    if (p->cgemm) { /* compact rows straight into yg */
        const size_t sh0 = (size_t)p->s.sh, sw0 = (size_t)p->s.sw; /* the conv's own stride */
        const size_t N = (size_t)p->s.Ho * p->s.Wo;
        cgemm_job cj = {p->cgemm, (size_t)p->ocg, N, (size_t)p->s.Wo, sh0 * wq, sw0, c4n * taps, wg, xp, koff, yg, rq, 0,
                        p->io & Q8_Y_C4 ? q8_pack_np(N) : N, p->io & Q8_Y_C4 ? 4 : 1, p->lut, p->lut_fn};
        run_cgemm(&cj, pool);
        return;
    }
    igemm_job j = {p->igemm, (size_t)p->ocg, ne, c4n * taps, wg, xp, koff, ye, rq};
    const size_t nc = (ne + Q8_CHUNK - 1) / Q8_CHUNK;
    ec_parallel_for(pool, nc, gemm_grain(nc, pool), igemm_chunk, &j);
    compact_job cj = {s, ye, yg, p->lut, p->lut_fn};
    ec_parallel_for(pool, (size_t)p->ocg, 1, compact_task, &cj);
}

void q8_conv(const q8_conv_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch, ec_pool *pool)
{
    const q8_conv_shape *s = &p->s;
    const size_t K = (size_t)s->C * s->kh * s->kw, N = (size_t)s->Ho * s->Wo;
    const int xc4 = (p->io & Q8_X_C4) != 0, yc4 = (p->io & Q8_Y_C4) != 0;
    /* the blocked layout's planes are q8_pack_np pixels apart (channels a multiple of 4 there) */
    const size_t in_g = (size_t)s->C * (xc4 ? q8_pack_np((size_t)s->H * s->W) : (size_t)s->H * s->W);
    const size_t out_g = (size_t)p->ocg * (yc4 ? q8_pack_np(N) : N);
    const size_t wg = p->wlayout == Q8_WLAYOUT_AMX ? q8_pack_w_amx_bytes((size_t)p->ocg, K)
                                                   : q8_pack_w_bytes((size_t)p->ocg, K);
    const size_t mg = ((size_t)p->ocg + 3) / 4 * 4;
    for (int b = 0; b < p->batch; b++)
        for (int g = 0; g < p->groups; g++) {
            const uint8_t *xg = x + ((size_t)b * p->groups + g) * in_g;
            if (q8_conv_implicit(p)) {
                const size_t Ki = (size_t)(s->C + 3) / 4 * 4 * s->kh * s->kw;
                const size_t wgi = p->cgemm ? q8_pack_w_c32_bytes((size_t)p->ocg, Ki)
                                   : p->wlayout == Q8_WLAYOUT_AMX ? q8_pack_w_amx_bytes((size_t)p->ocg, Ki)
                                                                  : q8_pack_w_bytes((size_t)p->ocg, Ki);
                q8_rq rq = {p->bias + g * mg, p->mult + g * mg, p->shift + g * mg, p->zp, p->qmin, p->qmax,
                            p->scale ? p->scale + g * mg : NULL};
                conv_implicit(p, xg, y + ((size_t)b * p->groups + g) * out_g, &rq, p->wp + g * wgi, scratch, pool);
                continue;
            }
            pack_job pj = {p, xg, scratch, scratch + q8_pack_x_bytes(K, N), s};
            const uint8_t *xp = scratch; /* the GEMM's packed X */
            if (xc4 && is_pointwise(s)) {
                xp = xg; /* the blocked input is the packed X */
            } else if (xc4) { /* a strided 1x1 (q8_conv_params.io) */
                if (ec_pool_threads(pool) <= 1 || q8_pack_x_bytes(K, N) < Q8_PACK_PAR_BYTES)
                    q8_im2col_direct_c4(s, xg, scratch, 0, (K + 3) / 4);
                else
                    ec_parallel_for(pool, (K + 3) / 4, 1, direct_c4_task, &pj);
            } else if (ec_pool_threads(pool) <= 1 || q8_pack_x_bytes(K, N) < Q8_PACK_PAR_BYTES) {
                if (is_pointwise(s))
                    q8_pack_x(K, N, xg, N, p->flip, scratch);
                else if (q8_im2col_direct(s)) /* strided 1x1s: the padded copy cost ResNet-50's 1.5x their GEMM */
                    q8_im2col_direct_k4(s, xg, p->flip, scratch, 0, (K + 3) / 4);
                else
                    q8_pack_im2col(s, xg, p->zx, p->flip, scratch, pj.tmp);
            } else if (is_pointwise(s)) {
                /* groups of 4 input rows among the threads (packing on one thread left SqueezeNet's int8 build
                 * 1.1x faster on two; pixel ranges matching the GEMM's chunks ran slower than these) */
                ec_parallel_for(pool, (K + 3) / 4, 1, pack_task, &pj);
            } else if (q8_im2col_direct(s)) {
                ec_parallel_for(pool, (K + 3) / 4, 1, direct_task, &pj);
            } else {
                ec_parallel_for(pool, (size_t)s->C, 1, pad_task, &pj);
                ec_parallel_for(pool, (K + 3) / 4, 1, im2col_task, &pj);
            }
            q8_rq rq = {p->bias + g * mg, p->mult + g * mg, p->shift + g * mg, p->zp, p->qmin, p->qmax,
                        p->scale ? p->scale + g * mg : NULL};
            if (p->cgemm) { /* over the packed input: pixel n of k4 step k at 4 (k np + n) */
                const size_t K4 = (K + 3) / 4, np = q8_pack_np(N);
                uint8_t *ke = pj.tmp + (size_t)s->C * q8_im2col_hp(s) * q8_im2col_wp(s) + 32;
                int32_t *koff = (int32_t *)(void *)(ke + (-(uintptr_t)ke & 3));
                for (size_t k = 0; k < K4; k++)
                    koff[k] = (int32_t)(4 * k * np);
                cgemm_job cj = {p->cgemm, (size_t)p->ocg, N, N, N, 1, K4,
                                p->wp + g * q8_pack_w_c32_bytes((size_t)p->ocg, K), xp, koff,
                                y + ((size_t)b * p->groups + g) * out_g, &rq, 0, yc4 ? np : N, yc4 ? 4 : 1, p->lut,
                                p->lut_fn};
                run_cgemm(&cj, pool);
                continue;
            }
            gemm_job j = {p->gemm, (size_t)p->ocg, N, (K + 3) / 4, q8_pack_np(N), yc4 ? q8_pack_np(N) : N, p->wp + g * wg,
                          xp, y + ((size_t)b * p->groups + g) * out_g, &rq, yc4 ? 4 : 1, p->lut, p->lut_fn};
            run_gemm(&j, p->wlayout, pool);
        }
}

void q8_matmul(size_t rows, size_t M, size_t K, const uint8_t *A, const int8_t *wp, const q8_rq *rq,
               uint8_t flip, q8_gemm_fn gemm, int wlayout, uint8_t *Y, uint8_t *scratch, ec_pool *pool)
{
    const size_t np = q8_pack_np(rows);
    uint8_t *xp = scratch, *yt = scratch + q8_pack_x_bytes(K, rows);
    memset(xp, 0, q8_pack_x_bytes(K, rows));
    for (size_t r = 0; r < rows; r++)
        for (size_t k = 0; k < K; k++)
            xp[((k / 4) * np + r) * 4 + k % 4] = A[r * K + k] ^ flip;
    /* rows are the GEMM's pixels: a classifier's one row on a pool splits the output channels (run_gemm) */
    gemm_job j = {gemm, M, rows, (K + 3) / 4, np, rows, wp, xp, rows == 1 ? Y : yt, rq, 1, NULL, NULL};
    run_gemm(&j, wlayout, pool);
    if (rows == 1)
        return;
    for (size_t r = 0; r < rows; r++)
        for (size_t m = 0; m < M; m++)
            Y[r * M + m] = yt[m * rows + r];
}
