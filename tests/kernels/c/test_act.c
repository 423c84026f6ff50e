/* Vector activations (ec_simd_act.h over one ISA vocabulary), their scalar twins in ec_epi_row, and
 * optionally the f32-vact / f32-softmax kernels of that ISA, against libm in double precision.
 *   -DT_HEADER='"ec_simd_avx2.h"' [-DT_VACT=f32_vact__avx2] [-DT_SOFTMAX=f32_softmax__avx2]
 *   ./test_act [STEP]   sweeps every STEP-th float with |x| <= 100 plus a 1e-3 grid and special values;
 * prints "fn max_ulp max_rel max_abs worst_x subnormal_err" per function and exits non-zero past the limits. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include T_HEADER
#include "f32-softmax/f32-softmax-scalar.h"
#ifdef T_VACT
#include "f32-vact/f32-vact.h"
#endif
#ifdef T_SOFTMAX
#include "f32-softmax/f32-softmax.h"
#endif

#if defined(__arm__)
#define FTZ 1 /* AArch32 NEON flushes subnormals to zero */
#else
#define FTZ 0
#endif

enum { F_EXP, F_SIGMOID, F_SILU, F_TANH, F_ERF, F_GELU, F_GELU_TANH, NF };
static const char *k_names[NF] = {"exp", "sigmoid", "silu", "tanh", "erf", "gelu", "gelu_tanh"};
/* limits in ulp of the exact result where it is a normal float; gelu_tanh: absolute error / (1 + |y|),
 * since the formula itself cancels for x < 0. Subnormal results: within k_max_sub units of 2^-149. */
static const double k_max_ulp[NF] = {2.0, 3.0, 4.0, 3.0, 3.0, 7.0, 0.0};
static const double k_max_sub = 128.0;
static const double k_max_abs_gelu_tanh = 2e-7;
/* AArch32 divides by a reciprocal estimate and two Newton steps */
#define SLACK_ULP (FTZ ? 1.5 : 0.0)
#define SLACK_ABS (FTZ ? 2e-7 : 0.0)

static ec_v vfn(int f, ec_v x) {
  switch (f) {
  case F_EXP: return ec_vexp(x);
  case F_SIGMOID: return ec_vsigmoid(x);
  case F_SILU: return ec_vsilu(x);
  case F_TANH: return ec_vtanh(x);
  case F_ERF: return ec_verf(x);
  case F_GELU: return ec_vgelu(x);
  default: return ec_vgelu_tanh(x);
  }
}

static double ref(int f, double x) {
  switch (f) {
  case F_EXP: return exp(x);
  case F_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case F_SILU: return x / (1.0 + exp(-x));
  case F_TANH: return tanh(x);
  case F_ERF: return erf(x);
  case F_GELU: return 0.5 * x * erfc(-x * 0.70710678118654752440);
  default: return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
  }
}

/* y[i] = f(x[i]) through full vectors and one masked tail, like the kernels */
static void apply(int f, size_t n, const float *x, float *y) {
  size_t i = 0;
  for (; i + EC_VL <= n; i += EC_VL) ec_vst(y + i, vfn(f, ec_vld(x + i)));
  if (i < n) ec_vst_n(y + i, vfn(f, ec_vld_n(x + i, n - i)), n - i);
}

typedef struct {
  double ulp, rel, abs, worst, sub; /* sub: error of subnormal results in units of 2^-149 */
  long bad;
} stats;

static double ulp_of(double r) {
  const double a = fabs(r);
  if (a < FLT_MIN) return ldexp(1.0, -149);
  int e;
  frexp(a, &e); /* a = m 2^e, m in [0.5, 1) */
  return ldexp(1.0, e - 24);
}

