/* vpdpbusd (u8 x s8 4-deep dot products added to int32 lanes) for the VNNI kernels.
 * gcc 12 expands _mm512_dpbusd_epi32 without tying the accumulator to the destination: every
 * accumulator of an unrolled tile was copied each step (8-16 extra vmovdqa per 8-16 vpdpbusd, some
 * spilled), so under gcc the instruction is written out with the accumulator as a "+v" operand. */
#ifndef EC_VNNI_H
#define EC_VNNI_H

#include <immintrin.h>

#ifdef __AVX512VNNI__
#if defined(__GNUC__) && !defined(__clang__)
static inline __attribute__((always_inline)) __m512i ec_dpbusd512(__m512i acc, __m512i u8, __m512i s8)
{
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "v"(s8));
    return acc;
}
static inline __attribute__((always_inline)) __m256i ec_dpbusd256(__m256i acc, __m256i u8, __m256i s8)
{
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "v"(s8));
    return acc;
}
#else
static inline __m512i ec_dpbusd512(__m512i acc, __m512i u8, __m512i s8) { return _mm512_dpbusd_epi32(acc, u8, s8); }
static inline __m256i ec_dpbusd256(__m256i acc, __m256i u8, __m256i s8) { return _mm256_dpbusd_epi32(acc, u8, s8); }
#endif
#endif

#ifdef __AVXVNNI__
/* AVX-VNNI (Intel cores with VNNI but no AVX-512: Alder Lake, Raptor Lake, N100-class): the VEX form. The plain
 * mnemonic assembles to the EVEX (AVX512-VNNI) encoding, which those cores do not decode; "x" keeps the operands
 * in ymm0-15, which VEX can name. */
#if defined(__GNUC__) && !defined(__clang__)
static inline __attribute__((always_inline)) __m256i ec_dpbusd256_vex(__m256i acc, __m256i u8, __m256i s8)
{
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u8), "x"(s8));
    return acc;
}
#else
static inline __m256i ec_dpbusd256_vex(__m256i acc, __m256i u8, __m256i s8) { return _mm256_dpbusd_avx_epi32(acc, u8, s8); }
#endif
#endif

#endif
