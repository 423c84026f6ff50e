/* Int8 GSPC for AVX-512 VNNI: T_O = 16 output channels in one register, T_I = 4 input channels per
 * vpdpbusd (u8 pixel values broadcast x s8 weights), an 8-pixel register block along the output row.
 * Requantization is per lane (each lane is its own output channel). Parallel over (batch, group). */
#include <immintrin.h>
#include <string.h>

#include "q8-gspc.h"

#define OWB 8

static inline __m128i rq16_lanes(__m512i acc, const int32_t *mult, const int32_t *shift, const q8_gspc_params *p)
{
    const __m512i mv = _mm512_loadu_si512((const void *)mult), sv = _mm512_loadu_si512((const void *)shift);
    const __m512i one = _mm512_set1_epi64(1);
    const __m512i se = _mm512_and_si512(sv, _mm512_set1_epi64(0xFFFFFFFFll)), so = _mm512_srli_epi64(sv, 32);
    const __m512i re = _mm512_sllv_epi64(one, _mm512_sub_epi64(se, one));
    const __m512i ro = _mm512_sllv_epi64(one, _mm512_sub_epi64(so, one));
    __m512i ev = _mm512_srav_epi64(_mm512_add_epi64(_mm512_mul_epi32(acc, mv), re), se);
    __m512i od = _mm512_mul_epi32(_mm512_srli_epi64(acc, 32), _mm512_srli_epi64(mv, 32));
    od = _mm512_srav_epi64(_mm512_add_epi64(od, ro), so);
    __m512i q = _mm512_mask_blend_epi32(0xAAAA, ev, _mm512_slli_epi64(od, 32));
    q = _mm512_max_epi32(_mm512_add_epi32(q, _mm512_set1_epi32(p->zp)), _mm512_setzero_si512());
    __m128i r = _mm_max_epu8(_mm512_cvtusepi32_epi8(q), _mm_set1_epi8((char)p->qmin));
    return _mm_min_epu8(r, _mm_set1_epi8((char)p->qmax));
}

static void group_run(const q8_gspc_params *p, const uint8_t *xp, const int8_t *wg, const int32_t *bias,
                      const int32_t *mult, const int32_t *shift, uint8_t *yg)
{
    const size_t hp = q8_gspc_hp(p), wp = q8_gspc_wp(p), c4n = (size_t)(p->cpg + 3) / 4;
    const size_t ocb = (size_t)(p->kpg + 15) / 16, hw = (size_t)p->Ho * p->Wo;
    for (size_t ob = 0; ob < ocb; ob++) {
        const __m512i b = _mm512_loadu_si512((const void *)(bias + ob * 16));
        const size_t nch = (size_t)p->kpg - ob * 16 < 16 ? (size_t)p->kpg - ob * 16 : 16;
        for (int oh = 0; oh < p->Ho; oh++)
            for (int ow0 = 0; ow0 < p->Wo; ow0 += OWB) {
                __m512i acc[OWB];
                for (int q = 0; q < OWB; q++)
                    acc[q] = b;
                for (size_t c4 = 0; c4 < c4n; c4++)
                    for (int i = 0; i < p->kh; i++)
                        for (int j = 0; j < p->kw; j++) {
                            const __m512i w = _mm512_loadu_si512(
                                (const void *)(wg + (((ob * c4n + c4) * p->kh + i) * p->kw + j) * 64));
                            const uint8_t *row = xp + ((c4 * hp + (size_t)(oh * p->sh + i * p->dh)) * wp +
                                                       (size_t)(j * p->dw)) * 4;
                            for (int q = 0; q < OWB; q++) { /* past Wo: reads slack, results dropped */
                                int32_t v;
                                memcpy(&v, row + (size_t)(ow0 + q) * p->sw * 4, 4);
                                acc[q] = _mm512_dpbusd_epi32(acc[q], _mm512_set1_epi32(v), w);
                            }
                        }
                const int nb = p->Wo - ow0 < OWB ? p->Wo - ow0 : OWB;
                uint8_t tile[OWB][16];
                for (int q = 0; q < nb; q++)
                    _mm_storeu_si128((__m128i *)tile[q], rq16_lanes(acc[q], mult + ob * 16, shift + ob * 16, p));
                for (size_t o = 0; o < nch; o++) /* channel-major store back to NCHW */
                    for (int q = 0; q < nb; q++)
                        yg[(ob * 16 + o) * hw + (size_t)oh * p->Wo + (size_t)(ow0 + q)] = tile[q][o];
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
    const size_t kpgp = (size_t)(p->kpg + 15) / 16 * 16, c4n = (size_t)(p->cpg + 3) / 4;
    const size_t wsz = kpgp * c4n * 4 * (size_t)p->kh * p->kw;
    uint8_t *xp = jb->scratch + tid * q8_gspc_scratch_bytes(p);
    for (size_t it = begin; it < end; it++) {
        const size_t b = it / (size_t)p->groups, g = it % (size_t)p->groups;
        const size_t cin = (size_t)p->groups * p->cpg, cout = (size_t)p->groups * p->kpg;
        q8_gspc_pack_input(p, jb->x + (b * cin + g * p->cpg) * p->H * p->W, xp);
        group_run(p, xp, p->w + g * wsz, p->bias + g * kpgp, p->mult + g * kpgp, p->shift + g * kpgp,
                  jb->y + (b * cout + g * p->kpg) * (size_t)p->Ho * p->Wo);
    }
}

void q8_gspc_o16__avx512vnni(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch,
                             ec_pool *pool)
{
    gspc_job jb = {p, x, y, scratch};
    ec_parallel_for_tid(pool, (size_t)p->batch * p->groups, 1, group_task, &jb);
}
