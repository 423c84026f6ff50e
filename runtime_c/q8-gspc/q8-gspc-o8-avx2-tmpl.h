/* Int8 GSPC for AVX2-class x86, the body shared by two kernels that differ only in their 4-channel multiply-add
 * Q8_GSPC_DOT(acc, u, w) (int32 lanes += the dot product of 4 u8 bytes of u and 4 s8 bytes of w):
 *   q8-gspc-o8-avx2-maddubs.c  vpmaddubsw makes 2 int16 pair sums per output channel, vpmaddwd by ones adds them,
 *                              on weights whose channel pairs cannot saturate the int16 sums (the emitter checks
 *                              quant.gspc_maddubs_exact, the pair bound in this packing; 7-bit weights always pass);
 *   q8-gspc-o8-avxvnni.c       one VEX vpdpbusd (AVX-VNNI), exact on any int8 weights.
 * T_O = 8 output channels x T_I = 4 input channels per 32-byte weight vector: one pixel's 4 u8 channels are
 * broadcast; twice the products per multiply of q8_gspc_o8__avx2's vpmaddwd on int16 pairs, and the
 * input stays u8 (the VNNI kernel's [C_PG/4][Hp][Wp][4] packing, done with unpacks 8-16 pixels at a time).
 * The register block is NB consecutive pixels of the flattened Ho x Wo plane (narrow maps fill it); the
 * block is requantized per lane, packed to bytes 4 pixels at a time and transposed in registers so each
 * channel's NB pixels leave as one 8-byte store. Weights [ceil(K_PG/8)][ceil(C_PG/4)][kh][kw][8][4].
 * The including file defines Q8_GSPC_DOT and calls q8_gspc_o8_avx2_entry. */
#ifndef Q8_GSPC_O8_AVX2_TMPL_H
#define Q8_GSPC_O8_AVX2_TMPL_H

#include <immintrin.h>
#include <string.h>

#include "q8-gspc.h"

#define NB 8

/* per-lane requantization constants of one 8-channel block. fast: every shift in [33, 54], where
 * (acc * mult + 2^(s-1)) >> s == (hi32(acc * mult) + 2^(s-33)) >> (s-32) (q8-rq-avx2.h: q8_rq32_avx2), a
 * per-lane vpsravd, with the zero point folded into the rounding term (zp << (s-32); the sum stays below
 * 2^31); packing with signed/unsigned saturation is then the clamp to [0, 255]. */
typedef struct {
    __m256i mult, rnd, cnt, lo, hi;
    int fast, clamp;
    const int32_t *m, *s;
    int32_t zp;
} rq_blk;

static void rq_init(rq_blk *r, const int32_t *mult, const int32_t *shift, const q8_gspc_params *p)
{
    int32_t rnd[8], cnt[8];
    r->fast = 1;
    for (int o = 0; o < 8; o++) {
        const int32_t s = shift[o];
        const int ok = s >= 33 && s <= 54;
        r->fast &= ok;
        rnd[o] = ok ? (1 << (s - 33)) + (p->zp << (s - 32)) : 0;
        cnt[o] = ok ? s - 32 : 0;
    }
    r->mult = _mm256_loadu_si256((const __m256i *)mult);
    r->rnd = _mm256_loadu_si256((const __m256i *)rnd);
    r->cnt = _mm256_loadu_si256((const __m256i *)cnt);
    r->lo = _mm256_set1_epi8((char)p->qmin);
    r->hi = _mm256_set1_epi8((char)p->qmax);
    r->clamp = p->qmin > 0 || p->qmax < 255;
    r->m = mult;
    r->s = shift;
    r->zp = p->zp;
}

