/* Int8 GEMM for convolution and MatMul in NCHW: Y[m][n] = requant(sum_k W[m][k] X[k][n]).
 *
 * m = output channel, n = output pixel, k = (input channel, kh, kw).
 * W: int8 weights packed by q8_pack_w into [ceil(M/4)][K4][4 rows][4 k], K4 = ceil(K/4),
 *    zero-filled past M and K.
 * X: activations packed by q8_pack_x / q8_pack_im2col into [K4][NP][4] bytes
 *    (4 consecutive k of one pixel together, NP = q8_pack_np(N) >= N, padding lanes zero).
 *    Kernels with Q8_GEMM_X_SIGNED read them as int8 (value - 128): ARM vmull/sdot are s8 x s8;
 *    the x86 kernels read uint8 (madd after zero-extension, vpdpbusd is u8 x s8).
 * rq.bias must then be   bias - zx * sum_k W[m][k]   (+ 128 * sum_k W[m][k] for signed X).
 * Y: uint8 (u8 domain, see q8-requant.h), row m at Y + m * y_stride, N valid pixels.
 * Callers split work by slicing M (4-row multiples) or N (16-pixel multiples).
 *
 * The blocked activation layout (NCHW4c with a 16-pixel pitch, codegen/q8layout.py): a [C][H][W] tensor stored as
 * [C/4][np][4], np = q8_pack_np(H W), i.e. exactly the packed X of a 1x1 conv over it, so such a conv reads it
 * with no packing. The _c4 kernels write their output that way (M a multiple of 4; y_stride is then the output's
 * np, row m pixel n at Y + ((m / 4) y_stride + n) 4 + m % 4); pixels past N are not written. */
#ifndef Q8_GEMM_H
#define Q8_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "../q8-requant/q8-requant.h"

#define Q8_GEMM_MR 4
#define Q8_NP_ALIGN 16

typedef void (*q8_gemm_fn)(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                           size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq);

static inline size_t q8_pack_np(size_t N) { return (N + Q8_NP_ALIGN - 1) / Q8_NP_ALIGN * Q8_NP_ALIGN; }
static inline size_t q8_pack_x_bytes(size_t K, size_t N) { return (K + 3) / 4 * 4 * q8_pack_np(N); }
static inline size_t q8_pack_w_bytes(size_t M, size_t K) { return (M + 3) / 4 * 4 * ((K + 3) / 4 * 4); }

/* W [M][K] row-major int8 -> packed layout above. */
void q8_pack_w(size_t M, size_t K, const int8_t *W, int8_t *Wp);
/* X [K][N] (rows x_stride apart) -> [K4][NP][4]; flip = 0x80 for signed-X kernels, else 0. */
void q8_pack_x(size_t K, size_t N, const uint8_t *X, size_t x_stride, uint8_t flip, uint8_t *Xp);
/* its k4 groups [k4b, k4e) (a share for one thread) */
void q8_pack_x_k4(size_t K, size_t N, const uint8_t *X, size_t x_stride, uint8_t flip, uint8_t *Xp, size_t k4b,
                  size_t k4e);

typedef struct {
    int C, H, W;          /* input of one group */
    int kh, kw, sh, sw, dh, dw, pt, pl;
    int Ho, Wo;
} q8_conv_shape;

/* padded input extent read by the kernel window (rows, columns) */
static inline size_t q8_im2col_hp(const q8_conv_shape *s) { return (size_t)(s->Ho - 1) * s->sh + (size_t)(s->kh - 1) * s->dh + 1; }
static inline size_t q8_im2col_wp(const q8_conv_shape *s) { return (size_t)(s->Wo - 1) * s->sw + (size_t)(s->kw - 1) * s->dw + 1; }

/* im2col of one group's input (C x H x W, u8) into the packed layout. tmp (C * hp * wp bytes; callers add 32) holds
 * the input padded with pad (the input zero point, so padding contributes zero after the bias
 * correction); then 4 k-rows at a time are interleaved straight into place. */
void q8_pack_im2col(const q8_conv_shape *s, const uint8_t *x, uint8_t pad, uint8_t flip,
                    uint8_t *Xp, uint8_t *tmp);
/* The implicit GEMM's input (q8-conv.h): channels [4 c4b, 4 c4e) of one group's input, zero-point padded and split
 * into the stride's sh x sw phases, as [C/4][sh][sw][hq][wq][4] (phase (py, px) row r, column c: padded row
 * r sh + py, column c sw + px; bytes past C: pad); flip as in q8_pack_x. */
static inline size_t q8_pad4_hq(const q8_conv_shape *s)
{
    return (q8_im2col_hp(s) + (size_t)s->sh - 1) / (size_t)s->sh;
}
static inline size_t q8_pad4_wq(const q8_conv_shape *s)
{
    return (q8_im2col_wp(s) + (size_t)s->sw - 1) / (size_t)s->sw;
}
void q8_pack_pad4(const q8_conv_shape *s, const uint8_t *x, uint8_t pad, uint8_t flip, uint8_t *dst, size_t c4b,
                  size_t c4e);
