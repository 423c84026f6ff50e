/* Reference channel-blocked kernels (any CB, plain loops): what the SIMD variants are tested against,
 * and the definition of each kernel's semantics (see f32-nchwc.h). */
#include "f32-nchwc.h"

void f32_nchwc_to_blocked__scalar(const f32_nchwc_reorder_shape *s, const float *x, float *y, size_t item) {
  const size_t CB = s->CB, nb = EC_DIV_UP(s->C, CB), n = item / nb, c0 = (item % nb) * CB;
  float *d = y + item * s->HW * CB;
  for (size_t p = 0; p < s->HW; p++)
    for (size_t l = 0; l < CB; l++) d[p * CB + l] = c0 + l < s->C ? x[(n * s->C + c0 + l) * s->HW + p] : 0.0f;
}

void f32_nchwc_from_blocked__scalar(const f32_nchwc_reorder_shape *s, const float *x, float *y, size_t item) {
  const size_t CB = s->CB, nb = EC_DIV_UP(s->C, CB), n = item / nb, c0 = (item % nb) * CB;
  const float *src = x + item * s->HW * CB;
  for (size_t l = 0; l < CB && c0 + l < s->C; l++)
    for (size_t p = 0; p < s->HW; p++) y[(n * s->C + c0 + l) * s->HW + p] = src[p * CB + l];
}

void f32_nchwc_conv1x1__scalar(const f32_nchwc_conv_shape *s, const f32_nchwc_conv_args *a, size_t item) {
  const size_t CB = s->CB, HW = s->Ho * s->Wo, np = EC_DIV_UP(HW, s->PC), kb = EC_DIV_UP(s->K, CB);
  const size_t kq = EC_DIV_UP(kb, s->KT), n = item / (kq * np), k0 = item % kq * s->KT;
  const size_t p0 = item / kq % np * s->PC, p1 = EC_MIN(HW, p0 + s->PC), cbn = EC_DIV_UP(s->C, CB);
  for (size_t k = k0; k < EC_MIN(kb, k0 + s->KT); k++) {
    size_t lo, hi; /* the block's input channels: its lanes' groups, weights zero outside a lane's own */
    f32_nchwc_1x1_range(s, k, &lo, &hi);
    const size_t G = s->IS > 1 ? s->IS : 1, cs = s->C / G;
    for (size_t p = p0; p < p1; p++)
      for (size_t l = 0; l < CB; l++) {
        float acc = a->bias[k * CB + l];
        size_t row = 0; /* shuffled input (IS > 1): the conv's channels c = j * G + i of [lo, hi), shuffle group
                           by group; each is input channel i * cs + j */
        for (size_t i = 0; i < G; i++)
          for (size_t c = lo; c < hi; c++) {
            if (G > 1 && c % G != i) continue;
            const size_t z = G > 1 ? i * cs + c / G : c;
            acc += a->x[((n * cbn + z / CB) * HW + p) * CB + z % CB] * a->w[(k * s->WS + row++) * CB + l];
          }
        const size_t o = ((n * kb + k) * s->YHW + p) * CB + l;
        a->y[o] = ec_epi_value(acc, a->res ? a->res + o : NULL, a->res_before_act, a->act);
      }
  }
}

void f32_nchwc_dwconv__scalar(const f32_nchwc_conv_shape *s, const f32_nchwc_conv_args *a, size_t item) {
  const size_t CB = s->CB, nr = EC_DIV_UP(s->Ho, s->PC), cbn = EC_DIV_UP(s->C, CB), blk = item / nr;
  const size_t h0 = item % nr * s->PC, h1 = EC_MIN(s->Ho, h0 + s->PC), cb = blk % cbn, taps = s->KH * s->KW;
  const float *x = a->x + blk * s->H * s->W * CB;
  for (size_t oh = h0; oh < h1; oh++)
    for (size_t ow = 0; ow < s->Wo; ow++)
      for (size_t l = 0; l < CB; l++) {
        float acc = a->bias[cb * CB + l];
        for (size_t kh = 0; kh < s->KH; kh++)
          for (size_t kw = 0; kw < s->KW; kw++) {
            const long ih = (long)(oh * s->SH + kh * s->DH) - (long)s->PT;
            const long iw = (long)(ow * s->SW + kw * s->DW) - (long)s->PL;
            if (ih < 0 || iw < 0 || ih >= (long)s->H || iw >= (long)s->W) continue;
            acc += x[((size_t)ih * s->W + (size_t)iw) * CB + l] * a->w[(cb * taps + kh * s->KW + kw) * CB + l];
          }
        const size_t o = ((blk * s->Ho + oh) * s->Wo + ow) * CB + l;
        a->y[o] = ec_epi_value(acc, a->res ? a->res + o : NULL, a->res_before_act, a->act);
      }
}

