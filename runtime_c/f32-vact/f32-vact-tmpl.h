/* Body of f32_vact__<isa>: include after an ec_simd_<isa>.h vocabulary with FN defined. The op
 * switch sits outside the loops; the last partial vector uses masked loads and stores. */
#define VACT_LOOP(EXPR)                                                                            \
  do {                                                                                             \
    size_t i = 0;                                                                                  \
    for (; i + EC_VL <= n; i += EC_VL) {                                                           \
      const ec_v v = ec_vld(x + i);                                                                \
      ec_vst(y + i, EXPR);                                                                         \
    }                                                                                              \
    if (i < n) {                                                                                   \
      const ec_v v = ec_vld_n(x + i, n - i);                                                       \
      ec_vst_n(y + i, EXPR, n - i);                                                                \
    }                                                                                              \
  } while (0)

F32_VACT_DECL(FN) {
  switch (op) {
  case F32_VACT_EXP: VACT_LOOP(ec_vexp(v)); return;
  case F32_VACT_ERF: VACT_LOOP(ec_verf(v)); return;
  case F32_VACT_GELU_TANH: VACT_LOOP(ec_vgelu_tanh(v)); return;
  case F32_VACT_ACT: break;
  }
  switch (act.kind) {
  case EC_ACT_SIGMOID: VACT_LOOP(ec_vsigmoid(v)); return;
  case EC_ACT_SILU: VACT_LOOP(ec_vsilu(v)); return;
  case EC_ACT_TANH: VACT_LOOP(ec_vtanh(v)); return;
  case EC_ACT_GELU: VACT_LOOP(ec_vgelu(v)); return;
  default: VACT_LOOP(ec_vact(act, v)); return;
  }
}
#undef VACT_LOOP
