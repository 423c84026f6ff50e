/* Int8 GSPC for AVX-512 VNNI: T_O = 16 (zmm) or 8 (ymm, for groups of at most 8 output channels: half
 * the lanes of a zmm would idle) output channels in one register, T_I = 4 input channels per vpdpbusd
 * (u8 pixel values broadcast x s8 weights). The register block is 8 consecutive output pixels of the
 * flattened Ho x Wo plane, so narrow maps (Wo < 8) fill it too and the result of one channel is 8
 * contiguous bytes (stored after an 8 x T_O byte transpose). Requantization is per lane (each lane is
 * its own output channel), fp32 where p->scale is set. Parallel over (batch, group). */
#include <immintrin.h>
#include <string.h>

#include "q8-gspc.h"
#include "../ec_vnni.h"

#define NB 8

/* q8_requant1_fp32 per lane: clamped in float, so the conversion cannot overflow and the narrowing
 * truncates (7 instructions; the fixed-point form below takes 16, half on vpdpbusd's port) */
static inline __m128i rq_lanes_fp32(__m512i acc, __m512 sc, const q8_gspc_params *p)
{
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), sc);
    v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps((float)(p->qmin - p->zp))), _mm512_set1_ps((float)(p->qmax - p->zp)));
    const __m512i q = _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_cvtepi32_epi8(_mm512_add_epi32(q, _mm512_set1_epi32(p->zp)));
}

