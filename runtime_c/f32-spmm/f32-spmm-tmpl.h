/* Sparse x dense kernel body, written once over the ec_v vocabulary of the including ISA
 * header. The includer defines SPMM_BR, SPMM_BC (block shape) and SPMM_NAME. Each block loads
 * SPMM_BC input rows once and feeds SPMM_BR output rows: 2 vectors of pixels per row. */

static inline void spmm_tile(size_t rows, size_t nn, const f32_bsr *w, size_t rb, const float *x,
                             size_t x_stride, float *y, size_t y_stride, const ec_epilogue *ep,
                             size_t m0, size_t n0)
{
    ec_v acc[SPMM_BR][2];
    for (int r = 0; r < SPMM_BR; r++) {
        float b = ep && ep->bias && (size_t)r < rows ? ep->bias[m0 + r] : 0.0f;
        acc[r][0] = acc[r][1] = ec_vset1(b);
    }
    for (int32_t blk = w->row_ptr[rb]; blk < w->row_ptr[rb + 1]; blk++) {
        const float *v = w->val + (size_t)blk * SPMM_BR * SPMM_BC;
        const float *xk = x + (size_t)w->col[blk] * x_stride;
        for (int c = 0; c < SPMM_BC; c++) {
            ec_v x0, x1;
            if (nn == 2 * EC_VL) {
                x0 = ec_vld(xk + c * x_stride);
                x1 = ec_vld(xk + c * x_stride + EC_VL);
            } else {
                x0 = ec_vld_n(xk + c * x_stride, nn < EC_VL ? nn : EC_VL);
                x1 = nn > EC_VL ? ec_vld_n(xk + c * x_stride + EC_VL, nn - EC_VL) : ec_vzero();
            }
            for (int r = 0; r < SPMM_BR; r++) {
                const ec_v vv = ec_vset1(v[r * SPMM_BC + c]);
                acc[r][0] = ec_vfma(acc[r][0], x0, vv);
                acc[r][1] = ec_vfma(acc[r][1], x1, vv);
            }
        }
    }
    for (size_t r = 0; r < rows; r++) {
        float *yr = y + (m0 + r) * y_stride;
        const float *res = ep && ep->residual ? ep->residual + (m0 + r) * y_stride + n0 : NULL;
        const int before = ep ? ep->residual_before_act : 1;
        const ec_act act = ep ? ep->act : (ec_act){EC_ACT_NONE, 0.0f, 0.0f};
        if (nn == 2 * EC_VL) {
            ec_vst(yr, ec_vepi(acc[r][0], res, before, act));
            ec_vst(yr + EC_VL, ec_vepi(acc[r][1], res ? res + EC_VL : NULL, before, act));
        } else {
            size_t n0 = nn < EC_VL ? nn : EC_VL;
            ec_vst_n(yr, ec_vepi_n(acc[r][0], res, n0, before, act), n0);
            if (nn > EC_VL)
                ec_vst_n(yr + EC_VL, ec_vepi_n(acc[r][1], res ? res + EC_VL : NULL, nn - EC_VL,
                                               before, act), nn - EC_VL);
        }
    }
}

void SPMM_NAME(size_t M, size_t N, const f32_bsr *w, const float *x, size_t x_stride, float *y,
               size_t y_stride, const ec_epilogue *ep)
{
    for (size_t rb = 0; rb * SPMM_BR < M; rb++) {
        const size_t m0 = rb * SPMM_BR, rows = M - m0 < SPMM_BR ? M - m0 : SPMM_BR;
        for (size_t n0 = 0; n0 < N; n0 += 2 * EC_VL) {
            const size_t nn = N - n0 < 2 * EC_VL ? N - n0 : 2 * EC_VL;
            spmm_tile(rows, nn, w, rb, x + n0, x_stride, y + n0, y_stride, ep, m0, n0);
        }
    }
}