/* its two steps, for shares among threads: the padded copy of channels [c0, c1) into tmp, then the k4 groups
 * [k4b, k4e) from a complete padded copy */
void q8_im2col_pad(const q8_conv_shape *s, const uint8_t *x, uint8_t pad, uint8_t *tmp, int c0, int c1);
void q8_im2col_k4(const q8_conv_shape *s, uint8_t flip, uint8_t *Xp, const uint8_t *tmp, size_t k4b, size_t k4e);
/* the k4 groups straight from the input, no padded copy: for windows that never leave it (q8_im2col_direct) */
static inline int q8_im2col_direct(const q8_conv_shape *s)
{
    return s->pt == 0 && s->pl == 0 && q8_im2col_hp(s) <= (size_t)s->H && q8_im2col_wp(s) <= (size_t)s->W;
}
void q8_im2col_direct_k4(const q8_conv_shape *s, const uint8_t *x, uint8_t flip, uint8_t *Xp, size_t k4b, size_t k4e);
/* From the blocked layout (x: [C/4][q8_pack_np(H W)][4], C a multiple of 4): q8_pack_pad4's copy for stride 1
 * (sh = sw = 1: rows of 4-byte pixels copied whole between their padding), and q8_im2col_direct_k4's packed X of a
 * strided 1x1 (every sh-th row's every sw-th pixel), both for channel groups [c4b, c4e) */
void q8_pack_pad4_c4(const q8_conv_shape *s, const uint8_t *x, uint8_t pad, uint8_t *dst, size_t c4b, size_t c4e);
void q8_im2col_direct_c4(const q8_conv_shape *s, const uint8_t *x, uint8_t *Xp, size_t c4b, size_t c4e);
/* the layout's conversions for C channels of HW pixels: NCHW -> blocked is q8_pack_x(C, HW, x, HW, 0, y); back: */
void q8_unpack_c4(size_t C, size_t HW, const uint8_t *x, uint8_t *y, size_t c4b, size_t c4e);

void q8_gemm_4x8__scalar(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                         size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq);
void q8_gemm_4x8__neon(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                       size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq);
/* two k4 steps per int16 product lane (vmull + vmlal, one vpadal): exact unless a weight pair of a lane
 * reaches -128 twice (see q8-gemm-4x8-neon-mlal.c) */
void q8_gemm_4x8__neon_mlal(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                            size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq);
void q8_gemm_4x8__neondot(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                          size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq);
void q8_gemm_4x8__avx2(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                       size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq);
/* u8 x s8 vpmaddubsw kernel and its saturating scalar model: exact only when every k-pair of
 * weights keeps the int16 pair sum in range (see q8-gemm-4x16-avx2-maddubs.c). */
void q8_gemm_4x16__avx2_maddubs(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                                size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq);
void q8_gemm_4x8__scalar_maddubs(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                                 size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq);
/* GEMM then a residual Add in its store: Y = q8_add(requant(W X), R) elementwise, the GEMM's bytes as
 * operand a of ap (za = rq->zp); R[m][n] at R + m * y_stride + n (laid out like Y; R may equal Y, never
 * overlap it otherwise). The exact bytes of the GEMM followed by q8_add (q8-eltwise.h). */
struct q8_add_params_s;
typedef void (*q8_gemm_add_fn)(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp, size_t np,
                               uint8_t *Y, size_t y_stride, const q8_rq *rq, const uint8_t *R,
                               const struct q8_add_params_s *ap);
void q8_gemm_4x16__avx2_maddubs_add(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                                    size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq, const uint8_t *R,
                                    const struct q8_add_params_s *ap);
void q8_gemm_4x8__scalar_maddubs_add(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                                     size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq, const uint8_t *R,
                                     const struct q8_add_params_s *ap);
void q8_gemm_4x16__avx512bw(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                            size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq);
/* AVX-VNNI (VEX vpdpbusd, ymm): exact on any int8 weights */
void q8_gemm_4x16__avxvnni(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                           size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq);
/* Implicit GEMM (q8_conv's stride-1 path): k4 step k of pixel n reads its 4 bytes at x + koff[k] + 4 n, the
 * input read in place instead of packed; reads reach up to 128 bytes past the last pixel's. */
typedef void (*q8_igemm_fn)(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *x, const int32_t *koff,
                            uint8_t *Y, size_t y_stride, const q8_rq *rq);
void q8_igemm_4x8__scalar(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *x, const int32_t *koff,
                          uint8_t *Y, size_t y_stride, const q8_rq *rq);