void f32_nchwc_pool__scalar(const f32_nchwc_pool_shape *s, const float *x, float *y, size_t item) {
  const size_t CB = s->CB, nr = EC_DIV_UP(s->Ho, s->RC), blk = item / nr;
  const size_t h0 = item % nr * s->RC, h1 = EC_MIN(s->Ho, h0 + s->RC);
  const float *xb = x + blk * s->H * s->W * CB;
  for (size_t oh = h0; oh < h1; oh++)
    for (size_t ow = 0; ow < s->Wo; ow++)
      for (size_t l = 0; l < CB; l++) {
        float acc = s->max ? -INFINITY : 0.0f;
        size_t cnt = 0;
        for (size_t kh = 0; kh < s->KH; kh++)
          for (size_t kw = 0; kw < s->KW; kw++) {
            const long ih = (long)(oh * s->SH + kh * s->DH) - (long)s->PT;
            const long iw = (long)(ow * s->SW + kw * s->DW) - (long)s->PL;
            /* counted with padding: inside the declared pads (ceil_mode cells past them are not) */
            if (ih >= -(long)s->PT && iw >= -(long)s->PL && ih < (long)(s->H + s->PB) && iw < (long)(s->W + s->PR))
              cnt += s->count_pad;
            if (ih < 0 || iw < 0 || ih >= (long)s->H || iw >= (long)s->W) continue;
            const float v = xb[((size_t)ih * s->W + (size_t)iw) * CB + l];
            if (s->max) acc = v > acc ? v : acc;
            else acc += v, cnt += !s->count_pad;
          }
        y[((blk * s->Ho + oh) * s->Wo + ow) * CB + l] = s->max ? acc : (cnt ? acc * (1.0f / (float)cnt) : 0.0f);
      }
}

void f32_nchwc_gavgpool__scalar(const f32_nchwc_pool_shape *s, const float *x, float *y, size_t item) {
  const size_t CB = s->CB, HW = s->H * s->W;
  for (size_t l = 0; l < CB; l++) {
    float acc = 0.0f;
    for (size_t p = 0; p < HW; p++) acc += x[(item * HW + p) * CB + l];
    y[item * CB + l] = acc * (1.0f / (float)HW);
  }
}

void f32_nchwc_scale__scalar(const f32_nchwc_scale_shape *s, const float *x, const float *sc, float *y, size_t item) {
  const size_t CB = s->CB;
  for (size_t p = 0; p < s->HW; p++)
    for (size_t l = 0; l < CB; l++) y[(item * s->HW + p) * CB + l] = x[(item * s->HW + p) * CB + l] * sc[item * CB + l];
}

void f32_nchwc_shuffle__scalar(const f32_nchwc_shuffle_shape *s, const float *x, float *y, size_t item) {
  const size_t CB = s->CB, nb = EC_DIV_UP(s->C, CB), n = item / nb, c0 = item % nb * CB, cg = s->C / s->G;
  for (size_t l = 0; l < CB; l++) {
    const size_t c = c0 + l, src = c < s->C ? c % s->G * cg + c / s->G : 0;
    for (size_t p = 0; p < s->HW; p++)
      y[(item * s->HW + p) * CB + l] = c < s->C ? x[((n * nb + src / CB) * s->HW + p) * CB + src % CB] : 0.0f;
  }
}
