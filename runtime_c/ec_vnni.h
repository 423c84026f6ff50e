/* vpdpbusd (u8 x s8 4-deep dot products added to int32 lanes) for the VNNI kernels.
 * gcc 12 expands _mm512_dpbusd_epi32 without tying the accumulator to the destination: every
 * accumulator of an unrolled tile was copied each step (8-16 extra vmovdqa per 8-16 vpdpbusd, some
 * spilled), so under gcc the instruction is written out with the accumulator as a "+v" operand. */
#ifndef EC_VNNI_H
#define EC_VNNI_H

#include <immintrin.h>

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