/* int32 result + zero point of 8 channels (not yet clamped to u8) */
static inline __m256i rq_lanes(__m256i acc, const rq_blk *r)
{
    const __m256i ev = _mm256_mul_epi32(acc, r->mult);
    const __m256i od = _mm256_mul_epi32(_mm256_srli_epi64(acc, 32), _mm256_srli_epi64(r->mult, 32));
    if (r->fast) {
        const __m256i hi = _mm256_blend_epi32(_mm256_srli_epi64(ev, 32), od, 0xAA);
        return _mm256_srav_epi32(_mm256_add_epi32(hi, r->rnd), r->cnt);
    }
    /* any shift in [31, 62]: logical 64-bit shifts made exact by a +2^62 offset, per-lane counts */
    const __m256i one = _mm256_set1_epi64x(1), off = _mm256_set1_epi64x((int64_t)1 << 62);
    const __m256i sv = _mm256_loadu_si256((const __m256i *)r->s), c62 = _mm256_set1_epi64x(62);
    const __m256i se = _mm256_and_si256(sv, _mm256_set1_epi64x(0xFFFFFFFFll)), so = _mm256_srli_epi64(sv, 32);
    const __m256i re = _mm256_add_epi64(_mm256_sllv_epi64(one, _mm256_sub_epi64(se, one)), off);
    const __m256i ro = _mm256_add_epi64(_mm256_sllv_epi64(one, _mm256_sub_epi64(so, one)), off);
    __m256i e = _mm256_srlv_epi64(_mm256_add_epi64(ev, re), se);
    __m256i o = _mm256_srlv_epi64(_mm256_add_epi64(od, ro), so);
    e = _mm256_sub_epi64(e, _mm256_sllv_epi64(one, _mm256_sub_epi64(c62, se)));
    o = _mm256_sub_epi64(o, _mm256_sllv_epi64(one, _mm256_sub_epi64(c62, so)));
    return _mm256_add_epi32(_mm256_blend_epi32(e, _mm256_slli_epi64(o, 32), 0xAA), _mm256_set1_epi32(r->zp));
}