void q8_igemm_4x16__avx2_maddubs(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *x,
                                 const int32_t *koff, uint8_t *Y, size_t y_stride, const q8_rq *rq);
void q8_igemm_4x16__avxvnni(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *x, const int32_t *koff,
                            uint8_t *Y, size_t y_stride, const q8_rq *rq);
void q8_igemm_8x32__avx512vnni(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *x, const int32_t *koff,
                               uint8_t *Y, size_t y_stride, const q8_rq *rq);
/* AMX (q8-gemm-32x32-amx.c): weights in their own layout, q8_pack_w_amx's: per 16-row panel (rows past M zero)
 * nb blocks of kb k4 steps, each 16 rows x kb * 4 bytes row-major (one A tile), kb = q8_amx_kb(K4),
 * nb = ceil(K4 / kb). Block b covers k4 [s, s + kb), s = min(b kb, K4 - kb): the last block ends at K4, so the
 * activation tile never reads past the packed rows, and its weights are zero on the k4 the block before it
 * covered. */
static inline size_t q8_amx_kb(size_t K4) { return K4 < 16 ? K4 : 16; }
static inline size_t q8_pack_w_amx_bytes(size_t M, size_t K)
{
    const size_t K4 = (K + 3) / 4, kb = q8_amx_kb(K4);
    return (M + 15) / 16 * 16 * ((K4 + kb - 1) / kb) * kb * 4;
}
void q8_pack_w_amx(size_t M, size_t K, const int8_t *W, int8_t *Wp);
void q8_gemm_32x32__amx(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                        size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq);
void q8_gemm_amx__scalar(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                         size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq);
/* implicit forms (q8_conv): koff in (tap, c4) order (Q8_WLAYOUT_AMX), each block's 16 k4 steps a fixed stride apart
 * (q8_conv takes them only for a multiple of 64 channels a group: blocks never straddle two taps) */
void q8_igemm_32x32__amx(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *x, const int32_t *koff,
                         uint8_t *Y, size_t y_stride, const q8_rq *rq);
void q8_igemm_amx__scalar(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *x, const int32_t *koff,
                          uint8_t *Y, size_t y_stride, const q8_rq *rq);
/* whether this process may use AMX tiles (asks the OS once) */
int q8_amx_available(void);
/* Channel-lane GEMM: output channels in the vector lanes, each pixel's k quad broadcast, so no pixel is padding
 * (a 7x7 map's 49 pixels fill 64 lanes of the pixel-lane tiles). Y[m][n] for pixels [n0, n1), n = oh Wo + ow compact;
 * k4 step k of pixel n is read at x + koff[k] + 4 (oh rs + ow cs): the implicit GEMM's padded copy (rs its row
 * pitch times the stride, cs the horizontal stride: no extended rows are computed or written) or packed X
 * (koff[k] = 4 k np, Wo = rs = N, cs = 1). Weights as q8_pack_w_c32 packs them: [ceil(M/32)][K4][32 rows][4 k], zero
 * past M and K. M a multiple of 16; rq->scale set (fp32 requantization); X read as uint8. */
typedef void (*q8_cgemm_fn)(size_t M, size_t n0, size_t n1, size_t Wo, size_t rs, size_t cs, size_t K4,
                            const int8_t *Wp, const uint8_t *x, const int32_t *koff, uint8_t *Y, size_t y_stride,
                            const q8_rq *rq);
static inline size_t q8_pack_w_c32_bytes(size_t M, size_t K) { return (M + 31) / 32 * 32 * ((K + 3) / 4 * 4); }
void q8_pack_w_c32(size_t M, size_t K, const int8_t *W, int8_t *Wp);
void q8_cgemm__scalar(size_t M, size_t n0, size_t n1, size_t Wo, size_t rs, size_t cs, size_t K4, const int8_t *Wp,
                      const uint8_t *x, const int32_t *koff, uint8_t *Y, size_t y_stride, const q8_rq *rq);
void q8_cgemm_32x8__avx512vnni(size_t M, size_t n0, size_t n1, size_t Wo, size_t rs, size_t cs, size_t K4,
                               const int8_t *Wp, const uint8_t *x, const int32_t *koff, uint8_t *Y, size_t y_stride,
                               const q8_rq *rq);
/* 8 rows x 32 pixels (16 accumulators) */
void q8_gemm_8x32__avx512vnni(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                              size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq);
/* the blocked-output forms (see the layout above) */
void q8_gemm_8x32__avx512vnni_c4(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp, size_t np,
                                 uint8_t *Y, size_t y_np, const q8_rq *rq);
void q8_cgemm_32x8__avx512vnni_c4(size_t M, size_t n0, size_t n1, size_t Wo, size_t rs, size_t cs, size_t K4,
                                  const int8_t *Wp, const uint8_t *x, const int32_t *koff, uint8_t *Y, size_t y_np,
                                  const q8_rq *rq);

#endif