static void score(int f, float x, float y, stats *s) {
  const double r = ref(f, (double)x);
  if (isnan(r) || isnan(y)) {
    /* -inf * 0 in silu / gelu: NaN in the scalar reference too */
    if (!(isnan(r) && isnan(y)) && !(isinf(x) && isnan(y))) {
      if (s->bad++ < 5) printf("  %s(%.9g) = %.9g, want %.9g\n", k_names[f], x, y, r);
    }
    return;
  }
  const float rf = (float)r; /* correctly rounded reference, inf past FLT_MAX */
  if (isinf(rf) || isinf(y)) {
    if (rf != y && s->bad++ < 5) printf("  %s(%.9g) = %.9g, want %.9g\n", k_names[f], x, y, r);
    return;
  }
  const double d = fabs((double)y - r), a = d / (1.0 + fabs(r));
  if (a > s->abs) s->abs = a;
  /* subnormal results (flushed to zero on AArch32 NEON), and silu's x e^x once e^x is subnormal
   * (x < -87.3; the scalar reference returns 0 there): absolute error in units of 2^-149 */
  if (FTZ && (fabsf(x) < FLT_MIN || fabs(r) < 0x1p-100)) return; /* inputs and intermediates flush */
  if (fabs(r) < FLT_MIN || (f == F_SILU && x < -87.33f)) {
    if (!FTZ && d / ldexp(1.0, -149) > s->sub) s->sub = d / ldexp(1.0, -149);
    return;
  }
  const double u = d / ulp_of(r);
  if (u > s->ulp) s->ulp = u, s->worst = x;
  if (d / fabs(r) > s->rel) s->rel = d / fabs(r);
}

static int check_tails(void) {
  /* lengths below, at and past whole vectors; lanes past n untouched; each lane as if alone */
  float x[4 * EC_VL + 3], y[4 * EC_VL + 4], one[EC_VL];
  int bad = 0;
  for (int f = 0; f < NF; f++)
    for (size_t n = 1; n <= 4 * EC_VL + 3; n += (n < 2 * EC_VL + 2 ? 1 : EC_VL - 1)) {
      for (size_t i = 0; i < n; i++) x[i] = (float)((int)(i * 37 % 29) - 14) * 0.61f + 0.013f * (float)f;
      for (size_t i = 0; i < n + 1; i++) y[i] = -12345.0f;
      apply(f, n, x, y);
      for (size_t i = 0; i < n; i++) {
        ec_vst(one, vfn(f, ec_vset1(x[i])));
        if (memcmp(&one[0], &y[i], sizeof(float)) != 0) bad++, printf("  tail %s n=%zu i=%zu\n", k_names[f], n, i);
      }
      if (y[n] != -12345.0f) bad++, printf("  tail %s n=%zu wrote past the end\n", k_names[f], n);
    }
  return bad;
}

static const float k_special[] = {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-40f, -1e-40f, 1.17549435e-38f, -1.17549435e-38f,
                                  1e-30f, -1e-30f, 1e-7f, -1e-7f, 0.625f, -0.625f, 0.6249999f, 0.9f, -0.9f,
                                  1.2727922f, -1.2727922f, 9.0f, -9.0f, 14.3f, -14.3f, 44.0f, -44.0f, 87.3f,
                                  -87.3f, 87.4f, -87.4f, 88.7228f, 88.72284f, 88.73f, -88.73f, -89.0f, -103.9f,
                                  -103.98f, -104.0f, -104.1f, -150.0f, 150.0f, 1e10f, -1e10f, 3.4e38f, -3.4e38f,
                                  INFINITY, -INFINITY, NAN, -NAN};
#define N_SPECIAL (sizeof(k_special) / sizeof(k_special[0]))

/* ec_epi_row's scalar twins: the same operations lane by lane, so bit-identical where the vector
 * divide is IEEE (not the AArch32 reciprocal iteration) */
