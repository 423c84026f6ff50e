/* Int8 GSPC for AVX2 (no VNNI): T_O = 8 output channels per register, T_I = 2: the input is packed
 * per group as int16 channel pairs [cpg/2][hp][wp][2], one pixel's pair is broadcast and vpmaddwd
 * multiplies it into 8 channels' weight pairs (u8 x s8 widened to int16: no saturation). 8-pixel
 * register block, per-lane requantization. Weights [ceil(K_PG/8)][ceil(cpg/2)][kh][kw][8][2] int8. */
#include <immintrin.h>
#include <string.h>

#include "q8-gspc.h"

#define OWB 8

/* exactly q8_requant1 per lane: logical shifts made exact by a +2^62 offset, per-lane counts */
static inline __m128i rq8_lanes(__m256i acc, const int32_t *mult, const int32_t *shift, const q8_gspc_params *p)
{
    const __m256i mv = _mm256_loadu_si256((const __m256i *)mult), sv = _mm256_loadu_si256((const __m256i *)shift);
    const __m256i one = _mm256_set1_epi64x(1), off = _mm256_set1_epi64x((int64_t)1 << 62);
    const __m256i se = _mm256_and_si256(sv, _mm256_set1_epi64x(0xFFFFFFFFll)), so = _mm256_srli_epi64(sv, 32);
    const __m256i re = _mm256_add_epi64(_mm256_sllv_epi64(one, _mm256_sub_epi64(se, one)), off);
    const __m256i ro = _mm256_add_epi64(_mm256_sllv_epi64(one, _mm256_sub_epi64(so, one)), off);
    __m256i ev = _mm256_srlv_epi64(_mm256_add_epi64(_mm256_mul_epi32(acc, mv), re), se);
    __m256i od = _mm256_mul_epi32(_mm256_srli_epi64(acc, 32), _mm256_srli_epi64(mv, 32));
    od = _mm256_srlv_epi64(_mm256_add_epi64(od, ro), so);
    /* subtract 2^(62-s) per lane (mod 2^32) */
    const __m256i c62 = _mm256_set1_epi64x(62);
    ev = _mm256_sub_epi64(ev, _mm256_sllv_epi64(one, _mm256_sub_epi64(c62, se)));
    od = _mm256_sub_epi64(od, _mm256_sllv_epi64(one, _mm256_sub_epi64(c62, so)));
    __m256i q = _mm256_blend_epi32(ev, _mm256_slli_epi64(od, 32), 0xAA);
    q = _mm256_add_epi32(q, _mm256_set1_epi32(p->zp));
    __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(q, q), _mm256_setzero_si256());
    __m128i r = _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    r = _mm_max_epu8(r, _mm_set1_epi8((char)p->qmin));
    return _mm_min_epu8(r, _mm_set1_epi8((char)p->qmax));
}

static void pack_pairs(const q8_gspc_params *p, const uint8_t *xg, int16_t *dst)
{
    const size_t hp = q8_gspc_hp(p), wp = q8_gspc_wp(p), c2n = (size_t)(p->cpg + 1) / 2;
    for (size_t c2 = 0; c2 < c2n; c2++)
        for (size_t r = 0; r < hp; r++) {
            int16_t *d = dst + (c2 * hp + r) * wp * 2;
            const int ih = (int)r - p->pt;
            for (size_t j = 0; j < 2; j++) {
                const size_t c = c2 * 2 + j;
                const uint8_t *row = c < (size_t)p->cpg && ih >= 0 && ih < p->H ? xg + (c * p->H + (size_t)ih) * p->W : NULL;
                for (size_t q = 0; q < wp; q++) {
                    const int iw = (int)q - p->pl;
                    d[q * 2 + j] = (int16_t)(c >= (size_t)p->cpg ? 0 : row && iw >= 0 && iw < p->W ? row[iw] : p->zx);
                }
            }
        }
    memset(dst + c2n * hp * wp * 2, 0, 32 * (size_t)p->sw + 64);
}

static void group_run(const q8_gspc_params *p, const int16_t *xp, const int8_t *wg, const int32_t *bias,
                      const int32_t *mult, const int32_t *shift, uint8_t *yg)
{
    const size_t hp = q8_gspc_hp(p), wp = q8_gspc_wp(p), c2n = (size_t)(p->cpg + 1) / 2;
    const size_t ocb = (size_t)(p->kpg + 7) / 8, hw = (size_t)p->Ho * p->Wo;
    for (size_t ob = 0; ob < ocb; ob++) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(bias + ob * 8));
        const size_t nch = (size_t)p->kpg - ob * 8 < 8 ? (size_t)p->kpg - ob * 8 : 8;
        for (int oh = 0; oh < p->Ho; oh++)
            for (int ow0 = 0; ow0 < p->Wo; ow0 += OWB) {
                __m256i acc[OWB];
                for (int q = 0; q < OWB; q++)
                    acc[q] = b;
                for (size_t c2 = 0; c2 < c2n; c2++)
                    for (int i = 0; i < p->kh; i++)
                        for (int j = 0; j < p->kw; j++) {
                            const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128(
                                (const __m128i *)(wg + (((ob * c2n + c2) * p->kh + i) * p->kw + j) * 16)));
                            const int16_t *row = xp + ((c2 * hp + (size_t)(oh * p->sh + i * p->dh)) * wp +
                                                       (size_t)(j * p->dw)) * 2;
                            for (int q = 0; q < OWB; q++) { /* past Wo: reads slack, results dropped */
                                int32_t v;
                                memcpy(&v, row + (size_t)(ow0 + q) * p->sw * 2, 4);
                                acc[q] = _mm256_add_epi32(acc[q], _mm256_madd_epi16(_mm256_set1_epi32(v), w));
                            }
                        }
                const int nb = p->Wo - ow0 < OWB ? p->Wo - ow0 : OWB;
                uint8_t tile[OWB][16];
                for (int q = 0; q < nb; q++)
                    _mm_storeu_si128((__m128i *)tile[q], rq8_lanes(acc[q], mult + ob * 8, shift + ob * 8, p));
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
    const size_t kpgp = (size_t)(p->kpg + 7) / 8 * 8, c2n = (size_t)(p->cpg + 1) / 2;
    const size_t wsz = kpgp * c2n * 2 * (size_t)p->kh * p->kw;
    int16_t *xp = (int16_t *)(void *)(jb->scratch + tid * q8_gspc_scratch_bytes(p) * 2);
    for (size_t it = begin; it < end; it++) {
        const size_t b = it / (size_t)p->groups, g = it % (size_t)p->groups;
        const size_t cin = (size_t)p->groups * p->cpg, cout = (size_t)p->groups * p->kpg;
        pack_pairs(p, jb->x + (b * cin + g * p->cpg) * p->H * p->W, xp);
        group_run(p, xp, p->w + g * wsz, p->bias + g * kpgp, p->mult + g * kpgp, p->shift + g * kpgp,
                  jb->y + (b * cout + g * p->kpg) * (size_t)p->Ho * p->Wo);
    }
}

/* scratch: EC_MAX_THREADS slices of 2 * q8_gspc_scratch_bytes (int16 input) */
void q8_gspc_o8__avx2(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch, ec_pool *pool)
{
    gspc_job jb = {p, x, y, scratch};
    ec_parallel_for_tid(pool, (size_t)p->batch * p->groups, 1, group_task, &jb);
}
