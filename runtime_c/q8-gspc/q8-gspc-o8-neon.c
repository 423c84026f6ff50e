/* Int8 GSPC for ARMv8.0 NEON (Cortex-A72, no sdot): T_O = 8 output channels as int16 weight lanes,
 * T_I = 1: each input value (widened u8) is multiply-accumulated into the 8 channels with vmlal_n_s16,
 * an 8-pixel register block along the output row. Input per group padded planar [cpg][hp][wp].
 * Weights [ceil(K_PG/8)][cpg][kh][kw][8] int8. Per-lane requantization. Parallel over (batch, group). */
#include <arm_neon.h>
#include <string.h>

#include "q8-gspc.h"

#define OWB 8

static inline uint8x8_t rq8_lanes(int32x4_t lo, int32x4_t hi, const int32_t *mult, const int32_t *shift,
                                  const q8_gspc_params *p)
{
    const int32x4_t m0 = vld1q_s32(mult), m1 = vld1q_s32(mult + 4);
    const int32x4_t n0 = vnegq_s32(vld1q_s32(shift)), n1 = vnegq_s32(vld1q_s32(shift + 4));
    /* (x * m + 2^(s-1)) >> s per lane: vrshl by the negated shift */
    int64x2_t a = vrshlq_s64(vmull_s32(vget_low_s32(lo), vget_low_s32(m0)), vmovl_s32(vget_low_s32(n0)));
    int64x2_t b = vrshlq_s64(vmull_high_s32(lo, m0), vmovl_high_s32(n0));
    int64x2_t c = vrshlq_s64(vmull_s32(vget_low_s32(hi), vget_low_s32(m1)), vmovl_s32(vget_low_s32(n1)));
    int64x2_t d = vrshlq_s64(vmull_high_s32(hi, m1), vmovl_high_s32(n1));
    int32x4_t q0 = vcombine_s32(vmovn_s64(a), vmovn_s64(b)), q1 = vcombine_s32(vmovn_s64(c), vmovn_s64(d));
    int16x8_t s = vqaddq_s16(vcombine_s16(vqmovn_s32(q0), vqmovn_s32(q1)), vdupq_n_s16((int16_t)p->zp));
    uint8x8_t u = vmax_u8(vqmovun_s16(s), vdup_n_u8((uint8_t)p->qmin));
    return vmin_u8(u, vdup_n_u8((uint8_t)p->qmax));
}

static void pack_planar(const q8_gspc_params *p, const uint8_t *xg, uint8_t *dst)
{
    const size_t hp = q8_gspc_hp(p), wp = q8_gspc_wp(p);
    for (int c = 0; c < p->cpg; c++)
        for (size_t r = 0; r < hp; r++) {
            uint8_t *d = dst + ((size_t)c * hp + r) * wp;
            const int ih = (int)r - p->pt;
            for (size_t q = 0; q < wp; q++) {
                const int iw = (int)q - p->pl;
                d[q] = ih >= 0 && ih < p->H && iw >= 0 && iw < p->W ? xg[((size_t)c * p->H + ih) * p->W + iw] : p->zx;
            }
        }
    memset(dst + (size_t)p->cpg * hp * wp, p->zx, 32 * (size_t)p->sw + 64);
}

static void group_run(const q8_gspc_params *p, const uint8_t *xp, const int8_t *wg, const int32_t *bias,
                      const int32_t *mult, const int32_t *shift, uint8_t *yg)
{
    const size_t hp = q8_gspc_hp(p), wp = q8_gspc_wp(p), taps = (size_t)p->kh * p->kw;
    const size_t ocb = (size_t)(p->kpg + 7) / 8, hw = (size_t)p->Ho * p->Wo;
    for (size_t ob = 0; ob < ocb; ob++) {
        const int32x4_t b0 = vld1q_s32(bias + ob * 8), b1 = vld1q_s32(bias + ob * 8 + 4);
        const size_t nch = (size_t)p->kpg - ob * 8 < 8 ? (size_t)p->kpg - ob * 8 : 8;
        for (int oh = 0; oh < p->Ho; oh++)
            for (int ow0 = 0; ow0 < p->Wo; ow0 += OWB) {
                int32x4_t lo[OWB], hi[OWB];
                for (int q = 0; q < OWB; q++) {
                    lo[q] = b0;
                    hi[q] = b1;
                }
                for (int c = 0; c < p->cpg; c++)
                    for (int i = 0; i < p->kh; i++)
                        for (int j = 0; j < p->kw; j++) {
                            const int16x8_t w = vmovl_s8(vld1_s8(wg + ((ob * (size_t)p->cpg + (size_t)c) * taps +
                                                                       (size_t)(i * p->kw + j)) * 8));
                            const uint8_t *row = xp + ((size_t)c * hp + (size_t)(oh * p->sh + i * p->dh)) * wp +
                                                 (size_t)(j * p->dw) + (size_t)ow0 * p->sw;
                            for (int q = 0; q < OWB; q++) { /* past Wo: reads slack, results dropped */
                                const int16_t v = row[q * p->sw];
                                lo[q] = vmlal_n_s16(lo[q], vget_low_s16(w), v);
                                hi[q] = vmlal_high_n_s16(hi[q], w, v);
                            }
                        }
                const int nb = p->Wo - ow0 < OWB ? p->Wo - ow0 : OWB;
                uint8_t tile[OWB][8];
                for (int q = 0; q < nb; q++)
                    vst1_u8(tile[q], rq8_lanes(lo[q], hi[q], mult + ob * 8, shift + ob * 8, p));
                for (size_t o = 0; o < nch; o++)
                    for (int q = 0; q < nb; q++)
                        yg[(ob * 8 + o) * hw + (size_t)oh * p->Wo + (size_t)(ow0 + q)] = tile[q][o];
            }
    }
}

typedef struct {
    const q8_gspc_params *p;
    const uint8_t *x;
    uint8_t *y, *scratch;
} gspc_job;

static void group_task(void *ctx, size_t tid, size_t begin, size_t end)
{
    const gspc_job *jb = (const gspc_job *)ctx;
    const q8_gspc_params *p = jb->p;
    const size_t kpgp = (size_t)(p->kpg + 7) / 8 * 8, wsz = kpgp * (size_t)p->cpg * p->kh * p->kw;
    uint8_t *xp = jb->scratch + tid * q8_gspc_scratch_bytes(p);
    for (size_t it = begin; it < end; it++) {
        const size_t b = it / (size_t)p->groups, g = it % (size_t)p->groups;
        const size_t cin = (size_t)p->groups * p->cpg, cout = (size_t)p->groups * p->kpg;
        pack_planar(p, jb->x + (b * cin + g * p->cpg) * p->H * p->W, xp);
        group_run(p, xp, p->w + g * wsz, p->bias + g * kpgp, p->mult + g * kpgp, p->shift + g * kpgp,
                  jb->y + (b * cout + g * p->kpg) * (size_t)p->Ho * p->Wo);
    }
}

void q8_gspc_o8__neon(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch, ec_pool *pool)
{
    gspc_job jb = {p, x, y, scratch};
    ec_parallel_for_tid(pool, (size_t)p->batch * p->groups, 1, group_task, &jb);
}