static int check_twins(const float *x, size_t n) {
#if defined(EC_ACT_FAST_ROW)
  static const struct {
    int f;
    ec_act_kind k;
  } m[] = {{F_SIGMOID, EC_ACT_SIGMOID}, {F_SILU, EC_ACT_SILU}, {F_TANH, EC_ACT_TANH}, {F_GELU, EC_ACT_GELU}};
  float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)), *x0 = malloc(n * sizeof(float));
  int bad = 0;
  for (size_t i = 0; i < n; i++) x0[i] = x[i] + 0.0f; /* what ec_epi_row computes with a zero bias */
  for (size_t t = 0; t < sizeof(m) / sizeof(m[0]); t++) {
    const ec_act act = {m[t].k, 0.0f, 0.0f};
    ec_epi_row(x, a, n, 0.0f, NULL, 0, act);
    apply(m[t].f, n, x0, b);
    for (size_t i = 0; i < n; i++) {
      const int same = memcmp(&a[i], &b[i], sizeof(float)) == 0 || (isnan(a[i]) && isnan(b[i]));
      const int close = fabs((double)a[i] - b[i]) <= 4e-7 * (1.0 + fabs((double)b[i])) || same;
      if (!(FTZ ? close : same)) {
        if (bad++ < 5) printf("  twin %s(%.9g) = %.9g, vector %.9g\n", k_names[m[t].f], x0[i], a[i], b[i]);
      }
    }
  }
  /* with a residual added before or after the activation, and a bias */
  float *res = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) res[i] = 0.5f * x[(i * 7) % n];
  for (int before = 0; before < 2; before++)
    for (size_t t = 0; t < sizeof(m) / sizeof(m[0]); t++) {
      const ec_act act = {m[t].k, 0.0f, 0.0f};
      ec_epi_row(x, a, n, 0.25f, res, before, act);
      for (size_t i = 0; i < n; i++) x0[i] = before ? x[i] + 0.25f + res[i] : x[i] + 0.25f;
      apply(m[t].f, n, x0, b);
      for (size_t i = 0; i < n; i++) {
        const float want = before ? b[i] : b[i] + res[i];
        const int same = memcmp(&a[i], &want, sizeof(float)) == 0 || (isnan(a[i]) && isnan(want));
        const int close = fabs((double)a[i] - want) <= 4e-7 * (1.0 + fabs((double)want)) || same;
        if (!(FTZ ? close : same)) {
          if (bad++ < 5) printf("  twin+res %s(%.9g) = %.9g, vector %.9g\n", k_names[m[t].f], x0[i], a[i], want);
        }
      }
    }
  free(a), free(b), free(x0), free(res);
  printf("twins checked on %zu values: %d differ\n", n, bad);
  return bad;
#else
  (void)x, (void)n;
  printf("twins: not built here (no FMA instruction)\n");
  return 0;
#endif
}

#ifdef T_VACT
static int check_vact_kernel(void) {
  static const ec_act acts[] = {{EC_ACT_NONE, 0, 0},          {EC_ACT_RELU, 0, 0},        {EC_ACT_CLIP, -0.5f, 6.0f},
                                {EC_ACT_LEAKY_RELU, 0.1f, 0}, {EC_ACT_SIGMOID, 0, 0},     {EC_ACT_HARD_SIGMOID, 0.2f, 0.5f},
                                {EC_ACT_HARD_SWISH, 0, 0},    {EC_ACT_SILU, 0, 0},        {EC_ACT_TANH, 0, 0},
                                {EC_ACT_GELU, 0, 0}};
  const size_t N = 3 * EC_VL + 5;
  float x[3 * EC_VL + 5], y[3 * EC_VL + 6], z[3 * EC_VL + 5];
  int bad = 0;
  for (size_t i = 0; i < N; i++) x[i] = ((float)(i * 53 % 41) - 20.0f) * 0.37f;
  for (size_t n = 1; n <= N; n += 2) {
    for (size_t a = 0; a < sizeof(acts) / sizeof(acts[0]); a++) {
      y[n] = 777.0f;
      T_VACT(F32_VACT_ACT, acts[a], n, x, y);
      memcpy(z, x, n * sizeof(float));
      T_VACT(F32_VACT_ACT, acts[a], n, z, z); /* in place */
      for (size_t i = 0; i < n; i++) {
        const double r = ec_act_apply(acts[a], x[i]);
        if (!(fabs(y[i] - r) <= 1e-6 * (1.0 + fabs(r))) || memcmp(&y[i], &z[i], sizeof(float)) != 0)
          if (bad++ < 5) printf("  vact act %d n=%zu i=%zu: %.9g %.9g want %.9g\n", (int)acts[a].kind, n, i, y[i], z[i], r);
      }
      if (y[n] != 777.0f) bad++, printf("  vact act %d n=%zu wrote past the end\n", (int)acts[a].kind, n);
    }
    static const struct {
      f32_vact_op op;
      int f;
    } ops[] = {{F32_VACT_EXP, F_EXP}, {F32_VACT_ERF, F_ERF}, {F32_VACT_GELU_TANH, F_GELU_TANH}};
    for (size_t o = 0; o < 3; o++) {
      const ec_act none = {EC_ACT_NONE, 0, 0};
      T_VACT(ops[o].op, none, n, x, y);
      apply(ops[o].f, n, x, z);
      if (memcmp(y, z, n * sizeof(float)) != 0) bad++, printf("  vact op %d n=%zu differs\n", (int)ops[o].op, n);
    }
  }
  printf("f32_vact kernel: %d failures\n", bad);
  return bad;
}
#endif