static inline __m128i rq_lanes(__m512i acc, __m512i mv, __m512i sv, const q8_gspc_params *p)
{
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

/* a[k] = bytes of pixels 2k, 2k+1 interleaved per channel (8 channels); writes channel o's 8 pixels
 * to y + o * hw for o < nch */
static inline void store_t8x8(const __m128i a[4], uint8_t *y, size_t hw, size_t nch)
{
    const __m128i b0 = _mm_unpacklo_epi16(a[0], a[1]), b1 = _mm_unpackhi_epi16(a[0], a[1]);
    const __m128i b2 = _mm_unpacklo_epi16(a[2], a[3]), b3 = _mm_unpackhi_epi16(a[2], a[3]);
    __m128i e[4];
    e[0] = _mm_unpacklo_epi32(b0, b2);
    e[1] = _mm_unpackhi_epi32(b0, b2);
    e[2] = _mm_unpacklo_epi32(b1, b3);
    e[3] = _mm_unpackhi_epi32(b1, b3);
    for (size_t o = 0; o < nch; o++)
        _mm_storel_epi64((__m128i *)(y + o * hw), o & 1 ? _mm_unpackhi_epi64(e[o / 2], e[o / 2]) : e[o / 2]);
}

/* r[q]: T_O channel bytes of pixel q (q < nb) -> NCHW, channel-major */
static void store_block(const __m128i r[NB], int t_o, size_t nb, size_t nch, uint8_t *y, size_t hw)
{
    if (nb == NB) {
        __m128i a[4];
        for (int k = 0; k < 4; k++)
            a[k] = _mm_unpacklo_epi8(r[2 * k], r[2 * k + 1]);
        store_t8x8(a, y, hw, nch < 8 ? nch : 8);
        if (t_o == 16 && nch > 8) {
            for (int k = 0; k < 4; k++)
                a[k] = _mm_unpackhi_epi8(r[2 * k], r[2 * k + 1]);
            store_t8x8(a, y + 8 * hw, hw, nch - 8);
        }
        return;
    }
    uint8_t tile[NB][16];
    for (size_t q = 0; q < nb; q++)
        _mm_storeu_si128((__m128i *)tile[q], r[q]);
    for (size_t o = 0; o < nch; o++)
        for (size_t q = 0; q < nb; q++)
            y[o * hw + q] = tile[q][o];
}

static void group_run16(const q8_gspc_params *p, const uint8_t *xp, const int8_t *wg, const int32_t *bias,
                        const int32_t *mult, const int32_t *shift, const float *scale, uint8_t *yg)
{
    const size_t hp = q8_gspc_hp(p), wp = q8_gspc_wp(p), c4n = (size_t)(p->cpg + 3) / 4;
    const size_t ocb = (size_t)(p->kpg + 15) / 16, hw = (size_t)p->Ho * p->Wo;
    for (size_t n0 = 0; n0 < hw; n0 += NB) {
        const size_t nb = hw - n0 < NB ? hw - n0 : NB;
        size_t off[NB];
        q8_gspc_pixel_offsets(p, wp, n0, nb, NB, off);
        for (size_t ob = 0; ob < ocb; ob++) {
            __m512i acc[NB];
            for (int q = 0; q < NB; q++)
                acc[q] = _mm512_loadu_si512((const void *)(bias + ob * 16));
            const int8_t *w = wg + ob * c4n * (size_t)p->kh * p->kw * 64;
            for (size_t c4 = 0; c4 < c4n; c4++)
                for (int i = 0; i < p->kh; i++) {
                    const uint8_t *row = xp + (c4 * hp + (size_t)i * p->dh) * wp * 4;
                    for (int j = 0; j < p->kw; j++, w += 64) {
                        const __m512i wv = _mm512_loadu_si512((const void *)w);
                        const uint8_t *t = row + (size_t)j * p->dw * 4;
                        for (int q = 0; q < NB; q++) {
                            int32_t v;
                            memcpy(&v, t + off[q], 4);
                            acc[q] = ec_dpbusd512(acc[q], _mm512_set1_epi32(v), wv);
                        }
                    }
                }
            __m128i r[NB];
            if (scale) {
                const __m512 sc = _mm512_loadu_ps(scale + ob * 16);
                for (size_t q = 0; q < nb; q++)
                    r[q] = rq_lanes_fp32(acc[q], sc, p);
            } else {
                const __m512i mv = _mm512_loadu_si512((const void *)(mult + ob * 16));
                const __m512i sv = _mm512_loadu_si512((const void *)(shift + ob * 16));
                for (size_t q = 0; q < nb; q++)
                    r[q] = rq_lanes(acc[q], mv, sv, p);
            }
            const size_t nch = (size_t)p->kpg - ob * 16 < 16 ? (size_t)p->kpg - ob * 16 : 16;
            store_block(r, 16, nb, nch, yg + ob * 16 * hw + n0, hw);
        }
    }
}

static void group_run8(const q8_gspc_params *p, const uint8_t *xp, const int8_t *wg, const int32_t *bias,
                       const int32_t *mult, const int32_t *shift, const float *scale, uint8_t *yg)
{
    const size_t hp = q8_gspc_hp(p), wp = q8_gspc_wp(p), c4n = (size_t)(p->cpg + 3) / 4;
    const size_t ocb = (size_t)(p->kpg + 7) / 8, hw = (size_t)p->Ho * p->Wo;
    for (size_t n0 = 0; n0 < hw; n0 += NB) {
        const size_t nb = hw - n0 < NB ? hw - n0 : NB;
        size_t off[NB];
        q8_gspc_pixel_offsets(p, wp, n0, nb, NB, off);
        for (size_t ob = 0; ob < ocb; ob++) {
            __m256i acc[NB];
            for (int q = 0; q < NB; q++)
                acc[q] = _mm256_loadu_si256((const __m256i *)(bias + ob * 8));
            const int8_t *w = wg + ob * c4n * (size_t)p->kh * p->kw * 32;
            for (size_t c4 = 0; c4 < c4n; c4++)
                for (int i = 0; i < p->kh; i++) {
                    const uint8_t *row = xp + (c4 * hp + (size_t)i * p->dh) * wp * 4;
                    for (int j = 0; j < p->kw; j++, w += 32) {
                        const __m256i wv = _mm256_loadu_si256((const __m256i *)w);
                        const uint8_t *t = row + (size_t)j * p->dw * 4;
                        for (int q = 0; q < NB; q++) {
                            int32_t v;
                            memcpy(&v, t + off[q], 4);
                            acc[q] = ec_dpbusd256(acc[q], _mm256_set1_epi32(v), wv);
                        }
                    }
                }
            __m128i r[NB];
            if (scale) {
                const __m512 sc = _mm512_maskz_loadu_ps(0xFF, scale + ob * 8);
                for (size_t q = 0; q < nb; q++)
                    r[q] = rq_lanes_fp32(_mm512_zextsi256_si512(acc[q]), sc, p);
            } else {
                const __m512i mv = _mm512_maskz_loadu_epi32(0xFF, mult + ob * 8);
                const __m512i sv = _mm512_maskz_loadu_epi32(0xFF, shift + ob * 8);
                for (size_t q = 0; q < nb; q++)
                    r[q] = rq_lanes(_mm512_zextsi256_si512(acc[q]), mv, sv, p);
            }
            const size_t nch = (size_t)p->kpg - ob * 8 < 8 ? (size_t)p->kpg - ob * 8 : 8;
            store_block(r, 8, nb, nch, yg + ob * 8 * hw + n0, hw);
        }
    }
}

/* q8_gspc_pack_input with masked AVX-512BW loads/stores: 16 pixels x 4 channels per step */
static void pack_input(const q8_gspc_params *p, const uint8_t *xg, uint8_t *dst)
{
    const size_t hp = q8_gspc_hp(p), wp = q8_gspc_wp(p), c4n = (size_t)(p->cpg + 3) / 4;
    const size_t W = (size_t)p->W, HW = (size_t)p->H * W;
    const size_t wi = wp > (size_t)p->pl ? (wp - (size_t)p->pl < W ? wp - (size_t)p->pl : W) : 0; /* columns read */
    for (size_t c4 = 0; c4 < c4n; c4++) {
        const size_t nc = (size_t)p->cpg - c4 * 4 < 4 ? (size_t)p->cpg - c4 * 4 : 4;
        uint32_t pat = 0; /* border pixel: zx in real channels, 0 in the padding ones (zero weights) */
        for (size_t j = 0; j < nc; j++)
            pat |= (uint32_t)p->zx << (8 * j);
        const __m512i border = _mm512_set1_epi32((int)pat);
        for (size_t r = 0; r < hp; r++) {
            uint8_t *d = dst + (c4 * hp + r) * wp * 4;
            for (size_t b = 0; b < wp * 4; b += 64) {
                const size_t n = wp * 4 - b < 64 ? wp * 4 - b : 64;
                _mm512_mask_storeu_epi8(d + b, n == 64 ? ~(__mmask64)0 : ((__mmask64)1 << n) - 1, border);
            }
            const int ih = (int)r - p->pt;
            if (ih < 0 || ih >= p->H)
                continue;
            const uint8_t *src = xg + c4 * 4 * HW + (size_t)ih * W;
            for (size_t w0 = 0; w0 < wi; w0 += 16) {
                const size_t n = wi - w0 < 16 ? wi - w0 : 16;
                const __mmask16 m = (__mmask16)((1u << n) - 1);
                __m128i x[4];
                for (size_t j = 0; j < 4; j++)
                    x[j] = j < nc ? _mm_maskz_loadu_epi8(m, src + j * HW + w0) : _mm_setzero_si128();
                const __m128i lo01 = _mm_unpacklo_epi8(x[0], x[1]), hi01 = _mm_unpackhi_epi8(x[0], x[1]);
                const __m128i lo23 = _mm_unpacklo_epi8(x[2], x[3]), hi23 = _mm_unpackhi_epi8(x[2], x[3]);
                __m512i v = _mm512_castsi128_si512(_mm_unpacklo_epi16(lo01, lo23));
                v = _mm512_inserti32x4(v, _mm_unpackhi_epi16(lo01, lo23), 1);
                v = _mm512_inserti32x4(v, _mm_unpacklo_epi16(hi01, hi23), 2);
                v = _mm512_inserti32x4(v, _mm_unpackhi_epi16(hi01, hi23), 3);
                _mm512_mask_storeu_epi8(d + ((size_t)p->pl + w0) * 4,
                                        n == 16 ? ~(__mmask64)0 : ((__mmask64)1 << (4 * n)) - 1, v);
            }
        }
    }
    memset(dst + c4n * hp * wp * 4, p->zx, 32 * (size_t)p->sw + 64);
}

typedef struct {
    const q8_gspc_params *p;
    const uint8_t *x;
    uint8_t *y, *scratch;
    int t_o;
} gspc_job;

static void group_task(void *ctx, size_t tid, size_t begin, size_t end)
{
    const gspc_job *jb = (const gspc_job *)ctx;
    const q8_gspc_params *p = jb->p;
    const size_t t_o = (size_t)jb->t_o, kpgp = (p->kpg + t_o - 1) / t_o * t_o, c4n = (size_t)(p->cpg + 3) / 4;
    const size_t wsz = kpgp * c4n * 4 * (size_t)p->kh * p->kw;
    uint8_t *xp = jb->scratch + tid * q8_gspc_scratch_bytes(p);
    for (size_t it = begin; it < end; it++) {
        const size_t b = it / (size_t)p->groups, g = it % (size_t)p->groups;
        const size_t cin = (size_t)p->groups * p->cpg, cout = (size_t)p->groups * p->kpg;
        uint8_t *yg = jb->y + (b * cout + g * p->kpg) * (size_t)p->Ho * p->Wo;
        pack_input(p, jb->x + (b * cin + g * p->cpg) * p->H * p->W, xp);
        const float *sc = p->scale ? p->scale + g * kpgp : NULL;
        if (t_o == 16)
            group_run16(p, xp, p->w + g * wsz, p->bias + g * kpgp, p->mult + g * kpgp, p->shift + g * kpgp, sc, yg);
        else
            group_run8(p, xp, p->w + g * wsz, p->bias + g * kpgp, p->mult + g * kpgp, p->shift + g * kpgp, sc, yg);
    }
}

void q8_gspc_o16__avx512vnni(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch,
                             ec_pool *pool)
{
    gspc_job jb = {p, x, y, scratch, 16};
    ec_parallel_for_tid(pool, (size_t)p->batch * p->groups, 1, group_task, &jb);
}

void q8_gspc_o8__avx512vnni(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch,
                            ec_pool *pool)
{
    gspc_job jb = {p, x, y, scratch, 8};
    ec_parallel_for_tid(pool, (size_t)p->batch * p->groups, 1, group_task, &jb);
}