/* acc[q]: 8 channels of pixel q -> channel o's nb pixels at y + o * hw (o < nch) */
static void store_block(const __m256i acc[NB], const rq_blk *r, size_t nb, size_t nch, uint8_t *y, size_t hw)
{
    __m256i v[2];
    for (int h = 0; h < 2; h++) { /* pixels 4h..4h+3: bytes [lane: channels 0-3 | 4-7][pixel][channel] */
        const __m256i a = _mm256_packs_epi32(rq_lanes(acc[4 * h], r), rq_lanes(acc[4 * h + 1], r));
        const __m256i b = _mm256_packs_epi32(rq_lanes(acc[4 * h + 2], r), rq_lanes(acc[4 * h + 3], r));
        __m256i t = _mm256_packus_epi16(a, b);
        if (r->clamp)
            t = _mm256_min_epu8(_mm256_max_epu8(t, r->lo), r->hi);
        /* 4 pixels x 4 channels -> 4 channels x 4 pixels in each lane */
        v[h] = _mm256_shuffle_epi8(t, _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                                                        0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    }
    /* qwords: channels 0, 1 | 4, 5 and 2, 3 | 6, 7, each 8 pixels */
    const __m256i lo = _mm256_unpacklo_epi32(v[0], v[1]), hi = _mm256_unpackhi_epi32(v[0], v[1]);
    __m128i c[4] = {_mm256_castsi256_si128(lo), _mm256_castsi256_si128(hi), _mm256_extracti128_si256(lo, 1),
                    _mm256_extracti128_si256(hi, 1)};
    if (nb == NB && nch == 8) {
        for (int k = 0; k < 4; k++) {
            _mm_storel_epi64((__m128i *)(y + (size_t)(2 * k) * hw), c[k]);
            _mm_storel_epi64((__m128i *)(y + (size_t)(2 * k + 1) * hw), _mm_unpackhi_epi64(c[k], c[k]));
        }
        return;
    }
    uint8_t t[8][8];
    for (int k = 0; k < 4; k++)
        _mm_storeu_si128((__m128i *)t[2 * k], c[k]);
    for (size_t o = 0; o < nch; o++)
        memcpy(y + o * hw, t[o], nb);
}

static void group_run(const q8_gspc_params *p, const uint8_t *xp, const int8_t *wg, const int32_t *bias,
                      const int32_t *mult, const int32_t *shift, uint8_t *yg)
{
    const size_t hp = q8_gspc_hp(p), wp = q8_gspc_wp(p), c4n = (size_t)(p->cpg + 3) / 4;
    const size_t ocb = (size_t)(p->kpg + 7) / 8, hw = (size_t)p->Ho * p->Wo, taps = (size_t)p->kh * p->kw;
    rq_blk rq[8]; /* groups of up to 64 output channels keep their constants; more recompute per block */
    const size_t nrq = ocb < 8 ? ocb : 8;
    for (size_t ob = 0; ob < nrq; ob++)
        rq_init(&rq[ob], mult + ob * 8, shift + ob * 8, p);
    for (size_t n0 = 0; n0 < hw; n0 += NB) {
        const size_t nb = hw - n0 < NB ? hw - n0 : NB;
        size_t off[NB];
        q8_gspc_pixel_offsets(p, wp, n0, nb, NB, off);
        for (size_t ob = 0; ob < ocb; ob++) {
            __m256i acc[NB];
            const __m256i b = _mm256_loadu_si256((const __m256i *)(bias + ob * 8));
            for (int q = 0; q < NB; q++)
                acc[q] = b;
            const int8_t *w = wg + ob * c4n * taps * 32;
            for (size_t c4 = 0; c4 < c4n; c4++)
                for (int i = 0; i < p->kh; i++) {
                    const uint8_t *row = xp + (c4 * hp + (size_t)i * p->dh) * wp * 4;
                    for (int j = 0; j < p->kw; j++, w += 32) {
                        const __m256i wv = _mm256_loadu_si256((const __m256i *)w);
                        const uint8_t *t = row + (size_t)j * p->dw * 4;
                        for (int q = 0; q < NB; q++) {
                            int32_t v;
                            memcpy(&v, t + off[q], 4);
                            acc[q] = Q8_GSPC_DOT(acc[q], _mm256_set1_epi32(v), wv);
                        }
                    }
                }
            rq_blk r;
            if (ob >= nrq)
                rq_init(&r, mult + ob * 8, shift + ob * 8, p);
            const size_t nch = (size_t)p->kpg - ob * 8 < 8 ? (size_t)p->kpg - ob * 8 : 8;
            store_block(acc, ob < nrq ? &rq[ob] : &r, nb, nch, yg + ob * 8 * hw + n0, hw);
        }
    }
}

/* q8_gspc_pack_input with 16 / 8 pixels x 4 channels interleaved per step */
static void pack_input(const q8_gspc_params *p, const uint8_t *xg, uint8_t *dst)
{
    const size_t hp = q8_gspc_hp(p), wp = q8_gspc_wp(p), c4n = (size_t)(p->cpg + 3) / 4;
    const size_t W = (size_t)p->W, HW = (size_t)p->H * W, plane = hp * wp * 4;
    const size_t wi = wp > (size_t)p->pl ? (wp - (size_t)p->pl < W ? wp - (size_t)p->pl : W) : 0; /* columns read */
    for (size_t c4 = 0; c4 < c4n; c4++) {
        const size_t nc = (size_t)p->cpg - c4 * 4 < 4 ? (size_t)p->cpg - c4 * 4 : 4;
        uint32_t pat = 0; /* border pixel: zx in real channels, 0 in the padding ones (zero weights) */
        for (size_t j = 0; j < nc; j++)
            pat |= (uint32_t)p->zx << (8 * j);
        const __m256i border = _mm256_set1_epi32((int)pat);
        uint8_t *d0 = dst + c4 * plane;
        /* whole plane first: the last store runs up to 31 bytes into the next plane (rewritten next) or
         * the slack (>= 64 bytes, set below) */
        for (size_t b = 0; b < plane; b += 32)
            _mm256_storeu_si256((__m256i *)(d0 + b), border);
        const uint8_t *src[4];
        for (size_t j = 0; j < 4; j++)
            src[j] = j < nc ? xg + (c4 * 4 + j) * HW : NULL;
        for (int ih = 0; ih < p->H; ih++) {
            const long r = (long)ih + p->pt;
            if (r >= (long)hp)
                break;
            uint8_t *d = d0 + ((size_t)r * wp + (size_t)p->pl) * 4;
            const size_t ro = (size_t)ih * W;
            size_t w0 = 0;
            for (; w0 + 16 <= wi; w0 += 16) {
                __m128i x[4];
                for (size_t j = 0; j < 4; j++)
                    x[j] = src[j] ? _mm_loadu_si128((const __m128i *)(src[j] + ro + w0)) : _mm_setzero_si128();
                const __m128i lo01 = _mm_unpacklo_epi8(x[0], x[1]), hi01 = _mm_unpackhi_epi8(x[0], x[1]);
                const __m128i lo23 = _mm_unpacklo_epi8(x[2], x[3]), hi23 = _mm_unpackhi_epi8(x[2], x[3]);
                _mm_storeu_si128((__m128i *)(d + w0 * 4), _mm_unpacklo_epi16(lo01, lo23));
                _mm_storeu_si128((__m128i *)(d + w0 * 4 + 16), _mm_unpackhi_epi16(lo01, lo23));
                _mm_storeu_si128((__m128i *)(d + w0 * 4 + 32), _mm_unpacklo_epi16(hi01, hi23));
                _mm_storeu_si128((__m128i *)(d + w0 * 4 + 48), _mm_unpackhi_epi16(hi01, hi23));
            }
            if (w0 + 8 <= wi) {
                __m128i x[4];
                for (size_t j = 0; j < 4; j++)
                    x[j] = src[j] ? _mm_loadl_epi64((const __m128i *)(src[j] + ro + w0)) : _mm_setzero_si128();
                const __m128i a = _mm_unpacklo_epi8(x[0], x[1]), b = _mm_unpacklo_epi8(x[2], x[3]);
                _mm_storeu_si128((__m128i *)(d + w0 * 4), _mm_unpacklo_epi16(a, b));
                _mm_storeu_si128((__m128i *)(d + w0 * 4 + 16), _mm_unpackhi_epi16(a, b));
                w0 += 8;
            }
            for (; w0 < wi; w0++)
                for (size_t j = 0; j < 4; j++)
                    d[w0 * 4 + j] = src[j] ? src[j][ro + w0] : 0;
        }
    }
    memset(dst + c4n * plane, p->zx, 32 * (size_t)p->sw + 64);
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
    const size_t kpgp = (size_t)(p->kpg + 7) / 8 * 8, c4n = (size_t)(p->cpg + 3) / 4;
    const size_t wsz = kpgp * c4n * 4 * (size_t)p->kh * p->kw;
    uint8_t *xp = jb->scratch + tid * q8_gspc_scratch_bytes(p);
    for (size_t it = begin; it < end; it++) {
        const size_t b = it / (size_t)p->groups, g = it % (size_t)p->groups;
        const size_t cin = (size_t)p->groups * p->cpg, cout = (size_t)p->groups * p->kpg;
        pack_input(p, jb->x + (b * cin + g * p->cpg) * p->H * p->W, xp);
        group_run(p, xp, p->w + g * wsz, p->bias + g * kpgp, p->mult + g * kpgp, p->shift + g * kpgp,
                  jb->y + (b * cout + g * p->kpg) * (size_t)p->Ho * p->Wo);
    }
}

static inline void q8_gspc_o8_avx2_entry(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch,
                                         ec_pool *pool)
{
    gspc_job jb = {p, x, y, scratch};
    ec_parallel_for_tid(pool, (size_t)p->batch * p->groups, 1, group_task, &jb);
}

#endif
