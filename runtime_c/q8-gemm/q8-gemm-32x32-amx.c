/* q8 GEMM on AMX (Sapphire Rapids and newer Xeons): one tdpbsud multiplies a 16-row x 64-byte tile of s8 weights
 * by a 16 k4-row x 16-pixel tile of u8 activations into 16 x 16 int32, 16384 multiply-adds per instruction (the
 * VNNI kernel's vpdpbusd: 64). The activations' packed layout [K4][NP][4] already is AMX's B-tile layout (row k4:
 * 16 pixels x 4 bytes, rows np * 4 bytes apart); the weights take their own layout (q8_pack_w_amx, q8-gemm.h).
 * Tiles 0-3 hold a 32-row x 32-pixel block of sums, 4-5 two weight panels, 6-7 two pixel blocks: 4 tdpbsud per
 * 4 tile loads. The sums go through memory to the AVX-512 requantization the VNNI kernel uses.
 * Linux hands out AMX tile state only on request (arch_prctl, Linux >= 5.16): without it the scalar form of
 * the same layout runs, with one line on stderr. */
#define _GNU_SOURCE /* syscall() */
#include <immintrin.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "q8-gemm.h"
#include "q8-gemm-avx512-out.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static atomic_int amx_state; /* 0: not asked yet, 1: granted, -1: refused */

int q8_amx_available(void)
{
    int s = atomic_load_explicit(&amx_state, memory_order_acquire);
    if (s == 0) {
        s = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 ? 1 : -1;
        int expected = 0;
        if (atomic_compare_exchange_strong(&amx_state, &expected, s) && s < 0)
            fprintf(stderr, "edgec: the OS does not grant AMX tile state (Linux >= 5.16 needed); int8 GEMMs run "
                            "their scalar form: compile for x86_64-avx512-vnni instead\n");
    }
    return s > 0;
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

/* one 32 x 32 block (tm, tn: whether its second 16-row panel / 16-pixel block exist; constant after inlining).
 * k4 row s of the pixels at x: x + s np 4, or (implicit GEMM) x + koff[s], rows of a block koff's fixed step apart */
static inline __attribute__((always_inline)) void block(int tm, int tn, size_t K4, size_t kb, size_t nb,
                                                        const int8_t *a0, size_t panel, const uint8_t *x,
                                                        size_t np, const int32_t *koff, int32_t *buf)
{
    _tile_zero(0);
    if (tn)
        _tile_zero(1);
    if (tm)
        _tile_zero(2);
    if (tm && tn)
        _tile_zero(3);
    for (size_t b = 0; b < nb; b++) {
        const size_t s = b * kb < K4 - kb ? b * kb : K4 - kb; /* the last block ends at K4 (q8-gemm.h) */
        const uint8_t *xb = koff ? x + koff[s] : x + s * np * 4;
        const size_t xs = koff ? (kb > 1 ? (size_t)(koff[s + 1] - koff[s]) : 64) : np * 4;
        const int8_t *ab = a0 + b * kb * 64;
        _tile_loadd(6, xb, xs);
        _tile_loadd(4, ab, kb * 4);
        _tile_dpbsud(0, 4, 6);
        if (tn) {
            _tile_loadd(7, xb + 64, xs);
            _tile_dpbsud(1, 4, 7);
        }
        if (tm) {
            _tile_loadd(5, ab + panel, kb * 4);
            _tile_dpbsud(2, 5, 6);
            if (tn)
                _tile_dpbsud(3, 5, 7);
        }
    }
    _tile_stored(0, buf, 128);
    if (tn)
        _tile_stored(1, buf + 16, 128);
    if (tm)
        _tile_stored(2, buf + 16 * 32, 128);
    if (tm && tn)
        _tile_stored(3, buf + 16 * 32 + 16, 128);
}

static void gemm(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp, size_t np, uint8_t *Y,
                 size_t y_stride, const q8_rq *rq, const int32_t *koff)
{
    const size_t kb = q8_amx_kb(K4), nb = (K4 + kb - 1) / kb, panel = nb * kb * 64; /* bytes per 16 rows */
    amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 4; t++) { /* sums: 16 rows x 16 int32 */
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    for (int t = 4; t < 6; t++) { /* weights: 16 rows x kb quads */
        cfg.rows[t] = 16;
        cfg.colsb[t] = (uint16_t)(kb * 4);
    }
    for (int t = 6; t < 8; t++) { /* activations: kb quad rows x 16 pixels */
        cfg.rows[t] = (uint8_t)kb;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
    _Alignas(64) int32_t buf[32 * 32];
    for (size_t n0 = 0; n0 < N; n0 += 32) {
        const int tn = n0 + 16 < N; /* np >= N rounded up to 16: the second block lies within it */
        const size_t n = N - n0 < 32 ? N - n0 : 32;
        for (size_t m0 = 0; m0 < M; m0 += 32) {
            const int tm = m0 + 16 < M;
            const int8_t *a0 = Wp + (m0 / 16) * panel;
            const uint8_t *x = Xp + n0 * 4;
            if (tm && tn)
                block(1, 1, K4, kb, nb, a0, panel, x, np, koff, buf);
            else if (tm)
                block(1, 0, K4, kb, nb, a0, panel, x, np, koff, buf);
            else if (tn)
                block(0, 1, K4, kb, nb, a0, panel, x, np, koff, buf);
            else
                block(0, 0, K4, kb, nb, a0, panel, x, np, koff, buf);
            const size_t mr = M - m0 < 32 ? M - m0 : 32;
            for (size_t r0 = 0; r0 < mr; r0 += 8) {
                __m512i acc[8][2];
                for (int r = 0; r < 8; r++) {
                    const __m512i b = _mm512_set1_epi32(r0 + (size_t)r < mr ? rq->bias[m0 + r0 + (size_t)r] : 0);
                    acc[r][0] = _mm512_add_epi32(_mm512_load_si512(buf + (r0 + (size_t)r) * 32), b);
                    acc[r][1] = _mm512_add_epi32(_mm512_load_si512(buf + (r0 + (size_t)r) * 32 + 16), b);
                }
                if (tn)
                    q8_store_rows_avx512(8, 2, mr - r0, n, acc, Y, y_stride, rq, m0 + r0, n0);
                else
                    q8_store_rows_avx512(8, 1, mr - r0, n, acc, Y, y_stride, rq, m0 + r0, n0);
            }
        }
    }
    _tile_release();
}

void q8_gemm_32x32__amx(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp, size_t np, uint8_t *Y,
                        size_t y_stride, const q8_rq *rq)
{
    if (q8_amx_available())
        gemm(M, N, K4, Wp, Xp, np, Y, y_stride, rq, NULL);
    else
        q8_gemm_amx__scalar(M, N, K4, Wp, Xp, np, Y, y_stride, rq);
}

void q8_igemm_32x32__amx(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *x, const int32_t *koff,
                         uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    if (q8_amx_available())
        gemm(M, N, K4, Wp, x, q8_pack_np(N), Y, y_stride, rq, koff);
    else
        q8_igemm_amx__scalar(M, N, K4, Wp, x, koff, Y, y_stride, rq);
}
