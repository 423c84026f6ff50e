/* Int8 grouped convolution with GSPC (Grouped Spatial Pack Convolution, docs/../gspc.md): per group the
 * input is padded with the zero point and packed [C_PG/4][Hp][Wp][4] (4 input channels of a pixel
 * together, the T_I = 4 of a dot-product instruction), weights are packed offline
 * [K_PG/T_O][C_PG/4][kh][kw][T_O][4], and each step multiplies one pixel's 4 input channels into T_O
 * output channels held in one register. No im2col matrix; parallel over groups. u8 domain NCHW. */
#ifndef Q8_GSPC_H
#define Q8_GSPC_H

#include "../q8-requant/q8-requant.h"
#include "../ec_threadpool.h"

typedef struct {
    int batch, groups, cpg, kpg;        /* channels in / out per group */
    int H, W, kh, kw, sh, sw, dh, dw, pt, pl, Ho, Wo;
    const int8_t *w;                    /* reference: [G*kpg][cpg][kh][kw]; SIMD: packed per group */
    const int32_t *bias, *mult, *shift; /* [G * kpg_padded] (kpg padded to T_O for SIMD, kpg for the reference) */
    int32_t zp, qmin, qmax;
    uint8_t zx;
    const float *scale; /* like mult, or NULL: fp32 requantization (the VNNI kernels and the reference, q8-requant.h) */
} q8_gspc_params;

static inline size_t q8_gspc_hp(const q8_gspc_params *p) { return (size_t)(p->Ho - 1) * p->sh + (size_t)(p->kh - 1) * p->dh + 1; }
static inline size_t q8_gspc_wp(const q8_gspc_params *p) { return (size_t)(p->Wo - 1) * p->sw + (size_t)(p->kw - 1) * p->dw + 1; }
/* one thread's scratch: the packed input of one group + over-read slack of the 8-pixel block */
static inline size_t q8_gspc_scratch_bytes(const q8_gspc_params *p)
{
    return (size_t)(p->cpg + 3) / 4 * q8_gspc_hp(p) * q8_gspc_wp(p) * 4 + 32 * (size_t)p->sw + 64;
}

/* byte offsets of the nb_max pixels n0.. of the flattened Ho x Wo plane inside one packed [hp][wp][4] channel
 * plane (those past the nb valid ones: the last valid pixel's) */
static inline void q8_gspc_pixel_offsets(const q8_gspc_params *p, size_t wp, size_t n0, size_t nb, size_t nb_max,
                                         size_t *off)
{
    for (size_t q = 0; q < nb_max; q++) {
        const size_t n = n0 + (q < nb ? q : nb - 1), oh = n / (size_t)p->Wo, ow = n % (size_t)p->Wo;
        off[q] = (oh * (size_t)p->sh * wp + ow * (size_t)p->sw) * 4;
    }
}

void q8_gspc__scalar(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch, ec_pool *pool);
/* T_O = 16 output channels per vpdpbusd; scratch: EC_MAX_THREADS slices of q8_gspc_scratch_bytes */
void q8_gspc_o16__avx512vnni(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch,
                             ec_pool *pool);
/* the same with T_O = 8 in ymm registers (groups of <= 8 output channels); weights packed with T_O = 8 */
void q8_gspc_o8__avx512vnni(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch,
                            ec_pool *pool);

/* T_O = 8, T_I = 1, vmlal (ARMv8.0); weights [ceil(K_PG/8)][cpg][kh][kw][8] */
void q8_gspc_o8__neon(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch, ec_pool *pool);

/* T_O = 8, T_I = 2, vpmaddwd (AVX2); weights [ceil(K_PG/8)][ceil(cpg/2)][kh][kw][8][2]; scratch: slices of
 * 2 * q8_gspc_scratch_bytes (the input is packed as int16) */
void q8_gspc_o8__avx2(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch, ec_pool *pool);

/* T_O = 8, T_I = 4, vpmaddubsw + vpmaddwd by ones (AVX2), exact only on weights whose channel pairs
 * (c, c+1 of a 4-channel step) keep positive parts <= 128 and negative parts >= -128 (7-bit weights);
 * weights [ceil(K_PG/8)][ceil(cpg/4)][kh][kw][8][4]; scratch: slices of q8_gspc_scratch_bytes */
void q8_gspc_o8__avx2_maddubs(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch,
                              ec_pool *pool);
/* the same tiling with VEX vpdpbusd (AVX-VNNI): exact on any int8 weights */
void q8_gspc_o8__avxvnni(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch, ec_pool *pool);

/* pack one group's input (cpg x H x W) padded with zx into [cpg/4][hp][wp][4] */
void q8_gspc_pack_input(const q8_gspc_params *p, const uint8_t *xg, uint8_t *dst);

#endif
