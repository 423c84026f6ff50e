/* Test-only helpers: naive NCHW convolution reference, random data, comparison. */
#ifndef EC_TEST_REF_H
#define EC_TEST_REF_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ec_common.h"

static unsigned long long g_rng = 88172645463325252ULL;
static inline float frand(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (float)((g_rng >> 40) & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f;
}
static inline float *falloc(size_t n) {
  float *p = (float *)malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; i < n; i++) p[i] = frand();
  return p;
}

typedef struct {
  size_t N, C, H, W, K, G, KH, KW, SH, SW, DH, DW, PT, PL, PB, PR;
} conv_p;

static inline size_t conv_ho(const conv_p *p) { return (p->H + p->PT + p->PB - p->DH * (p->KH - 1) - 1) / p->SH + 1; }
static inline size_t conv_wo(const conv_p *p) { return (p->W + p->PL + p->PR - p->DW * (p->KW - 1) - 1) / p->SW + 1; }

/* w: [K][C/G][KH][KW] (ONNX layout) */
static inline void ref_conv(const conv_p *p, const float *x, const float *w, const float *bias,
                     const float *res, int before, ec_act act, float *y) {
  const size_t Ho = conv_ho(p), Wo = conv_wo(p), Cpg = p->C / p->G, Kpg = p->K / p->G;
  for (size_t n = 0; n < p->N; n++)
    for (size_t k = 0; k < p->K; k++) {
      const size_t g = k / Kpg;
      for (size_t oh = 0; oh < Ho; oh++)
        for (size_t ow = 0; ow < Wo; ow++) {
          double acc = bias ? bias[k] : 0.0;
          for (size_t c = 0; c < Cpg; c++)
            for (size_t kh = 0; kh < p->KH; kh++)
              for (size_t kw = 0; kw < p->KW; kw++) {
                long ih = (long)(oh * p->SH + kh * p->DH) - (long)p->PT;
                long iw = (long)(ow * p->SW + kw * p->DW) - (long)p->PL;
                if (ih < 0 || iw < 0 || ih >= (long)p->H || iw >= (long)p->W) continue;
                acc += (double)x[((n * p->C + g * Cpg + c) * p->H + ih) * p->W + iw] *
                       w[((k * Cpg + c) * p->KH + kh) * p->KW + kw];
              }
          size_t o = ((n * p->K + k) * Ho + oh) * Wo + ow;
          y[o] = ec_epi_value((float)acc, res ? &res[o] : NULL, before, act);
        }
    }
}

/* max |a-b| / (1 + |b|) */
static inline double max_err(const float *a, const float *b, size_t n) {
  double m = 0.0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));
    if (!(e <= m)) m = e; /* also catches NaN */
  }
  return m;
}

static const ec_act k_acts[] = {
    {EC_ACT_NONE, 0, 0},       {EC_ACT_RELU, 0, 0},         {EC_ACT_CLIP, 0.0f, 6.0f},
    {EC_ACT_LEAKY_RELU, 0.1f, 0}, {EC_ACT_SIGMOID, 0, 0},   {EC_ACT_HARD_SIGMOID, 0.2f, 0.5f},
    {EC_ACT_HARD_SWISH, 0, 0}, {EC_ACT_SILU, 0, 0},         {EC_ACT_TANH, 0, 0},
    {EC_ACT_GELU, 0, 0}};
#define N_ACTS (sizeof(k_acts) / sizeof(k_acts[0]))

#endif
