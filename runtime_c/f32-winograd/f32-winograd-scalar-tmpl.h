/* Portable Winograd F(WG_M,3) transforms: plain matrix products with the tables below, one tile at
 * a time. The reference the SIMD transforms (f32-winograd-tmpl.h) are tested against; the
 * including file defines WG_M, FN_IN, FN_OUT, FN_INCB and FN_OUTCB. Same matrices as codegen/ops/winograd.py
 * (interpolation points 0, +-1 for F(2,3); 0, +-1, +-2 for F(4,3); 0, +-1, +-2, +-1/2 for F(6,3)). */
#define WG_A (WG_M + 2)

#if WG_M == 2
static const float BT[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
static const float AT[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
#elif WG_M == 4
static const float BT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                               {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
static const float AT[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
#elif WG_M == 6
static const float BT[8][8] = {
    {1, 0, -5.25f, 0, 5.25f, 0, -1, 0},        {0, 1, 1, -4.25f, -4.25f, 1, 1, 0},
    {0, -1, 1, 4.25f, -4.25f, -1, 1, 0},       {0, 0.5f, 0.25f, -2.5f, -1.25f, 2, 1, 0},
    {0, -0.5f, 0.25f, 2.5f, -1.25f, -2, 1, 0}, {0, 2, 4, -2.5f, -5, 0.5f, 1, 0},
    {0, -2, 4, 2.5f, -5, -0.5f, 1, 0},         {0, -1, 0, 5.25f, 0, -5.25f, 0, 1}};
static const float AT[6][8] = {{1, 1, 1, 1, 1, 1, 1, 0},
                               {0, 1, -1, 2, -2, 0.5f, -0.5f, 0},
                               {0, 1, 1, 4, 4, 0.25f, 0.25f, 0},
                               {0, 1, -1, 8, -8, 0.125f, -0.125f, 0},
                               {0, 1, 1, 16, 16, 0.0625f, 0.0625f, 0},
                               {0, 1, -1, 32, -32, 0.03125f, -0.03125f, 1}};
#else
#error "WG_M must be 2, 4 or 6"
#endif

/* B^T d B of one tile into v (value xi at v[xi*vs]) */
static void wg_in_tile(const float d[WG_A][WG_A], float *v, size_t vs) {
  float t[WG_A][WG_A];
  for (int i = 0; i < WG_A; i++) /* t = d B */
    for (int c = 0; c < WG_A; c++) {
      float s = 0.0f;
      for (int j = 0; j < WG_A; j++) s += d[i][j] * BT[c][j];
      t[i][c] = s;
    }
  for (int r = 0; r < WG_A; r++) /* V = B^T t */
    for (int c = 0; c < WG_A; c++) {
      float s = 0.0f;
      for (int i = 0; i < WG_A; i++) s += BT[r][i] * t[i][c];
      v[(size_t)(r * WG_A + c) * vs] = s;
    }
}

/* A^T M A + b0 of one tile, M value xi at mm[xi*ms] */
static void wg_out_tile(const float *mm, size_t ms, float b0, float o[WG_M][WG_M]) {
  float t[WG_M][WG_A];
  for (int a = 0; a < WG_M; a++) /* t = A^T M */
    for (int c = 0; c < WG_A; c++) {
      float s = 0.0f;
      for (int r = 0; r < WG_A; r++) s += AT[a][r] * mm[(size_t)(r * WG_A + c) * ms];
      t[a][c] = s;
    }
  for (int a = 0; a < WG_M; a++)
    for (int b = 0; b < WG_M; b++) {
      float s = b0;
      for (int c = 0; c < WG_A; c++) s += t[a][c] * AT[b][c];
      o[a][b] = s;
    }
}

F32_WINOGRAD_IN_DECL(FN_IN) {
  for (size_t g = 0, k = 0; g < nr; g++)
    for (size_t tw = 0; tw < len[g]; tw++, k++) {
      const float *pt = p + src[g] + tw;
      float d[WG_A][WG_A];
      for (int i = 0; i < WG_A; i++)
        for (int j = 0; j < WG_A; j++) d[i][j] = pt[(size_t)(j % WG_M) * ps + (size_t)i * q + (size_t)(j / WG_M)];
      wg_in_tile(d, v + k, vs);
    }
}

F32_WINOGRAD_OUT_DECL(FN_OUT) {
  for (size_t k = 0; k < nk; k++) {
    float o[WG_M][WG_M];
    wg_out_tile(mm + k, ms, bias ? bias[k] : 0.0f, o);
    for (size_t a = 0; a < rows; a++)
      for (size_t b = 0; b < cols; b++) {
        const size_t i = k * ys + a * ldy + b;
        y[i] = ec_epi_value(o[a][b], res ? res + i : NULL, before, act);
      }
  }
}

/* inc's twin: lane l of the k-th tile's pixels is channel l of x's block, zero outside the map */
F32_WINOGRAD_INCB_DECL(FN_INCB) {
  for (size_t k = 0; k < nt; k++) {
    const size_t t = t0 + k;
    const ptrdiff_t i0 = (ptrdiff_t)(t / TW * WG_M) - (ptrdiff_t)PT, j0 = (ptrdiff_t)(t % TW * WG_M) - (ptrdiff_t)PL;
    for (size_t l = 0; l < cb; l++) {
      float d[WG_A][WG_A];
      for (int i = 0; i < WG_A; i++)
        for (int j = 0; j < WG_A; j++) {
          const ptrdiff_t r = i0 + i, c = j0 + j;
          const int in = r >= 0 && c >= 0 && r < (ptrdiff_t)H && c < (ptrdiff_t)W;
          d[i][j] = in ? x[((size_t)r * W + (size_t)c) * cb + l] : 0.0f;
        }
      wg_in_tile(d, v + k * cb + l, vs);
    }
  }
}

/* outc's twin: channel k is lane k % cb of block k / cb */
F32_WINOGRAD_OUTCB_DECL(FN_OUTCB) {
  for (size_t k = 0; k < nk; k++) {
    float o[WG_M][WG_M];
    wg_out_tile(mm + k, ms, bias ? bias[k] : 0.0f, o);
    for (size_t a = 0; a < rows; a++)
      for (size_t b = 0; b < cols; b++) {
        const size_t i = k / cb * ys + (a * ldy + b) * cb + k % cb;
        y[i] = ec_epi_value(o[a][b], res ? res + i : NULL, before, act);
      }
  }
}

#undef WG_A