#ifdef T_SOFTMAX
static int check_softmax_kernel(void) {
  static const size_t shapes[][3] = {{1, 1, 1}, {2, 7, 1}, {3, 33, 1}, {1, 1000, 1}, {2, 5, 3}, {1, 4, 17},
                                     {2, 9, 8}, {3, 3, 37}, {1, 1, 5}, {2, 2 * EC_VL + 1, 1}, {1, 6, 2 * EC_VL}};
  int bad = 0;
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
    const size_t o = shapes[s][0], n = shapes[s][1], in = shapes[s][2], total = o * n * in;
    float *x = malloc(total * sizeof(float)), *y = malloc(total * sizeof(float)), *r = malloc(total * sizeof(float));
    for (size_t i = 0; i < total; i++) x[i] = (float)((int)(i * 7919 % 2003) - 1001) * 0.013f;
    for (int lg = 0; lg < 2; lg++)
      for (int inplace = 0; inplace < 2; inplace++) {
        ec_f32_softmax_scalar(o, n, in, lg, x, r);
        if (inplace) {
          memcpy(y, x, total * sizeof(float));
          T_SOFTMAX(o, n, in, lg, y, y);
        } else {
          T_SOFTMAX(o, n, in, lg, x, y);
        }
        for (size_t i = 0; i < total; i++)
          if (!(fabs(y[i] - r[i]) <= 2e-6 * (1.0 + fabs(r[i])))) {
            if (bad++ < 5) printf("  softmax %zux%zux%zu log=%d i=%zu: %.9g want %.9g\n", o, n, in, lg, i, y[i], r[i]);
            break;
          }
      }
    free(x), free(y), free(r);
  }
  printf("f32_softmax kernel: %d failures\n", bad);
  return bad;
}
#endif

int main(int argc, char **argv) {
  const uint32_t step = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 64u;
  float lim;
  lim = 100.0f;
  uint32_t top;
  memcpy(&top, &lim, sizeof top);
  /* sweep values: every step-th bit pattern of [0, 100] with both signs, a 1e-3 grid, special values */
  size_t cap = 2 * (top / step + 1) + 200001 + N_SPECIAL, n = 0;
  float *x = malloc(cap * sizeof(float)), *y = malloc(cap * sizeof(float));
  for (uint64_t b = 0; b <= top; b += step) {
    float v;
    const uint32_t u = (uint32_t)b;
    memcpy(&v, &u, sizeof v);
    x[n++] = v;
    x[n++] = -v;
  }
  for (int i = -100000; i <= 100000; i++) x[n++] = (float)i * 1e-3f;
  for (size_t i = 0; i < N_SPECIAL; i++) x[n++] = k_special[i];
  int fail = 0;
  printf("isa lanes %d, %zu values\n", EC_VL, n);
  for (int f = 0; f < NF; f++) {
    stats s = {0, 0, 0, 0, 0, 0};
    apply(f, n, x, y);
    for (size_t i = 0; i < n; i++) score(f, x[i], y[i], &s);
    const int over = (f == F_GELU_TANH ? s.abs > k_max_abs_gelu_tanh + SLACK_ABS : s.ulp > k_max_ulp[f] + SLACK_ULP) ||
                     s.sub > k_max_sub;
    printf("%s %.3f %.3g %.3g %.9g %.1f%s\n", k_names[f], s.ulp, s.rel, s.abs, s.worst, s.sub,
           over || s.bad ? "  FAIL" : "");
    fail += over || s.bad;
  }
  { /* odd functions keep the sign of zero */
    const float mz = -0.0f;
    float r;
    for (int f = F_SILU; f < NF; f++) {
      apply(f, 1, &mz, &r);
      if (r != 0.0f || !signbit(r)) fail++, printf("  %s(-0) = %g\n", k_names[f], r);
    }
  }
  fail += check_tails();
  fail += check_twins(x, n);
#ifdef T_VACT
  fail += check_vact_kernel();
#endif
#ifdef T_SOFTMAX
  fail += check_softmax_kernel();
#endif
  free(x), free(y);
  printf(fail ? "FAILED\n" : "OK\n");
  return fail ? 1 : 0;
}
